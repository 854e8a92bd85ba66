"""Load the emulator with data: the demo project AURORA, or N synthetic issues for the bench.

The demo project is the hub's demo data (``AURORA-9001`` … ``AURORA-9030``, links, the sprints
«Спринт 1» / «Спринт 2», comments; ``AURORA-9001`` has 7 comments, the newest 500 characters long),
so the sync agent's first sync of a fresh ``make run`` changes nothing a user sees.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from hub.emulator.store import SYNC_USER, UTC, Store

BASE_LABEL = "AWPCA"


def _dataset() -> dict[str, Any]:
    """The hub's demo dataset when it is importable without Django, else the same shapes here."""
    try:
        import hub.demo as hub_demo  # the hub's own dataset module, when it is pure data
        return hub_demo.demo_dataset()
    except Exception:  # noqa: BLE001 - not there (or not Django-free): use ours
        return _local_dataset()


def _local_dataset() -> dict[str, Any]:
    summaries = [
        "Платёжный шлюз: повторные списания при таймауте", "Экспорт отчёта в XLSX падает на больших файлах",
        "Мобильное приложение: push-уведомления не приходят на Android 14", "Личный кабинет: медленная загрузка истории",
        "Интеграция с 1С: дубли контрагентов", "SSO через Keycloak для подрядчиков", "Каталог: фильтр по складу",
        "Миграция БД на PostgreSQL 17", "Нагрузочное тестирование API заказов", "Уведомления по e-mail: шаблоны",
        "Поиск по артикулу не учитывает дефисы", "Аудит прав доступа к админке", "Кэширование каталога в Redis",
        "Карточка товара: галерея на мобильных", "Отчёт по остаткам для логистики", "Таймауты при оплате картой Мир",
        "Перевод интерфейса на казахский", "Резервное копирование: проверка восстановления", "Логи приложений в Loki",
        "Алерты по задержкам очереди заказов", "Импорт прайс-листов поставщиков", "Новый онбординг для B2B",
        "Ограничение частоты запросов к API партнёров", "Удаление персональных данных по запросу",
        "Дашборд продаж для руководства", "Обновление Django до 5.2", "Форма обратной связи: капча",
        "Сбои синхронизации остатков ночью", "Единый справочник единиц измерения", "Документация публичного API",
    ]
    statuses = ["In Progress", "To Do", "In Review", "Done", "To Do", "In Progress"]
    priorities = ["High", "Medium", "Highest", "Low", "Medium"]
    assignees = ["jdoe", "asmirnova", "pivanov", None]
    base = dt.datetime(2026, 11, 2, 9, 0, tzinfo=UTC)
    issues = []
    for n, summary in enumerate(summaries):
        number = 9001 + n
        issues.append({
            "key": f"AURORA-{number}", "summary": summary, "issue_type": "Bug" if n % 4 == 0 else "Task",
            "status": statuses[n % len(statuses)], "priority": priorities[n % len(priorities)],
            "assignee": assignees[n % len(assignees)], "reporter": "jdoe",
            "duedate": (dt.date(2026, 11, 20) + dt.timedelta(days=n)).isoformat() if n % 3 != 2 else None,
            "labels": [BASE_LABEL], "description": f"{summary}. Подробности — в комментариях.",
            "components": [["api", "ui", "backend", "infra"][n % 4]],
            "sprint": "Спринт 1" if n < 12 else ("Спринт 2" if n < 24 else None),
            "created": base + dt.timedelta(hours=n), "updated": base + dt.timedelta(days=10, hours=n),
        })
    comments: dict[str, list[dict[str, Any]]] = {}
    authors = ["jdoe", "asmirnova", "pivanov"]
    first = []
    for i in range(7):
        body = f"Комментарий {i + 1}: воспроизвели на стенде, смотрим логи шлюза." if i < 6 else (
            "Итог разбора: повторные списания возникают, когда банк отвечает дольше 30 секунд, а клиент нажимает "
            "«Оплатить» ещё раз. " * 5)[:500]
        first.append({"author": authors[i % 3], "body": body, "created": base + dt.timedelta(days=3, hours=i)})
    comments["AURORA-9001"] = first
    for n in range(1, 30, 3):
        key = f"AURORA-{9001 + n}"
        comments[key] = [{"author": "asmirnova", "body": f"Посмотрела {key}, нужна оценка.", "created": base + dt.timedelta(days=4, hours=n)}]
    links = [("Blocks", "AURORA-9001", "AURORA-9002"), ("Blocks", "AURORA-9001", "AURORA-9003"),
             ("Relates", "AURORA-9004", "AURORA-9005"), ("Blocks", "AURORA-9008", "AURORA-9009"),
             ("Duplicate", "AURORA-9016", "AURORA-9001"), ("Relates", "AURORA-9020", "AURORA-9021"),
             ("Blocks", "AURORA-9028", "AURORA-9030")]
    sprints = [{"id": 1, "name": "Спринт 1", "state": "active", "start": "2026-11-16T09:00:00.000Z", "end": "2026-11-30T09:00:00.000Z"},
               {"id": 2, "name": "Спринт 2", "state": "future", "start": None, "end": None}]
    return {"project": {"key": "AURORA", "name": "Аврора"}, "issues": issues, "comments": comments,
            "links": links, "sprints": sprints}


