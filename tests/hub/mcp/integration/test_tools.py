"""Each of the seed's 14 tool rows, both SHALLs, the caller's permissions and the error texts (the same
as the REST API's), through the SDK's client over streamable HTTP."""

from __future__ import annotations

import datetime as dt
import json
import threading
import time

import pytest
from django.db import close_old_connections
from django.test import Client as DjangoClient

from tests.hub.mcp.conftest import issue_dict
from tests.hub.mcp.integration.test_seed_scenarios import THREE_COMMANDS, batch_create, claim, report_done
from tests.hub.mcp.mcp_client import call, call_text, over_http, text_of

pytestmark = pytest.mark.django_db(transaction=True)


def rest(token: str, method: str, path: str, body: dict | None = None):
    client = DjangoClient(HTTP_AUTHORIZATION=f"Bearer {token}")
    kwargs = {"data": json.dumps(body), "content_type": "application/json"} if body is not None else {}
    return getattr(client, method)(path, **kwargs)


def rest_text(response) -> str:
    """What MCP answers for the error REST answered: the platform's text rendering, ``code: detail``
    (``achilles.errors.render_text``) — the REST body's own code and detail, verbatim."""
    body = response.json()
    assert isinstance(body["detail"], str), body
    return f"{body['code']}: {body['detail']}"


def error_text(token: str, tool: str, arguments: dict) -> str:
    result = call(token, tool, arguments)
    assert result.is_error, text_of(result)
    return text_of(result)


# ---------------------------------------------------------------- the seed's rows


def test_tool_issues_filters_and_prints_the_table(token, mirror):
    mirror(
        issue_dict(
            "AURORA-1", status="In Progress", sprint="Спринт 2", duedate=dt.date(2026, 12, 1), summary="Э" * 100
        ),
        issue_dict("AURORA-2", status="Open", sprint="Спринт 2"),
        issue_dict("AURORA-3", status="In Progress", sprint="Спринт 1"),
        issue_dict("ZEUS-1", status="In Progress", sprint="Спринт 2"),
    )

    text = call_text(token, "issues", {"project": "AURORA", "status": "In Progress", "sprint": "Спринт 2"})

    lines = text.splitlines()
    assert lines[:2] == ["задач: 1", "ключ | тема | статус | срок | исполнитель | спринт | статус по факту"]
    assert lines[2] == f"AURORA-1 | {'Э' * 79}… | In Progress | 01.12.2026 | jdoe | Спринт 2 | —"
    assert call_text(token, "issues", {"project": "NOPE"}) == "задач не найдено"
    assert "показаны первые 2" in call_text(token, "issues", {"limit": 2})


def test_tool_issue_card_fields_links_both_sides_notes_and_recent_commands(token, mirror):
    mirror(
        issue_dict(
            "AURORA-1538",
            summary="Экспорт",
            priority="High",
            links=[{"link_type": "Blocks", "direction": "outward", "other_key": "AURORA-1540"}],
        ),
        issue_dict("AURORA-1540", summary="Релиз"),
    )
    call_text(token, "notes_set", {"key": "AURORA-1540", "fact_status": "ждёт экспорт", "owner": "Ольга"})
    batch_create(token)

    text = call_text(token, "issue", {"key": "AURORA-1540"})

    lines = text.splitlines()
    assert lines[0] == "AURORA-1540 — Релиз"
    assert "  Blocks (входящая) ← AURORA-1538 «Экспорт»" in lines  # the other side's link, seen from here
    assert "  статус по факту: ждёт экспорт" in lines and "  ответственный: Ольга" in lines
    assert "последние команды:" in lines
    assert "комментариев нет" in lines
    own = call_text(token, "issue", {"key": "AURORA-1538"})
    assert "  Blocks (исходящая) → AURORA-1540 «Релиз»" in own.splitlines()
    assert "приоритет: High" in own


def test_tool_issue_unknown_key_is_the_rest_404_text(token):
    response = rest(token, "get", "/api/hub/issues/AURORA-404")
    assert response.status_code == 404
    assert error_text(token, "issue", {"key": "AURORA-404"}) == rest_text(response)


