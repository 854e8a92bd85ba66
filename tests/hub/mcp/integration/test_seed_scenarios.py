"""Seed 004's scenarios, each driven through the SDK's own MCP client over streamable HTTP against the
platform's ASGI application, asserting the seed's exact Russian lines.

The sync agent's side (claim, report, lease expiry) goes through the hub's protocol services — the
bodies of the sync-agent REST routes and the Beat job.
"""

from __future__ import annotations

import datetime as dt
import threading
import time

import pytest
from django.db import close_old_connections, connection
from django.utils import timezone

from tests.hub.mcp.conftest import issue_dict, next_ids
from tests.hub.mcp.mcp_client import call_text

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.p0]

THREE_COMMANDS = [
    {"type": "ensure_fields", "key": "AURORA-1538", "fields": {"duedate": "2026-12-01"}},
    {
        "type": "ensure_link",
        "key": "AURORA-1538",
        "link_type": "Blocks",
        "direction": "outward",
        "other_key": "AURORA-1540",
    },
    {"type": "ensure_sprint", "key": "AURORA-1538", "sprint": "Спринт 2"},
]
LAUNCHER_UNKNOWN = "запускатель: неизвестно (агент ещё не выходил на связь после перезапуска хаба)"


def claim(agent, **kw) -> list[dict]:
    from hub.protocol import sync_agent_claim

    return sync_agent_claim(sync_agent=agent, **({"version": 6, "launcher_version": 1} | kw))["commands"]


def report_done(agent, commands: list[dict]) -> None:
    from hub.protocol import sync_agent_report

    results = [
        {
            "command_id": c["id"],
            "lease_token": c["lease_token"],
            "status": "done",
            "result": {"key": c["command"].get("key") or "", "created": False, "changed": [], "message": ""},
        }
        for c in commands
    ]
    sync_agent_report(sync_agent=agent, results=results, rate_limited=[])


def batch_create(token: str) -> int:
    from hub.models import Batch

    call_text(token, "batch_create", {"title": "1538 в спринт 2", "commands": THREE_COMMANDS})
    return Batch.objects.order_by("-id").values_list("id", flat=True).first()


def test_batch_from_chat(token, mirror):
    """Пакет из чата: three commands → a batch of four (three + refresh); the answer has the estimate in minutes."""
    from hub.models import Batch

    mirror(issue_dict("AURORA-1538"), issue_dict("AURORA-1540"))

    text = call_text(token, "batch_create", {"title": "1538 в спринт 2", "commands": THREE_COMMANDS})

    batch = Batch.objects.get()
    assert list(batch.commands.order_by("seq").values_list("type", flat=True)) == [
        "ensure_fields",
        "ensure_link",
        "ensure_sprint",
        "refresh",
    ]
    lines = text.splitlines()
    assert lines[0] == f"пакет #{batch.id} «1538 в спринт 2» создан: 4 команды"
    assert lines[1].startswith("оценка: ~") and " мин (estimate_seconds: " in lines[1]


def test_waiting_for_the_result(token, mirror, sync_agent):
    """Ожидание результата: batch_wait {id, timeout_minutes: 10} answers when the batch finishes, with every
    command's status. The seed's six minutes are compressed to two seconds; the answer must come after the
    last report and within a second of it (HUB-8), long before the timeout."""
    mirror(issue_dict("AURORA-1538"), issue_dict("AURORA-1540"))
    batch_id = batch_create(token)
    finished_at: list[float] = []

    def sync_agent_works():
        try:
            time.sleep(2.0)
            report_done(sync_agent, claim(sync_agent))  # the three commands
            refresh = claim(sync_agent)
            # read before the last report: the waiter may answer as that report commits, before the
            # report call itself returns (its after-commit work — the owner's notice — runs first)
            finished_at.append(time.monotonic())
            report_done(sync_agent, refresh)  # then the batch's refresh
        finally:
            close_old_connections()

    worker = threading.Thread(target=sync_agent_works)
    started = time.monotonic()
    worker.start()
    text = call_text(token, "batch_wait", {"id": batch_id, "timeout_minutes": 10})
    answered = time.monotonic()
    worker.join()

    assert finished_at, "the sync agent did not finish"
    assert finished_at[0] - started >= 2.0
    assert 0 <= answered - finished_at[0] < 1.0
    lines = text.splitlines()
    assert lines[0].startswith(f"пакет #{batch_id} «1538 в спринт 2» — done")
    assert lines[1] == "4 команды: done 4"
    assert [line.split(" — ")[1] for line in lines[2:6]] == ["done"] * 4
    assert "ожидание истекло" not in text


