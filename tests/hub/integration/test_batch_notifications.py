"""The creator's notice when a hub batch finishes (achilles.notifications, written after commit)."""

from __future__ import annotations

import pytest

from achilles.models import Notification
from hub import protocol, services
from tests.achilles.factories import UserFactory

pytestmark = [pytest.mark.integration, pytest.mark.django_db]

REFRESH = {"type": "refresh", "keys": ["AURORA-1"]}


def _report(sync_agent, status: str, capture) -> None:
    with capture(execute=True):
        got = protocol.sync_agent_claim(sync_agent=sync_agent, version=6, launcher_version=None)
    result = {"status": status, "result": {}} if status == "done" else {"status": status, "error": "Jira said no"}
    with capture(execute=True):
        protocol.sync_agent_report(
            sync_agent=sync_agent,
            results=[{"command_id": c["id"], "lease_token": c["lease_token"], **result} for c in got["commands"]],
            rate_limited=[],
        )


def test_a_finished_batch_notifies_its_creator_once(hub_user, sync_agent, django_capture_on_commit_callbacks):
    # given a batch of one person (and another person)
    bystander = UserFactory()
    with django_capture_on_commit_callbacks(execute=True):
        batch = services.batch_create(user=hub_user, title="Релиз", commands=[REFRESH, REFRESH])
    assert not Notification.objects.exists()
    # when the sync agent reports its commands done
    _report(sync_agent, "done", django_capture_on_commit_callbacks)
    # then its creator has one notice, and nobody else
    notice = Notification.objects.get()
    assert (notice.user_id, notice.kind, notice.link) == (hub_user.pk, "hub_batch", "/hub/")
    assert notice.title == f"Пакет #{batch.id} «Релиз» завершён"
    assert notice.body == "Пакет хаба завершён: все команды выполнены."
    assert not Notification.objects.filter(user=bystander).exists()


def test_a_batch_with_a_failed_command_says_so(hub_user, sync_agent, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        services.batch_create(user=hub_user, title="Релиз", commands=[REFRESH])
    _report(sync_agent, "failed", django_capture_on_commit_callbacks)
    notice = Notification.objects.get(user=hub_user)
    assert notice.body == "Пакет хаба завершён: не выполнено команд: 1."


def test_a_running_batch_notifies_nobody(hub_user, sync_agent, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        services.batch_create(user=hub_user, title="Релиз", commands=[REFRESH])
        protocol.sync_agent_claim(sync_agent=sync_agent, version=6, launcher_version=None)
    assert not Notification.objects.exists()