def test_tool_notes_set_any_subset_and_an_unknown_field_is_the_rest_422_text(token, mirror):
    mirror(issue_dict("AURORA-1538"))

    text = call_text(token, "notes_set", {"key": "AURORA-1538", "next_step": "созвон в пятницу"})
    assert text.splitlines()[0].startswith("заметки AURORA-1538 обновлены")
    assert "  следующий шаг: созвон в пятницу" in text and "  статус по факту: —" in text

    from hub.models import IssueNote

    response = rest(token, "patch", "/api/hub/issues/AURORA-1538/notes", {"status": "Done"})
    assert response.status_code == 422
    assert error_text(token, "notes_set", {"key": "AURORA-1538", "status": "Done"}) == rest_text(response)
    assert IssueNote.objects.get().next_step == "созвон в пятницу"


BAD_BATCHES = {
    "unknown type and bad direction": [
        {
            "type": "ensure_link",
            "key": "AURORA-1538",
            "link_type": "Blocks",
            "direction": "sideways",
            "other_key": "AURORA-1540",
        },
        {"type": "ensure_everything", "key": "AURORA-1"},
    ],
    "missing key": [{"type": "ensure_fields", "fields": {"duedate": "2026-12-01"}}],
    "bad link type": [
        {
            "type": "ensure_link",
            "key": "AURORA-1538",
            "link_type": "Frobs",
            "direction": "outward",
            "other_key": "AURORA-1540",
        }
    ],
    "$N naming a later command": [
        {"type": "ensure_comment", "key": "$2", "body": "x"},
        {"type": "ensure_issue", "project": "AURORA", "summary": "s", "labels": ["AWPCA"]},
    ],
    "no commands": [],
}


def test_tool_batch_create_bad_command_is_the_rest_422_text_and_stores_nothing(token):
    from hub.models import Batch

    for case, commands in BAD_BATCHES.items():  # one database for all cases: each flush costs a second
        response = rest(token, "post", "/api/hub/batches", {"title": "плохой", "commands": commands})
        assert response.status_code == 422, case

        text = error_text(token, "batch_create", {"title": "плохой", "commands": commands})

        assert text == rest_text(response), case
        assert not Batch.objects.exists(), case


@pytest.mark.parametrize(
    ("tool", "path"),
    [("command_retry", "/api/hub/commands/999999/retry"), ("batch_cancel", "/api/hub/batches/999999/cancel")],
)
def test_unknown_command_or_batch_id_is_the_rest_404_text(token, tool, path):
    response = rest(token, "post", path, {})
    assert response.status_code == 404
    assert error_text(token, tool, {"id": 999999}) == rest_text(response)


def test_tool_batch_status_states_errors_and_remaining_estimate(token, mirror, sync_agent):
    from hub.protocol import sync_agent_report

    mirror(issue_dict("AURORA-1538"), issue_dict("AURORA-1540"))
    batch_id = batch_create(token)
    first, second, _third = claim(sync_agent)
    report_done(sync_agent, [first])
    sync_agent_report(
        sync_agent=sync_agent,
        results=[
            {
                "command_id": second["id"],
                "lease_token": second["lease_token"],
                "status": "failed",
                "error": "Jira 400: no link type Blocks",
            }
        ],
        rate_limited=[],
    )

    text = call_text(token, "batch_status", {"id": batch_id})

    lines = text.splitlines()
    assert lines[1] == "4 команды: queued 1, claimed 1, done 1, failed 1"
    assert f"  #{second['id']} ensure_link AURORA-1538, AURORA-1540 — failed: Jira 400: no link type Blocks" in lines
    assert any(line.endswith("— claimed, выдач: 1") for line in lines)
    assert lines[-1].startswith("осталось: ")
    response = rest(token, "get", "/api/hub/batches/999999")
    assert error_text(token, "batch_status", {"id": 999999}) == rest_text(response)