def test_agent_status_with_a_reissued_command(token, staff_token, mirror, sync_agent):
    """Статус агента с довыдачей: the sync agent is online, command 40 was issued twice and not reported."""
    from hub.notify import hub_boot_mark
    from hub.protocol import commands_requeue_expired

    hub_boot_mark(timezone.now() - dt.timedelta(hours=1))
    mirror(issue_dict("AURORA-1538"))
    next_ids(command=40)
    call_text(token, "batch_create", {"title": "срок 1538", "commands": [THREE_COMMANDS[0]]})
    first = claim(sync_agent)
    assert [c["id"] for c in first] == [40]
    with connection.cursor() as cursor:  # the lease runs out without a report
        cursor.execute("UPDATE hub_commands SET lease_expires_at = claimed_at WHERE id = 40")
    assert commands_requeue_expired() == [40]
    again = claim(sync_agent)
    assert [(c["id"], c["claims"]) for c in again] == [(40, 2)]

    text = call_text(token, "agent_status")

    lines = text.splitlines()
    assert lines[0].startswith("агент онлайн")
    assert "- команда #40 ensure_fields: выдач 2" in lines
    assert "текущая команда: #40 ensure_fields AURORA-1538 (выдач: 2)" in lines


def test_cancelling_a_batch_with_a_command_at_the_sync_agent(token, mirror, sync_agent):
    """Отмена пакета с командой у агента: batch_cancel {id: 9} while its command 30 is claimed."""
    from hub.models import Command

    mirror(issue_dict("AURORA-1538"), issue_dict("AURORA-1540"))
    next_ids(batch=9, command=30)
    assert batch_create(token) == 9
    assert [c["id"] for c in claim(sync_agent, max_commands=1)] == [30]

    text = call_text(token, "batch_cancel", {"id": 9})

    lines = text.splitlines()
    assert lines[0].startswith("пакет #9 «1538 в спринт 2» — ")  # the batch as it is now
    assert "  #30 ensure_fields AURORA-1538 — claimed, выдач: 1" in lines
    assert (
        "команда #30 уже у агента и будет выполнена; остановить — `POST /commands/30/cancel` с `force: true`" in lines
    )
    assert "отменено: #31, #32, #33" in lines
    assert dict(Command.objects.values_list("id", "state")) == {
        30: "claimed",
        31: "cancelled",
        32: "cancelled",
        33: "cancelled",
    }


def test_agent_status_after_a_rollback(token, sync_agent):
    """Статус агента после отката: v7 published; v6 under launcher v1 reports rolled_back for v7."""
    from hub.notify import hub_boot_mark
    from hub.protocol import publication_create

    hub_boot_mark(timezone.now() - dt.timedelta(hours=1))
    publication_create(version=7, artifact=b"sync agent v7", notes="v7")
    claim(
        sync_agent,
        version=6,
        launcher_version=1,
        update={"state": "rolled_back", "from_version": 6, "to_version": 7, "error": "v7 did not claim within 120 s"},
    )

    text = call_text(token, "agent_status")

    lines = text.splitlines()
    assert any(line.startswith("публикация: v7 от ") for line in lines)
    assert "обновление: rolled_back v6 → v7" in lines
    assert "запускатель: v1" in lines
    assert any(line.startswith("откат с v7 на v6: ") for line in lines)


def test_agent_status_right_after_a_hub_restart(token, sync_agent):
    """Статус агента сразу после перезапуска хаба: no claim since the restart → the launcher is unknown.

    Before the restart the sync agent ran without the launcher with a newer version published, so a
    status that trusted the old contact would say «без запускателя» and «агент запущен без run.py»."""
    from hub.notify import hub_boot_mark
    from hub.protocol import publication_create

    hub_boot_mark(timezone.now() - dt.timedelta(hours=1))
    publication_create(version=7, artifact=b"sync agent v7")
    claim(sync_agent, version=6, launcher_version=None)
    before = call_text(token, "agent_status")
    assert "без запускателя" in before.splitlines() and "агент запущен без run.py" in before  # the test can fail

    hub_boot_mark()  # the hub restarts; the sync agent has not claimed since

    text = call_text(token, "agent_status")

    assert LAUNCHER_UNKNOWN in text.splitlines()
    assert "без запускателя" not in text
    assert "агент запущен без run.py" not in text


def test_issue_with_seven_comments(token, mirror):
    """Задача с семью комментариями: «комментарии (7):», the 5 newest (the newest first, clipped to 300
    characters with «…») and «ещё 2»."""
    base = timezone.now() - dt.timedelta(days=7)
    newest_body = "Н" * 500
    comments = [
        {
            "id": str(100 + i),
            "author": f"автор{i}",
            "created": base + dt.timedelta(days=i),
            "body": newest_body if i == 7 else f"комментарий {i}",
        }
        for i in range(1, 8)
    ]
    mirror(issue_dict("AURORA-9001", comments=comments))

    text = call_text(token, "issue", {"key": "AURORA-9001"})

    lines = text.splitlines()
    at = lines.index("комментарии (7):")
    shown = lines[at + 1 : at + 6]
    assert [line.strip().split(",")[0] for line in shown] == ["автор7", "автор6", "автор5", "автор4", "автор3"]
    newest = shown[0].split(": ", 1)[1]
    assert newest == "Н" * 299 + "…" and len(newest) == 300
    assert lines[at + 6].strip() == "ещё 2"
    assert "комментарий 2" not in text and "комментарий 1" not in text
