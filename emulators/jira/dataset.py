"""The hub's demo dataset: project AURORA, issues AURORA-9001 … AURORA-9030, in the protocol's upload
shape (``POST /api/hub/sync-agent/upload``), plain dicts only — the Jira emulator loads the same data.

Deterministic: the same call returns the same data. AURORA-9001 has exactly 7 comments, the newest
500 characters long (the seed's scenario «Задача с семью комментариями»).
"""

from __future__ import annotations

import datetime as dt

PROJECT = "AURORA"
BASE_LABEL = "AWPCA"
SPRINTS = ("Спринт 1", "Спринт 2")
FIRST, LAST = 9001, 9030
PEOPLE = ("anna.ivanova", "boris.petrov", "vera.smirnova", "gleb.orlov", "dina.kuznetsova")
STATUSES = ("To Do", "In Progress", "In Review", "Done")
PRIORITIES = ("High", "Medium", "Low")
TYPES = ("Task", "Story", "Bug")

SUMMARIES = (
    "Платёжный шлюз: повторные списания при таймауте банка",
    "Личный кабинет: экспорт выписки в PDF",
    "Миграция сервиса уведомлений на новую очередь",
    "Отчёт по оттоку клиентов за квартал",
    "Ошибка 500 при смене тарифа в мобильном приложении",
    "Единый вход через корпоративный SSO",
    "Ограничение частоты запросов к публичному API",
    "Перевод справочника отделений на новый формат адресов",
    "Мониторинг задержек репликации базы",
    "Автотесты сценария оформления заявки",
    "Уведомление о просроченном платеже по SMS",
    "Поиск по архиву договоров",
    "Обновление библиотеки криптографии до поддерживаемой версии",
    "Дашборд качества данных для аналитиков",
    "Чат-бот поддержки: передача диалога оператору",
    "Интеграция с бухгалтерией: выгрузка актов",
    "Роль аудитора с доступом только на чтение",
    "Ночной пересчёт лимитов: ускорить в два раза",
    "Шаблоны писем: единый стиль и подписи",
    "Импорт заявок из CSV с проверкой дублей",
    "Журнал действий администратора",
    "Карточка клиента: история обращений",
    "Резервное копирование файлового хранилища",
    "Отказоустойчивость очереди платежей",
    "Документация публичного API: примеры запросов",
    "Согласование заявок в два шага",
    "Чистка устаревших feature-флагов",
    "Нагрузочный тест личного кабинета",
    "Метрики конверсии воронки оформления",
    "Ретроспектива релиза 4.2: действия",
)

# (from, to, type): "from blocks/relates to/duplicates to"; uploaded on both sides as Jira shows them.
LINKS = (
    (9001, 9002, "Blocks"),
    (9001, 9024, "Relates"),
    (9003, 9011, "Blocks"),
    (9005, 9018, "Relates"),
    (9006, 9017, "Blocks"),
    (9007, 9025, "Relates"),
    (9009, 9023, "Relates"),
    (9012, 9022, "Relates"),
    (9014, 9029, "Blocks"),
    (9019, 9001, "Relates"),
    (9020, 9016, "Duplicate"),
    (9026, 9017, "Blocks"),
)

NOTES = {
    "AURORA-9001": {
        "fact_status": "ждём ответа банка",
        "note": "Повтор воспроизводится только на таймауте > 30 с.",
        "next_step": "Созвон с банком в четверг",
        "owner": "anna.ivanova",
    },
    "AURORA-9005": {
        "fact_status": "блокер",
        "note": "Падает на тарифах с промокодом.",
        "next_step": "Починить валидацию",
        "owner": "gleb.orlov",
    },
    "AURORA-9006": {
        "fact_status": "на ревью у ИБ",
        "note": "",
        "next_step": "Дождаться заключения ИБ",
        "owner": "vera.smirnova",
    },
    "AURORA-9014": {"fact_status": "готово, ждёт релиза", "note": "", "next_step": "", "owner": "dina.kuznetsova"},
}

_BASE_TIME = dt.datetime(2026, 11, 2, 9, 0, tzinfo=dt.UTC)


def _jira_time(value: dt.datetime) -> str:
    return value.strftime("%Y-%m-%dT%H:%M:%S.000+0000")


def _comments(number: int) -> list[dict]:
    count = 7 if number == FIRST else number % 4  # 0…3 comments on the others
    comments = []
    for i in range(1, count + 1):
        created = _BASE_TIME + dt.timedelta(days=i * 2, hours=number % 7)
        body = f"Комментарий {i} к AURORA-{number}: проверили, детали в описании."
        if number == FIRST and i == count:
            head = "Итог созвона с банком: повторные списания возникают, когда ответ банка приходит позже 30 секунд. "
            body = (head + "Мы повторяем запрос, а банк обрабатывает оба. " * 20)[:500]
        comments.append(
            {
                "id": str(number * 100 + i),
                "author": PEOPLE[(number + i) % len(PEOPLE)],
                "created": _jira_time(created),
                "body": body,
            }
        )
    return comments


def demo_issues() -> list[dict]:
    """The 30 demo issues, each a dict of the upload shape (links of both sides, comments, raw fields)."""
    links: dict[int, list[dict]] = {n: [] for n in range(FIRST, LAST + 1)}
    for source, target, kind in LINKS:
        links[source].append({"link_type": kind, "direction": "outward", "other_key": f"{PROJECT}-{target}"})
        links[target].append({"link_type": kind, "direction": "inward", "other_key": f"{PROJECT}-{source}"})
    issues = []
    for index, number in enumerate(range(FIRST, LAST + 1)):
        key = f"{PROJECT}-{number}"
        comments = _comments(number)
        updated = _BASE_TIME + dt.timedelta(days=20, hours=index)
        due = (dt.date(2026, 11, 20) + dt.timedelta(days=index * 2)) if index % 5 != 4 else None
        status = STATUSES[index % len(STATUSES)]
        sprint = SPRINTS[0] if index < 15 else SPRINTS[1]
        description = (
            f"{SUMMARIES[index]}.\n\nКонтекст: задача проекта «Аврора», команда платформы. "
            f"Критерий готовности: изменения в проде, метрики на дашборде."
        )
        issues.append(
            {
                "key": key,
                "project": PROJECT,
                "summary": SUMMARIES[index],
                "status": status,
                "issue_type": TYPES[index % len(TYPES)],
                "priority": PRIORITIES[index % len(PRIORITIES)],
                "assignee": PEOPLE[index % len(PEOPLE)],
                "duedate": due.isoformat() if due else None,
                "sprint": sprint,
                "labels": [BASE_LABEL] + (["backend"] if index % 3 == 0 else []),
                "updated": _jira_time(updated),
                "fields": {
                    "summary": SUMMARIES[index],
                    "description": description,
                    "status": {"name": status},
                    "labels": [BASE_LABEL],
                },
                "links": links[number],
                "comments": comments,
            }
        )
    return issues


def demo_notes() -> dict[str, dict[str, str]]:
    """Hub notes of some demo issues (never sent to Jira)."""
    return {key: dict(value) for key, value in NOTES.items()}