@pytest.mark.parametrize("minutes", [0, 61])
def test_tool_batch_wait_timeout_out_of_range_is_the_rest_422_text(token, mirror, minutes):
    mirror(issue_dict("AURORA-1538"), issue_dict("AURORA-1540"))
    batch_id = batch_create(token)
    response = rest(token, "get", f"/api/hub/batches/{batch_id}/wait?timeout_minutes={minutes}")
    assert response.status_code == 422
    assert error_text(token, "batch_wait", {"id": batch_id, "timeout_minutes": minutes}) == rest_text(response)


def test_tool_batch_wait_returns_at_its_timeout_with_the_status(token, mirror):
    mirror(issue_dict("AURORA-1538"), issue_dict("AURORA-1540"))
    batch_id = batch_create(token)
    started = time.monotonic()

    text = call_text(token, "batch_wait", {"id": batch_id, "timeout_minutes": 0.02})  # 1.2 s

    assert 1.2 <= time.monotonic() - started < 3.0
    assert "ожидание истекло, пакет ещё не завершён" in text.splitlines()
    assert text.splitlines()[1] == "4 команды: queued 4"


def test_tool_batches_lists_the_latest_with_their_state(token, mirror):
    mirror(issue_dict("AURORA-1538"), issue_dict("AURORA-1540"))
    first = batch_create(token)
    call_text(token, "refresh", {"keys": ["AURORA-1538"]})

    text = call_text(token, "batches", {"limit": 5})

    lines = text.splitlines()
    assert lines[0] == "пакетов: 2"
    assert lines[1].startswith(
        f"#{first + 1} «обновить AURORA-1538» — queued: 1 команда (queued 1), claude (создал: olga), "
    )
    assert lines[2].startswith(f"#{first} «1538 в спринт 2» — queued: 4 команды (queued 4), claude (создал: olga), ")


def test_tools_keep_to_the_callers_own_batches(token, staff_token, mirror):
    """Someone else's batch is not found over MCP either (batch_status, batch_wait, batch_cancel,
    batches); staff see it, with who created it."""
    from hub.models import Command

    mirror(issue_dict("AURORA-1538"), issue_dict("AURORA-1540"))
    theirs = batch_create(staff_token)
    for tool, arguments in (
        ("batch_status", {"id": theirs}),
        ("batch_wait", {"id": theirs, "timeout_minutes": 0.01}),
        ("batch_cancel", {"id": theirs}),
    ):
        assert error_text(token, tool, arguments) == f"not_found: batch {theirs} not found"
    assert call_text(token, "batches", {"limit": 5}) == "пакетов нет"
    assert not Command.objects.filter(state="cancelled").exists()

    mine = batch_create(token)
    first_line = call_text(staff_token, "batch_status", {"id": mine}).splitlines()[0]
    assert first_line.endswith("автор: claude, создал: olga")


def test_tool_command_retry_queues_a_new_batch(token, mirror, sync_agent):
    from hub.models import Batch
    from hub.protocol import sync_agent_report

    mirror(issue_dict("AURORA-1538"), issue_dict("AURORA-1540"))
    batch_create(token)
    first = claim(sync_agent)[0]
    sync_agent_report(
        sync_agent=sync_agent,
        results=[
            {"command_id": first["id"], "lease_token": first["lease_token"], "status": "failed", "error": "Jira 503"}
        ],
        rate_limited=[],
    )

    text = call_text(token, "command_retry", {"id": first["id"]})

    newest = Batch.objects.order_by("-id").first()
    assert newest.retry_of_id == first["id"] and newest.author == "claude"
    assert text.splitlines()[:2] == [
        f"команда #{first['id']} поставлена заново",
        f"пакет #{newest.id} создан: {newest.commands.count()} команды",
    ]


def test_tool_batch_cancel_cancels_what_is_queued(token, mirror):
    mirror(issue_dict("AURORA-1538"), issue_dict("AURORA-1540"))
    batch_id = batch_create(token)

    text = call_text(token, "batch_cancel", {"id": batch_id})

    assert text.splitlines()[0].startswith(f"пакет #{batch_id} «1538 в спринт 2» — cancelled")
    assert "уже у агента" not in text
    assert "4 команды: cancelled 4" in text.splitlines()


