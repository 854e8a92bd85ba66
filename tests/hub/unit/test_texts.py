"""The seed's Russian lines built from the read models (no database)."""

import datetime as dt

from hub.contracts import AgentStatus, PublicationView, ReissuedCommand
from hub.texts import LAUNCHER_UNKNOWN, agent_status_lines, claimed_command_line, update_hint

UTC = dt.UTC


def _status(**overrides) -> AgentStatus:
    base = {
        "online": True,
        "has_contact": True,
        "last_contact_at": dt.datetime(2026, 11, 30, 12, 0, tzinfo=UTC),
        "version": 6,
        "launcher_version": 1,
        "agent_reported": True,
        "current_command": None,
        "reissued": (),
        "rate_limited_24h": 0,
        "settings_version": 3,
        "agent_settings_version": 3,
        "publication": None,
        "update_state": None,
        "update_from": None,
        "update_to": None,
        "update_error": "",
        "update_hint": None,
        "poll_interval_seconds": 10,
    }
    base.update(overrides)
    return AgentStatus(**base)


def test_claimed_command_line_is_the_seeds():
    assert claimed_command_line(30) == (
        "команда #30 уже у агента и будет выполнена; остановить — `POST /commands/30/cancel` с `force: true`"
    )


def test_online_with_a_reissued_command():
    lines = agent_status_lines(_status(reissued=(ReissuedCommand(id=40, type="ensure_fields", claims=2),)))
    assert lines[0].startswith("агент онлайн")
    assert "- команда #40 ensure_fields: выдач 2" in lines


def test_rollback_lines_and_hint():
    hint = update_hint(
        state="rolled_back",
        version=6,
        update_from=6,
        update_to=7,
        error="v7 did not claim within 120 s",
        launcher_version=1,
        agent_reported=True,
        publication_version=7,
    )
    assert hint == "откат с v7 на v6: v7 did not claim within 120 s"
    status = _status(
        publication=PublicationView(
            version=7, sha256="0" * 64, size=1, notes="", published_at=dt.datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
        ),
        update_state="rolled_back",
        update_from=6,
        update_to=7,
        update_hint=hint,
    )
    lines = agent_status_lines(status)
    assert "публикация: v7 от 30.11.2026 09:00" in lines
    assert "обновление: rolled_back v6 → v7" in lines
    assert "запускатель: v1" in lines
    assert hint in lines


def test_after_a_hub_restart_the_launcher_is_unknown_not_absent():
    lines = agent_status_lines(_status(launcher_version=None, agent_reported=False))
    text = "\n".join(lines)
    assert LAUNCHER_UNKNOWN in lines
    assert "без запускателя" not in text and "агент запущен без run.py" not in text


def test_without_launcher_and_no_publication():
    lines = agent_status_lines(_status(launcher_version=None))
    assert "без запускателя" in lines and "публикации нет" in lines


def test_offline_and_never_seen():
    assert agent_status_lines(_status(online=False))[0].startswith("агент офлайн (последний контакт: 30.11.2026 12:00")
    assert (
        agent_status_lines(_status(has_contact=False, online=False, last_contact_at=None))[0]
        == "агент офлайн: ещё не выходил на связь"
    )


def test_hint_for_an_agent_without_launcher_behind_the_publication():
    hint = update_hint(
        state=None,
        version=6,
        update_from=None,
        update_to=None,
        error="",
        launcher_version=None,
        agent_reported=True,
        publication_version=7,
    )
    assert hint.startswith("агент запущен без run.py")
