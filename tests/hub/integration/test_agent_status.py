"""agent_status (HUB-12) from real claims, publications and the boot marker in Redis."""

import datetime as dt

import pytest
from django.utils import timezone

from hub import protocol, selectors
from hub.notify import hub_boot_mark
from hub.texts import LAUNCHER_UNKNOWN

pytestmark = pytest.mark.django_db


def _text(user) -> str:
    return "\n".join(selectors.agent_status(user=user).lines)


def test_after_a_rollback_of_v7(hub_user, hub_staff, sync_agent):
    publication = protocol.publication_create(version=7, artifact=b"\x1f\x8b fake tar", notes="v7", user=hub_staff)
    protocol.sync_agent_claim(
        sync_agent=sync_agent,
        version=6,
        launcher_version=1,
        update={"state": "rolled_back", "from_version": 6, "to_version": 7, "error": "v7 did not claim within 120 s"},
    )
    status = selectors.agent_status(user=hub_user)
    text = "\n".join(status.lines)
    assert "агент онлайн" in text
    assert (
        f"публикация: v7 от {publication.published_at.astimezone(dt.timezone(dt.timedelta(hours=3))):%d.%m.%Y %H:%M}"
        in text
    )
    assert "обновление: rolled_back v6 → v7" in text and "запускатель: v1" in text
    assert "откат с v7 на v6: v7 did not claim within 120 s" in text
    assert status.update_hint == "откат с v7 на v6: v7 did not claim within 120 s"


def test_right_after_a_hub_restart_the_launcher_is_unknown(hub_user, sync_agent):
    protocol.sync_agent_claim(sync_agent=sync_agent, version=6, launcher_version=None)
    assert "без запускателя" in _text(hub_user)
    hub_boot_mark(timezone.now() + dt.timedelta(seconds=1))  # another web process started after that claim
    text = _text(hub_user)
    assert LAUNCHER_UNKNOWN in text and "без запускателя" not in text and "агент запущен без run.py" not in text
    assert selectors.agent_status(user=hub_user).agent_reported is False
    hub_boot_mark(timezone.now() - dt.timedelta(seconds=1))
    protocol.sync_agent_claim(sync_agent=sync_agent, version=6, launcher_version=None)
    assert "без запускателя" in _text(hub_user)


def test_offline_after_two_poll_intervals_and_never_seen(hub_user, sync_agent):
    assert "ещё не выходил на связь" in _text(hub_user) and "публикации нет" in _text(hub_user)
    protocol.sync_agent_claim(sync_agent=sync_agent, version=6, launcher_version=1)
    from hub.models import SyncAgentContact

    SyncAgentContact.objects.update(last_contact_at=timezone.now() - dt.timedelta(seconds=21))
    status = selectors.agent_status(user=hub_user)
    assert not status.online and status.lines[0].startswith("агент офлайн")
    SyncAgentContact.objects.update(last_contact_at=timezone.now() - dt.timedelta(seconds=19))
    assert selectors.agent_status(user=hub_user).online


def test_current_command_and_version(hub_user, sync_agent):
    from hub import services

    services.batch_create(
        user=hub_user, title="t", commands=[{"type": "ensure_comment", "key": "AURORA-1", "body": "x"}]
    )
    got = protocol.sync_agent_claim(sync_agent=sync_agent, version=6, launcher_version=1, max_commands=1)["commands"][0]
    text = _text(hub_user)
    assert f"текущая команда: #{got['id']} ensure_comment AURORA-1 (выдач: 1)" in text and "версия: v6" in text
