"""The scheduler's wake-up loop (AE-SCHED): it ticks when the next agent is due or when a NOTIFY says
a next run moved earlier, not on a fixed period; the notifying trigger is tested with raw SQL."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta

import psycopg
import pytest
from django.db import connection

from achilles.platform import platform_settings, platform_settings_update
from agents.models import Agent, AgentRun
from agents.scheduler_loop import NOTIFY_CHANNEL, SchedulerLoop

pytestmark = [pytest.mark.integration, pytest.mark.p1]

FAR = datetime(2100, 1, 1, tzinfo=UTC)


def _listener() -> psycopg.Connection:
    params = connection.get_connection_params()
    for key in ("cursor_factory", "context", "prepare_threshold"):
        params.pop(key, None)
    conn = psycopg.connect(**params, autocommit=True)
    conn.execute(f"LISTEN {NOTIFY_CHANNEL}")
    return conn


def _notified(conn: psycopg.Connection, timeout: float = 0.5) -> int:
    return sum(1 for _ in conn.notifies(timeout=timeout))


@pytest.mark.django_db(transaction=True)
def test_a_next_run_set_or_moved_earlier_notifies_later_or_cleared_does_not_raw_sql(agent_factory, owner):
    agent = agent_factory(owner=owner, schedule={"type": "interval", "every_minutes": 5})
    listener = _listener()
    try:
        with connection.cursor() as cursor:
            # set from NULL: notifies
            cursor.execute("UPDATE agents SET next_run_at = %s WHERE id = %s", [FAR, agent.pk])
            assert _notified(listener) == 1
            # moved later (what the tick does to every slot it fires): silent
            cursor.execute("UPDATE agents SET next_run_at = next_run_at + interval '1 hour' WHERE id = %s", [agent.pk])
            assert _notified(listener) == 0
            # moved earlier (an owner's edit): notifies
            cursor.execute("UPDATE agents SET next_run_at = now() WHERE id = %s", [agent.pk])
            assert _notified(listener) == 1
            # cleared (a closed gate) and other columns changed: silent
            cursor.execute("UPDATE agents SET name = 'renamed' WHERE id = %s", [agent.pk])
            cursor.execute("UPDATE agents SET next_run_at = NULL WHERE id = %s", [agent.pk])
            assert _notified(listener) == 0
            # a new agent that is scheduled: notifies; a bulk change wakes once per transaction
            cursor.execute(
                "INSERT INTO agents (owner_id, name, instructions, model_id, schedule, next_run_at, enabled, admin_paused) "
                "SELECT owner_id, 'copy ' || g, '', model_id, schedule, now() + interval '1 day', true, false "
                "FROM agents, generate_series(1, 50) g WHERE id = %s",
                [agent.pk],
            )
            assert _notified(listener) == 1
    finally:
        listener.close()


def _start(loop: SchedulerLoop) -> threading.Thread:
    thread = threading.Thread(target=loop.run, daemon=True)
    thread.start()
    return thread


def _wait_for(predicate, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return predicate()


@pytest.mark.django_db(transaction=True)
def test_the_loop_ticks_at_the_next_due_time_not_at_its_maximum_sleep(agent_factory, owner, dispatched):
    # given an agent due 0.8 s from now and a loop that would otherwise sleep 30 s
    agent = agent_factory(owner=owner, schedule={"type": "interval", "every_minutes": 5})
    due = datetime.now(UTC) + timedelta(seconds=0.8)
    Agent.objects.filter(pk=agent.pk).update(next_run_at=due)
    loop = SchedulerLoop(coalesce=0.05, max_sleep=30)
    thread = _start(loop)
    try:
        # then the run is queued and on the broker right after its slot, well before 30 s
        assert _wait_for(lambda: AgentRun.objects.filter(agent=agent, enqueued_at__isnull=False).exists(), 5)
        run = AgentRun.objects.get(agent=agent)
        assert run.scheduled_for == due
        assert timedelta(0) <= run.enqueued_at - due < timedelta(seconds=0.5)
        assert dispatched == [run.pk]
    finally:
        loop._stop.set()
        Agent.objects.filter(pk=agent.pk).update(next_run_at=datetime.now(UTC))  # wakes it to stop
        thread.join(5)
    assert not thread.is_alive()


@pytest.mark.django_db(transaction=True)
def test_a_schedule_change_wakes_a_sleeping_loop_through_notify(agent_factory, owner, dispatched):
    # given a loop asleep for up to 30 s: the only agent is due next century
    agent = agent_factory(owner=owner, schedule={"type": "interval", "every_minutes": 5})
    Agent.objects.filter(pk=agent.pk).update(next_run_at=FAR)
    loop = SchedulerLoop(coalesce=0.05, max_sleep=30)
    thread = _start(loop)
    try:
        assert _wait_for(lambda: loop.progress_at > 0 and loop._listener is not None, 5)
        time.sleep(0.3)  # asleep now
        # when the owner's edit makes it due now (a plain UPDATE: the trigger notifies, not the code)
        changed = datetime.now(UTC)
        with connection.cursor() as cursor:
            cursor.execute("UPDATE agents SET next_run_at = %s WHERE id = %s", [changed, agent.pk])
        # then it runs within a fraction of a second, not after the 30 s sleep
        assert _wait_for(lambda: AgentRun.objects.filter(agent=agent, enqueued_at__isnull=False).exists(), 3)
        assert AgentRun.objects.get(agent=agent).enqueued_at - changed < timedelta(seconds=1)
        assert loop.wakeups >= 1
    finally:
        loop._stop.set()
        Agent.objects.filter(pk=agent.pk).update(next_run_at=datetime.now(UTC))
        thread.join(5)


@pytest.mark.django_db(transaction=True)
def test_ticks_are_coalesced_at_least_the_configured_interval_apart(agent_factory, owner, dispatched):
    platform_settings_update(weekly_token_budget=10 * platform_settings().agent_run_token_cap)
    first, second = (agent_factory(owner=owner, schedule={"type": "interval", "every_minutes": 5}) for _ in range(2))
    now = datetime.now(UTC)
    Agent.objects.filter(pk=first.pk).update(next_run_at=now - timedelta(seconds=1))
    Agent.objects.filter(pk=second.pk).update(next_run_at=FAR)
    loop = SchedulerLoop(coalesce=10, max_sleep=30)
    try:
        assert loop.cycle() == 30  # ticked; nothing else is due this century: the longest sleep
        assert loop.ticks == 1 and AgentRun.objects.filter(agent=first).count() == 1
        # something due right after a tick waits for the coalescing window instead of a tick of its own
        Agent.objects.filter(pk=second.pk).update(next_run_at=now)
        wait = loop.cycle()
        assert 9 < wait <= 10 and loop.ticks == 1
        assert not AgentRun.objects.filter(agent=second).exists()
        # and once the window has passed it is ticked
        loop._last_tick -= 10
        loop.cycle()
        assert loop.ticks == 2 and AgentRun.objects.filter(agent=second).count() == 1
    finally:
        loop.close()


@pytest.mark.django_db(transaction=True)
def test_an_idle_loop_sleeps_at_most_its_maximum(owner):
    loop = SchedulerLoop(coalesce=0.1, max_sleep=0.3)
    try:
        assert loop.cycle() == 0.3  # no agent scheduled at all
        started = time.monotonic()
        assert loop.wait(loop.cycle()) is False
        assert 0.25 < time.monotonic() - started < 2
    finally:
        loop.close()


@pytest.mark.django_db(transaction=True)
def test_beat_runs_the_loop_and_starts_it_again_when_its_thread_died(owner, settings):
    from achilles.beat import HeartbeatDatabaseScheduler
    from achilles.celery_app import app

    settings.AGENT_SCHEDULER_MAX_SLEEP_SECONDS = 0.3  # a stopped loop notices within one sleep

    scheduler = HeartbeatDatabaseScheduler(app=app, lazy=True)
    assert scheduler._agents_loop is None  # constructing a scheduler starts nothing
    try:
        assert scheduler._loop_alive() is True
        first = scheduler._agents_loop
        assert first is not None and first.running()
        # when the thread dies, the next Beat tick starts a new one
        first.stop(timeout=10)
        assert not first.running()
        assert scheduler._loop_alive() is True
        assert scheduler._agents_loop is not first and scheduler._agents_loop.running()
    finally:
        if scheduler._agents_loop is not None:
            scheduler._agents_loop.stop(timeout=10)
