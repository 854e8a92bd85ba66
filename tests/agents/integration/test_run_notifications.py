"""The owner's notice when an agent run ends (achilles.notifications, written after commit)."""

from __future__ import annotations

import pytest

from achilles.llm.types import Usage
from achilles.models import Notification
from agents.services import agent_run_request
from tests.llm_fake import answer, call_tool, fail

pytestmark = [pytest.mark.integration, pytest.mark.django_db]


def _run(agent, capture, run_task):
    with capture(execute=True):
        run = agent_run_request(agent=agent)
    with capture(execute=True):
        run_task(run.pk)
    run.refresh_from_db()
    return run


def test_a_finished_run_notifies_its_owner_only(
    agent_factory, user_factory, fake_chat, fake_ks, dispatched, run_task, django_capture_on_commit_callbacks
):
    # given an agent of one person and another person
    agent = agent_factory(name="Сводка")
    bystander = user_factory()
    fake_chat.add_round(answer("Готово", usage=Usage(10, 5)))
    # when its run finishes
    run = _run(agent, django_capture_on_commit_callbacks, run_task)
    # then the owner has one unread notice naming the agent, and nobody else has any
    assert run.state == "succeeded"
    notice = Notification.objects.get()
    assert (notice.user_id, notice.kind, notice.link) == (agent.owner_id, "agent_run", "/agents/")
    assert notice.title == "Агент «Сводка» закончил работу" and notice.read_at is None
    assert not Notification.objects.filter(user=bystander).exists()


def test_a_failed_run_notifies_with_the_reason(
    agent_factory, fake_chat, fake_ks, dispatched, run_task, django_capture_on_commit_callbacks
):
    agent = agent_factory(name="Сводка")
    fake_chat.add_round(call_tool("search", query="x"))
    fake_chat.add_round([fail(detail="provider exploded")])
    run = _run(agent, django_capture_on_commit_callbacks, run_task)
    assert run.state == "failed"
    notice = Notification.objects.get(user=agent.owner)
    assert notice.title == "Агент «Сводка»: запуск не удался"
    assert notice.body == "Причина: модель недоступна."


def test_no_notice_before_the_commit(
    agent_factory, fake_chat, fake_ks, dispatched, run_task, django_capture_on_commit_callbacks
):
    # the run's callbacks are captured, not run: nothing was committed, so nothing is written yet
    agent = agent_factory()
    fake_chat.add_round(answer("Готово"))
    with django_capture_on_commit_callbacks(execute=True):
        run = agent_run_request(agent=agent)
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        run_task(run.pk)
    assert not Notification.objects.exists()
    for callback in callbacks:
        callback()
    assert Notification.objects.filter(user=agent.owner).count() == 1


def test_a_skipped_run_notifies_nobody(agent_factory, dispatched, run_task, django_capture_on_commit_callbacks):
    agent = agent_factory()
    with django_capture_on_commit_callbacks(execute=True):
        run = agent_run_request(agent=agent)
    agent.__class__.objects.filter(pk=agent.pk).update(enabled=False)
    with django_capture_on_commit_callbacks(execute=True):
        run_task(run.pk)
    run.refresh_from_db()
    assert run.state == "skipped"
    assert not Notification.objects.exists()


def test_a_run_reaped_as_stale_notifies_its_owner(agent_factory, run_factory, django_capture_on_commit_callbacks):
    # given a zombie (running, heartbeat older than the stale window) and a live run of someone else
    from datetime import timedelta

    from django.utils import timezone

    from achilles.platform import platform_settings_update
    from agents.services import agent_runs_reap_stale

    platform_settings_update(agent_stale_after_seconds=60)
    agent = agent_factory(name="Сводка")
    now = timezone.now()
    run_factory(
        agent=agent, state="running", started_at=now - timedelta(minutes=5), heartbeat_at=now - timedelta(minutes=2)
    )
    live = run_factory(state="running", started_at=now, heartbeat_at=now - timedelta(seconds=10))
    # when the reaper fails it
    with django_capture_on_commit_callbacks(execute=True):
        assert agent_runs_reap_stale(now=now) == 1
    # then its owner is told why, the live run's owner is not
    notice = Notification.objects.get()
    assert notice.user_id == agent.owner_id
    assert (notice.title, notice.body) == (
        "Агент «Сводка»: запуск не удался",
        "Причина: исполнитель перестал отвечать.",
    )
    assert not Notification.objects.filter(user_id=live.agent.owner_id).exists()