def test_tool_refresh_without_wait_is_a_line_with_the_batch_id(token, mirror):
    from hub.models import Batch

    mirror(issue_dict("AURORA-1538"))
    text = call_text(token, "refresh", {"keys": ["AURORA-1538"]})
    batch = Batch.objects.get()
    assert text == f"обновление из Jira поставлено: пакет #{batch.id}, 1 команда, оценка ~1 мин"
    assert list(batch.commands.values_list("type", "payload")) == [
        ("refresh", {"type": "refresh", "keys": ["AURORA-1538"]})
    ]


def test_tool_refresh_with_wait_answers_like_batch_wait(token, mirror, sync_agent):
    mirror(issue_dict("AURORA-1538"))

    def sync_agent_works():
        try:
            for _ in range(50):
                commands = claim(sync_agent)
                if commands:
                    report_done(sync_agent, commands)
                    return
                time.sleep(0.1)
        finally:
            close_old_connections()

    worker = threading.Thread(target=sync_agent_works)
    worker.start()
    text = call_text(token, "refresh", {"full": True, "wait": True})
    worker.join()

    lines = text.splitlines()
    assert lines[0].endswith("«полная синхронизация» — done (выполнен), автор: claude, создал: olga")
    assert lines[2].endswith("refresh полная синхронизация — done")


def test_tool_agent_status_when_no_sync_agent_ever_called(token):
    text = call_text(token, "agent_status")
    assert text.splitlines()[:2] == ["агент офлайн: ещё не выходил на связь", "версия: неизвестна"]
    assert "публикации нет" in text.splitlines()


def test_tool_sync_log_lists_the_latest_runs(token, sync_agent):
    from hub.protocol import sync_run_finish, sync_run_start

    run = sync_run_start(sync_agent=sync_agent, kind="incremental")
    sync_run_finish(
        sync_agent=sync_agent, sync_run_id=run.id, status="failed", counts={"issues": 12}, errors=["Jira 503 on page 2"]
    )

    text = call_text(token, "sync_log", {"limit": 5})

    lines = text.splitlines()
    assert lines[0] == "синхронизаций: 1"
    assert lines[1].startswith(f"#{run.id} incremental — failed: ") and lines[1].endswith("; issues 12")
    assert lines[2] == "  ошибка: Jira 503 on page 2"


def test_tool_settings_get_and_set(token, staff_token):
    from hub.selectors import settings_version_get

    assert call_text(token, "settings_get", {"key": "lease_seconds"}).splitlines()[0] == "lease_seconds = 120"
    everything = call_text(token, "settings_get")
    assert 'base_label = "AWPCA"' in everything and f"settings_version: {settings_version_get()}" in everything
    before = settings_version_get()

    text = call_text(staff_token, "settings_set", {"key": "lease_seconds", "value": 300})

    assert text.startswith(f"lease_seconds сохранён; settings_version: {before + 1}")
    assert call_text(token, "settings_get", {"key": "lease_seconds"}).splitlines()[0] == "lease_seconds = 300"


def test_tool_settings_set_is_staff_only_and_validated_like_rest(token, staff_token):
    from hub.selectors import settings_version_get

    before = settings_version_get()
    forbidden = rest(token, "put", "/api/hub/settings/lease_seconds", {"value": 300})
    assert forbidden.status_code == 403
    assert error_text(token, "settings_set", {"key": "lease_seconds", "value": 300}) == rest_text(forbidden)
    invalid = rest(staff_token, "put", "/api/hub/settings/lease_seconds", {"value": 1})
    assert invalid.status_code == 422
    assert error_text(staff_token, "settings_set", {"key": "lease_seconds", "value": 1}) == rest_text(invalid)
    assert settings_version_get() == before


# ---------------------------------------------------------------- the SHALLs