def _base(store: Store, *, sync_token: str) -> None:
    store.add_user(SYNC_USER, "Achilles Sync", token=sync_token)
    store.add_user("jdoe", "John Doe", token="jdoe-pat")
    store.add_user("asmirnova", "Анна Смирнова", token="asmirnova-pat")
    store.add_user("pivanov", "Пётр Иванов", token="pivanov-pat")
    store.add_user("admin", "Jira Admin", token="admin-pat")
    store.add_project("LEGACY", "Архив (только чтение)", components=("api",), read_only=True)


def load_demo(store: Store, *, sync_token: str) -> None:
    data = _dataset()
    _base(store, sync_token=sync_token)
    project = data["project"]
    store.add_project(project["key"], project["name"], components=("api", "ui", "backend", "infra"))
    store.add_board(1, f"{project['key']} board", project["key"])
    by_name = {}
    for s in data["sprints"]:
        store.add_sprint(s["id"], s["name"], 1, s["state"], start=s.get("start"), end=s.get("end"))
        by_name[s["name"]] = s["id"]
    for i in data["issues"]:
        store.seed_issue(key=i["key"], summary=i["summary"], issue_type=i["issue_type"], status=i["status"],
                         priority=i["priority"], assignee=i["assignee"], reporter=i.get("reporter", "jdoe"),
                         duedate=i["duedate"], labels=i["labels"], description=i["description"],
                         components=i.get("components"), sprint_ids=[by_name[i["sprint"]]] if i.get("sprint") else [],
                         created=i["created"], updated=i["updated"])
    for key, cs in data["comments"].items():
        for c in cs:
            store.seed_comment(key, author=c["author"], body=c["body"], created=c["created"])
    for link_type, source, dest in data["links"]:
        store.seed_link(link_type, source, dest)


def load_bench(store: Store, *, sync_token: str, count: int, project: str = "BENCH") -> None:
    """``count`` issues in one project with the base label, a comment each and a link per ten."""
    _base(store, sync_token=sync_token)
    store.add_project(project, "Bench", components=("api",))
    store.add_board(1, f"{project} board", project)
    store.add_sprint(1, "Спринт 1", 1, "active")
    base = dt.datetime(2026, 1, 1, tzinfo=UTC)
    for n in range(1, count + 1):
        key = f"{project}-{n}"
        when = base + dt.timedelta(seconds=n)
        store.seed_issue(key=key, summary=f"Задача {n}: проверка производительности зеркала", status="To Do",
                         assignee="jdoe", labels=[BASE_LABEL], description=f"Описание задачи {n}.",
                         sprint_ids=[1] if n % 2 else [], created=when, updated=when)
        store.seed_comment(key, author="jdoe", body=f"Комментарий к задаче {n}.", created=when)
        if n % 10 == 0:
            store.seed_link("Relates", key, f"{project}-{n - 1}")


def build_store(*, data: str = "demo", sync_token: str = "sync-pat", count: int = 0, base_url: str = "http://127.0.0.1") -> Store:
    store = Store(base_url=base_url)
    if data == "demo":
        load_demo(store, sync_token=sync_token)
    elif data == "bench":
        load_bench(store, sync_token=sync_token, count=count or 1000)
    elif data == "empty":
        _base(store, sync_token=sync_token)
    else:
        raise ValueError(f"unknown data set {data!r} (demo, bench, empty)")
    return store
