"""`make screenshots`: the chat, agents and tokens pages at 1366 and 375 px, light and dark, into
var/screenshots/ for review (daphne on the test database, seeded like a working week).

Not collected by `make test` (the file name is not test_*); run it with
``pytest tests/browser/screenshots.py``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from django.conf import settings
from django.utils import timezone

from achilles import services as core_services
from agents.models import AgentRun
from agents.services import agent_create
from conversations.models import Conversation, Message
from tests.browser.conftest import sign_in

pytestmark = [pytest.mark.browser]

OUT = Path(settings.VAR_DIR) / "screenshots"
ANSWER = """## Ежегодный отпуск

Сотруднику положено **28 календарных дней** оплачиваемого отпуска в год [1]. Заявление подают
не позднее чем за две недели [2].

| вид отпуска | дней | кто согласует |
|---|---|---|
| основной | 28 | руководитель |
| дополнительный (ненормированный день) | 3 | HR |

Проверить остаток можно в личном кабинете:

```bash
curl -H "Authorization: Bearer $TOKEN" https://hr.example.com/api/vacation/balance
```
"""


def _seed(user, model_factory):
    model_factory(name="builtin-extractive", provider="builtin", is_default=True)
    model_factory(name="gpt-4o-mini", provider="openai", options={"base_url": "http://127.0.0.1:9/v1"})
    titles = [
        "Сколько дней отпуска положено?",
        "Как оформить командировку в Казань",
        "Пароль от гостевого Wi-Fi",
        "Кто согласует закупку ноутбуков",
        "График дежурств на праздники",
    ]
    conversations = [Conversation.objects.create(user=user, title=t) for t in reversed(titles)]
    main = conversations[-1]
    Message.objects.create(conversation=main, role="user", content="Сколько дней отпуска положено и как его оформить?")
    author = type(user).objects.create(username="petrova", email="petrova@example.com", first_name="Анна Петрова")
    hint = {
        "text": "Есть и релевантные материалы, закрытые для вас правами доступа: источник «hr-private», автор — "
        "Анна Петрова (можно запросить доступ).",
        "sources": [
            {
                "source_system": "hr-private",
                "contact": {"user_id": author.pk, "username": "petrova", "name": "Анна Петрова"},
            }
        ],
    }
    answer = Message.objects.create(
        conversation=main,
        role="assistant",
        content=ANSWER + "\n\n" + hint["text"],
        model="builtin-extractive",
        tokens_used=584,
        withheld_hint=hint,
        feedback=1,
    )
    answer.citations.create(
        record_id=None,
        chunk_id=None,
        title="Политика отпусков",
        url="https://wiki.example.com/vacation",
        source_system="confluence",
        rank=1,
        markers=[1],
        chunk_text="Ежегодный оплачиваемый отпуск сотрудника составляет 28 календарных дней.",
    )
    answer.citations.create(
        record_id=None,
        chunk_id=None,
        title="Порядок оформления отпуска",
        url="https://wiki.example.com/vacation-howto",
        source_system="files",
        rank=2,
        markers=[2],
        chunk_text="Заявление на отпуск подают за две недели до его начала.",
    )
    Message.objects.create(conversation=main, role="user", content="А если модель недоступна?")
    Message.objects.create(conversation=main, role="assistant", content="", state="failed", model="gpt-4o-mini")
    daily = agent_create(
        owner=user,
        name="Утренняя сводка по инцидентам",
        instructions="Каждое утро собери открытые инциденты и перескажи их.",
        schedule={"type": "calendar", "weekday": 0, "time": "09:30"},
    )
    agent_create(
        owner=user, name="Отчёт по отпускам", schedule={"type": "interval", "every_minutes": 90}, enabled=False
    )
    AgentRun.objects.create(
        agent=daily,
        trigger="manual",
        state="succeeded",
        output="Открытых инцидентов: 2.",
        tokens_used=1204,
        started_at=timezone.now(),
        finished_at=timezone.now(),
    )
    core_services.api_token_create(user=user, name="ноутбук")
    core_services.api_token_create(user=user, name="CI-сервер")
    return main


def test_screenshots(live_url, page, user_factory, model_factory):
    user = user_factory(username="anna", first_name="Анна", timezone="Europe/Moscow")
    main = _seed(user, model_factory)
    OUT.mkdir(parents=True, exist_ok=True)
    sign_in(page, live_url, user.username)
    written = []
    for scheme in ("light", "dark"):
        page.emulate_media(color_scheme=scheme)
        for width in (1366, 375):
            page.set_viewport_size({"width": width, "height": 900 if width > 500 else 812})
            for name, path, ready in [
                ("chat", f"/chat/?c={main.pk}", ".msg.assistant[data-id]"),
                ("agents", "/agents/", ".agent .runs table"),
                ("tokens", "/tokens/", "table"),
            ]:
                page.goto(live_url + path)
                page.wait_for_selector(ready)
                page.wait_for_load_state("networkidle")
                target = OUT / f"{name}-{width}-{scheme}.png"
                page.screenshot(path=str(target), full_page=True)
                written.append(target)
    assert all(p.stat().st_size > 10_000 for p in written)
    print("\n".join(str(p) for p in written))
