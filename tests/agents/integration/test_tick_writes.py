"""What a scheduler tick writes, measured in the database's own counters: the writes that make a
1M-agent tick fit its budget must stay cheap (bench/scheduler.py measures the time)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.db import connection

from achilles.platform import platform_settings, platform_settings_update
from agents.models import Agent, AgentRun
from agents.services import agent_create, scheduler_tick

pytestmark = [pytest.mark.integration, pytest.mark.p1, pytest.mark.django_db]

NOW = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)
AGENTS = 120  # five pages of runs or so


def _run_updates() -> tuple[int, int]:
    """This transaction's row updates of agent_runs: (all, HOT — no index touched)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_xact_user_tables WHERE relname = 'agent_runs'")
        row = cursor.fetchone()
    return (row[0], row[1]) if row else (0, 0)


def test_stamping_enqueued_at_after_the_publish_is_a_hot_update(
    owner, chat_model, dispatched, django_capture_on_commit_callbacks
):
    """Migration 0008 (half-full agent_runs pages): the stamp of a published batch rewrites no
    index. Failed before it: with full pages nearly every stamp wrote its run into all six indexes."""
    platform_settings_update(weekly_token_budget=2 * AGENTS * platform_settings().agent_run_token_cap)
    for i in range(AGENTS):
        agent_create(owner=owner, name=f"a{i}", schedule={"type": "interval", "every_minutes": 5}, now=NOW)
    Agent.objects.update(next_run_at=NOW)
    with django_capture_on_commit_callbacks(execute=False) as publishes:
        result = scheduler_tick(now=NOW, redispatch=False)
    assert len(result.queued) == AGENTS
    before = _run_updates()
    for publish in publishes:  # the publish and its enqueued_at stamp, as after commit
        publish()
    updated, hot = (a - b for a, b in zip(_run_updates(), before, strict=True))
    assert sorted(dispatched) == sorted(result.queued)
    assert AgentRun.objects.filter(enqueued_at__isnull=False).count() == updated == AGENTS
    assert hot >= 0.9 * updated, (hot, updated)


def test_slots_keep_every_microsecond_through_the_tick(owner, chat_model, dispatched):
    """The tick reads and writes instants as whole microseconds (seconds and the rest, never a
    float): a slot at .999999 s stays there, and the grid moves on from it exactly."""
    from datetime import timedelta

    agent = agent_create(owner=owner, name="точно", schedule={"type": "interval", "every_minutes": 7}, now=NOW)
    slot = NOW - timedelta(microseconds=1)  # 11:59:59.999999
    Agent.objects.filter(pk=agent.pk).update(next_run_at=slot)
    scheduler_tick(now=NOW, redispatch=False)
    agent.refresh_from_db()
    run = AgentRun.objects.get(agent=agent)
    assert run.scheduled_for == slot
    assert agent.next_run_at == slot + timedelta(minutes=7)