def test_shall_batch_create_description_warns_that_ensure_issue_carries_the_base_label(token):
    async def conversation(client):
        return {t.name: t for t in (await client.list_tools()).tools}

    tool = over_http(token, conversation)["batch_create"]
    assert "ensure_issue должна нести `labels` с базовой меткой проекта (AWPCA)" in tool.description
    assert "хаб и агент метки сами\nне добавляют" in tool.description
    assert tool.input_schema["properties"]["commands"]["items"]["oneOf"]  # the command contract's schema


def test_shall_commands_from_mcp_are_authored_by_claude(token, mirror):
    from hub.models import Batch

    mirror(issue_dict("AURORA-1538"), issue_dict("AURORA-1540"))
    batch_create(token)
    call_text(token, "refresh", {"keys": ["AURORA-1538"]})
    rest(token, "post", "/api/hub/batches", {"title": "из скрипта", "commands": THREE_COMMANDS})

    assert list(Batch.objects.order_by("id").values_list("author", flat=True)) == ["claude", "claude", "api"]


# ---------------------------------------------------------------- identity and permissions


def test_a_user_without_the_hub_permission_gets_the_rest_403_text(db):
    from achilles.services import api_token_create
    from tests.achilles.factories import UserFactory

    _, raw = api_token_create(user=UserFactory(username="outsider"))
    response = rest(raw, "get", "/api/hub/issues")
    assert response.status_code == 403
    for tool, arguments in [
        ("issues", {}),
        ("batch_create", {"title": "x", "commands": THREE_COMMANDS}),
        ("agent_status", {}),
    ]:
        assert error_text(raw, tool, arguments) == rest_text(response)


def test_knowledge_search_cites_what_the_caller_may_see_and_only_coordinates_of_the_rest(token, settings):
    from knowledge.facade import upsert_record

    settings.WITHHELD_MIN_RECORDS = 1  # a two-record corpus (the KS's anti-oracle threshold is 3)

    upsert_record(
        source_system="wiki",
        external_id="vpn",
        title="VPN для удалёнки",
        text="VPN подключается через клиент WireGuard, конфиг выдаёт служба поддержки.",
        acl=["everyone"],
        url="https://wiki.example/vpn",
        user_writable=False,  # curated: only curated records make a word common enough to hint
    )
    upsert_record(
        source_system="finance",
        external_id="budget",
        title="Бюджет VPN",
        text="Бюджет на VPN и клиент WireGuard на следующий год.",
        acl=["group:finance"],
        author_principal_id="user:1",
        user_writable=False,
    )

    text = call_text(token, "knowledge_search", {"query": "VPN WireGuard"})

    assert "[1] VPN для удалёнки (wiki, запись " in text and "— https://wiki.example/vpn" in text
    assert "Бюджет" not in text
    assert "  источник finance, автор user:1" in text


OUT_OF_RANGE = [
    ("issues", {"limit": 0}),
    ("issues", {"limit": 501}),
    ("batches", {"limit": 0}),
    ("sync_log", {"limit": 201}),
    ("knowledge_search", {"query": "vpn", "k": 51}),
    ("batch_status", {"id": "nine"}),
]


def test_out_of_range_arguments_are_an_error_result_not_a_crash(token):
    for tool, arguments in OUT_OF_RANGE:
        text = error_text(token, tool, arguments)
        # the platform's 422 in text, the field named (not pydantic's own «1 validation error for …»)
        field = list(arguments)[-1]
        assert text.startswith(f"validation_error ({field}): "), (tool, arguments, text)
        assert "validation error for" not in text


def test_times_are_shown_in_the_callers_time_zone(token, hub_user, sync_agent):
    from hub.protocol import sync_run_finish, sync_run_start

    run = sync_run_start(sync_agent=sync_agent, kind="full")
    sync_run_finish(sync_agent=sync_agent, sync_run_id=run.id, status="ok", counts={}, errors=[])
    run.refresh_from_db()
    hub_user.timezone = "Asia/Vladivostok"
    hub_user.save(update_fields=["timezone"])

    text = call_text(token, "sync_log")

    local = run.started_at.astimezone(dt.timezone(dt.timedelta(hours=10)))
    assert f"— ok: {local:%d.%m.%Y %H:%M} → " in text
