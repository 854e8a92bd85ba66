"""Schedules (AE-SCHED): manual-only, interval without drift, calendar in the owner's zone, the tick."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from django.db import connection

from achilles.errors import Conflict
from achilles.platform import platform_settings, platform_settings_update
from achilles.services import user_timezone_set
from agents.models import Agent, AgentRun
from agents.services import agent_create, agent_run_request, agent_runs_redispatch, scheduler_tick

pytestmark = [pytest.mark.integration, pytest.mark.django_db]

NOW = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)  # a Wednesday


@pytest.mark.p1
def test_schedule_null_agent_runs_only_manually_scheduler_never_touches_it(owner, chat_model, dispatched):
    agent = agent_create(owner=owner, name="по кнопке", schedule=None, now=NOW)
    assert agent.next_run_at is None
    for hours in (0, 1, 24 * 8):
        scheduler_tick(now=NOW + timedelta(hours=hours), redispatch=False)
    assert AgentRun.objects.filter(agent=agent).count() == 0


@pytest.mark.p1
def test_interval_next_run_at_counts_from_the_previous_run_without_drift(owner, chat_model, dispatched):
    # given an interval of 30 min created at 12:00 → first slot 12:30
    agent = agent_create(owner=owner, name="каждые 30", schedule={"type": "interval", "every_minutes": 30}, now=NOW)
    assert agent.next_run_at == NOW + timedelta(minutes=30)
    # when the tick runs late (12:31:47) and the run itself takes time
    scheduler_tick(now=NOW + timedelta(minutes=31, seconds=47), redispatch=False)
    agent.refresh_from_db()
    # then the next slot is 13:00, on the grid of the previous one, not 13:01:47
    assert agent.next_run_at == NOW + timedelta(minutes=60)
    # and after a long outage missed slots are not replayed: the next grid point after now
    AgentRun.objects.filter(agent=agent).update(state="succeeded", finished_at=NOW)
    scheduler_tick(now=NOW + timedelta(hours=5, minutes=10), redispatch=False)
    agent.refresh_from_db()
    assert agent.next_run_at == NOW + timedelta(hours=5, minutes=30)
    assert AgentRun.objects.filter(agent=agent).count() == 2


@pytest.mark.p1
def test_calendar_weekday_and_hhmm_gives_the_right_next_run_at(user_factory, chat_model):
    owner = user_factory(username="utc-owner", timezone="UTC")
    # Friday (4) 09:15 after Wednesday 12:00 → Friday 2026-11-27 09:15 UTC
    agent = agent_create(
        owner=owner, name="пятница", schedule={"type": "calendar", "weekday": 4, "time": "09:15"}, now=NOW
    )
    assert agent.next_run_at == datetime(2026, 11, 27, 9, 15, tzinfo=UTC)
    # the same weekday, time already passed → next week
    same_day = agent_create(
        owner=owner, name="среда", schedule={"type": "calendar", "weekday": 2, "time": "11:00"}, now=NOW
    )
    assert same_day.next_run_at == datetime(2026, 12, 2, 11, 0, tzinfo=UTC)


@pytest.mark.p0
def test_calendar_hhmm_resolves_in_owner_timezone_or_org_default_then_stored_utc(user_factory, chat_model):
    schedule = {"type": "calendar", "weekday": 4, "time": "09:00"}
    # an owner in New York: 09:00 EST = 14:00 UTC
    ny = agent_create(
        owner=user_factory(username="ny", timezone="America/New_York"), name="ny", schedule=schedule, now=NOW
    )
    assert ny.next_run_at == datetime(2026, 11, 27, 14, 0, tzinfo=UTC)
    # an owner without a zone gets the org default (platform_settings.timezone)
    platform_settings_update(timezone="Asia/Tokyo")
    tokyo = agent_create(owner=user_factory(username="nozone", timezone=None), name="org", schedule=schedule, now=NOW)
    assert tokyo.next_run_at == datetime(2026, 11, 27, 0, 0, tzinfo=UTC)
    # stored as UTC in the database
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL timezone = 'UTC'")
        cursor.execute("SELECT next_run_at::text FROM agents WHERE id = %s", [tokyo.pk])
        assert cursor.fetchone()[0] == "2026-11-27 00:00:00+00"


@pytest.mark.p1
def test_calendar_schedule_is_dst_correct(user_factory, chat_model, dispatched):
    # Berlin switches to CET on Sunday 2026-10-25: 09:00 is 07:00 UTC before and 08:00 UTC after
    owner = user_factory(username="berlin", timezone="Europe/Berlin")
    before = datetime(2026, 10, 20, 12, 0, tzinfo=UTC)
    agent = agent_create(
        owner=owner, name="weekly", schedule={"type": "calendar", "weekday": 0, "time": "09:00"}, now=before
    )
    assert agent.next_run_at == datetime(2026, 10, 26, 8, 0, tzinfo=UTC)
    scheduler_tick(now=datetime(2026, 10, 26, 8, 0, 5, tzinfo=UTC), redispatch=False)
    agent.refresh_from_db()
    assert agent.next_run_at == datetime(2026, 11, 2, 8, 0, tzinfo=UTC)
    # and in spring 09:00 CEST is 07:00 UTC again
    spring = agent_create(
        owner=owner,
        name="spring",
        schedule={"type": "calendar", "weekday": 0, "time": "09:00"},
        now=datetime(2026, 3, 25, tzinfo=UTC),
    )
    assert spring.next_run_at == datetime(2026, 3, 30, 7, 0, tzinfo=UTC)


@pytest.mark.p0
def test_due_next_run_at_puts_a_run_on_the_background_queue_with_trigger_scheduled(
    owner, chat_model, dispatched, django_capture_on_commit_callbacks
):
    agent = agent_create(owner=owner, name="due", schedule={"type": "interval", "every_minutes": 10}, now=NOW)
    # not yet due: nothing
    assert scheduler_tick(now=NOW + timedelta(minutes=9), redispatch=False).queued == []
    # due: a queued scheduled run, enqueued only after commit
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        result = scheduler_tick(now=NOW + timedelta(minutes=10), redispatch=False)
    assert dispatched == []
    for callback in callbacks:
        callback()
    run = AgentRun.objects.get(agent=agent)
    assert (run.state, run.trigger) == ("queued", "scheduled")
    assert run.scheduled_for == NOW + timedelta(minutes=10)
    assert result.queued == [run.pk] == dispatched
    run.refresh_from_db()
    assert run.enqueued_at is not None


@pytest.mark.p0
def test_active_running_or_queued_run_makes_the_slot_a_skipped_already_running_row(
    owner, chat_model, run_factory, dispatched
):
    agent = agent_create(owner=owner, name="busy", schedule={"type": "interval", "every_minutes": 10}, now=NOW)
    active = run_factory(agent=agent, state="running", started_at=NOW, heartbeat_at=NOW)
    scheduler_tick(now=NOW + timedelta(minutes=10), redispatch=False)
    runs = AgentRun.objects.filter(agent=agent).exclude(pk=active.pk)
    assert [(r.state, r.reason, r.started_at) for r in runs] == [("skipped", "already_running", None)]
    assert dispatched == []
    agent.refresh_from_db()
    assert agent.next_run_at == NOW + timedelta(minutes=20)


@pytest.mark.p1
def test_manual_run_needs_no_schedule_works_with_schedule_null_but_gates_still_apply(owner, chat_model):
    agent = agent_create(owner=owner, name="manual", schedule=None, now=NOW)
    run = agent_run_request(agent=agent)
    assert (run.trigger, run.state) == ("manual", "queued")
    AgentRun.objects.filter(pk=run.pk).update(state="succeeded", finished_at=NOW)
    for flag, code in (({"enabled": False}, "agent_disabled"), ({"admin_paused": True}, "agent_paused")):
        Agent.objects.filter(pk=agent.pk).update(**flag)
        agent.refresh_from_db()
        with pytest.raises(Conflict) as caught:
            agent_run_request(agent=agent)
        assert caught.value.code == code
        Agent.objects.filter(pk=agent.pk).update(enabled=True, admin_paused=False)
        agent.refresh_from_db()


@pytest.mark.p0
def test_queued_run_whose_enqueue_failed_broker_down_is_redispatched_by_the_tick(
    owner, chat_model, monkeypatch, django_capture_on_commit_callbacks
):
    # given the broker is down when the slot fires
    def broker_down(run_ids, producer, queue):
        raise ConnectionError("redis is down")

    monkeypatch.setattr("agents.services.dispatch._publish", broker_down)
    agent = agent_create(owner=owner, name="resilient", schedule={"type": "interval", "every_minutes": 10})
    Agent.objects.filter(pk=agent.pk).update(next_run_at=datetime.now(UTC) - timedelta(seconds=1))
    with django_capture_on_commit_callbacks(execute=True):
        scheduler_tick(redispatch=False)
    run = AgentRun.objects.get(agent=agent)
    assert run.state == "queued" and run.enqueued_at is None
    # when the broker is back and a later tick runs
    sent: list[int] = []
    monkeypatch.setattr("agents.services.dispatch._publish", lambda run_ids, producer, queue: sent.extend(run_ids))
    assert agent_runs_redispatch(now=datetime.now(UTC) + timedelta(minutes=1)) == [run.pk]
    # then the run is enqueued, not stranded
    assert sent == [run.pk]
    run.refresh_from_db()
    assert run.enqueued_at is not None
    # and an enqueued run is not sent again while fresh
    assert agent_runs_redispatch(now=datetime.now(UTC) + timedelta(minutes=1)) == []


@pytest.mark.p1
@pytest.mark.django_db(transaction=True)
def test_concurrent_ticks_skip_locked_each_due_agent_gets_exactly_one_run(owner, agent_factory, dispatched):
    # A budget with room for all 60 runs' reservations (one per-run cap each): only SKIP LOCKED is tested here.
    platform_settings_update(weekly_token_budget=61 * platform_settings().agent_run_token_cap)
    agents = [agent_factory(owner=owner, schedule={"type": "interval", "every_minutes": 5}) for _ in range(60)]
    Agent.objects.filter(pk__in=[a.pk for a in agents]).update(next_run_at=NOW - timedelta(seconds=5))
    barrier = threading.Barrier(3)
    results = []

    def tick():
        barrier.wait()
        try:
            results.append(scheduler_tick(now=NOW, batch_size=7, redispatch=False))
        finally:
            connection.close()

    threads = [threading.Thread(target=tick) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(len(r.queued) for r in results) == 60
    assert AgentRun.objects.count() == 60
    assert sorted(dispatched) == sorted(AgentRun.objects.values_list("id", flat=True))


@pytest.mark.p1
def test_the_agent_representation_previews_the_next_five_run_times(owner, chat_model):
    from agents.schedule import preview

    agent = agent_create(owner=owner, name="p", schedule={"type": "interval", "every_minutes": 90}, now=NOW)
    times = preview(agent.schedule, "UTC", now=NOW, first=agent.next_run_at)
    assert times == [NOW + timedelta(minutes=90 * k) for k in range(1, 6)]


@pytest.mark.p1
def test_owner_timezone_change_moves_calendar_slots_but_not_interval_slots(user_factory, chat_model):
    owner = user_factory(username="mover", timezone="Europe/Moscow")
    calendar = agent_create(
        owner=owner, name="cal", schedule={"type": "calendar", "weekday": 4, "time": "09:00"}, now=NOW
    )
    interval = agent_create(owner=owner, name="int", schedule={"type": "interval", "every_minutes": 60}, now=NOW)
    assert calendar.next_run_at == datetime(2026, 11, 27, 6, 0, tzinfo=UTC)
    before = interval.next_run_at
    user_timezone_set(user=owner, timezone="Asia/Vladivostok")
    calendar.refresh_from_db()
    interval.refresh_from_db()
    assert calendar.next_run_at.astimezone(UTC).hour == 23  # 09:00 in Vladivostok = 23:00 UTC the day before
    assert interval.next_run_at == before


@pytest.mark.p1
def test_org_timezone_change_moves_calendar_slots_of_owners_without_a_zone_only(user_factory, chat_model):
    # given the org in Moscow, one owner without a zone and one in Berlin, each with a Friday 09:00 agent
    platform_settings_update(timezone="Europe/Moscow")
    calendar = {"type": "calendar", "weekday": 4, "time": "09:00"}
    follows_org = agent_create(
        owner=user_factory(username="org-tz", timezone=None), name="org", schedule=calendar, now=NOW
    )
    berlin = agent_create(
        owner=user_factory(username="own-tz", timezone="Europe/Berlin"), name="own", schedule=calendar, now=NOW
    )
    interval = agent_create(
        owner=follows_org.owner, name="int", schedule={"type": "interval", "every_minutes": 60}, now=NOW
    )
    assert follows_org.next_run_at == datetime(2026, 11, 27, 6, 0, tzinfo=UTC)
    berlin_before, interval_before = berlin.next_run_at, interval.next_run_at
    # when the admin moves the organisation to Vladivostok
    platform_settings_update(timezone="Asia/Vladivostok")
    for agent in (follows_org, berlin, interval):
        agent.refresh_from_db()
    # then the zone-less owner's calendar slot follows: Friday 09:00 in Vladivostok (23:00 UTC the day
    # before; counted from the real clock, as the save happens now); the owner with a zone of their
    # own and interval slots stay put
    local = follows_org.next_run_at.astimezone(ZoneInfo("Asia/Vladivostok"))
    assert (local.weekday(), local.hour, local.minute) == (4, 9, 0)
    assert follows_org.next_run_at.astimezone(UTC).hour == 23
    assert berlin.next_run_at == berlin_before
    assert interval.next_run_at == interval_before


@pytest.mark.p0
def test_a_queued_run_makes_the_slot_a_skipped_already_running_row(owner, chat_model, run_factory, dispatched):
    """A queued run (not started yet) is as active as a running one: the due slot is skipped."""
    agent = agent_create(owner=owner, name="waiting", schedule={"type": "interval", "every_minutes": 10}, now=NOW)
    queued = run_factory(agent=agent, state="queued")
    scheduler_tick(now=NOW + timedelta(minutes=10), redispatch=False)
    runs = AgentRun.objects.filter(agent=agent).exclude(pk=queued.pk)
    assert [(r.state, r.reason, r.started_at) for r in runs] == [("skipped", "already_running", None)]
    assert dispatched == []
    queued.refresh_from_db()
    assert queued.state == "queued"
