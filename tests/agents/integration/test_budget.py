"""Weekly token budget (AE-BUDGET): per owner, over all their agents, by finished_at, in the owner's week."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from achilles.errors import Conflict
from achilles.platform import platform_settings_update
from agents.models import Agent, AgentRun
from agents.selectors import owner_tokens_this_week
from agents.services import agent_run_request, scheduler_tick

pytestmark = [pytest.mark.integration, pytest.mark.django_db]

# Wednesday 2026-11-25 12:00 UTC; the owner's week (Europe/Moscow, UTC+3) began Monday 2026-11-23 00:00 MSK.
NOW = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)


def _spent(agent, tokens, finished_at):
    return AgentRun.objects.create(
        agent=agent,
        trigger="manual",
        state="succeeded",
        tokens_used=tokens,
        started_at=finished_at - timedelta(minutes=1),
        finished_at=finished_at,
    )


def _due(agent, now):
    Agent.objects.filter(pk=agent.pk).update(next_run_at=now - timedelta(seconds=1))


@pytest.mark.p0
def test_budget_sums_tokens_used_over_all_owner_agents_this_week_by_finished_at_not_per_agent(
    owner, agent_factory, user_factory
):
    # given two agents of one owner and one of someone else
    first, second = agent_factory(owner=owner), agent_factory(owner=owner)
    stranger = agent_factory(owner=user_factory(username="stranger"))
    _spent(first, 400, NOW - timedelta(days=1))
    _spent(second, 500, NOW - timedelta(hours=1))
    _spent(stranger, 10_000, NOW - timedelta(hours=1))
    # a run started last week but finished this week counts; one finished before Monday 00:00 MSK does not
    _spent(first, 70, datetime(2026, 11, 22, 21, 0, 30, tzinfo=UTC))  # Monday 00:00:30 MSK
    _spent(first, 9_999, datetime(2026, 11, 22, 20, 59, tzinfo=UTC))  # Sunday 23:59 MSK
    # then the owner's week total is the sum over both agents, by finished_at
    assert owner_tokens_this_week(owner=owner, now=NOW) == 970


@pytest.mark.p0
def test_over_budget_scheduled_run_is_skipped_budget_exceeded_with_zero_tokens(owner, agent_factory, dispatched):
    # given an owner who spent the weekly budget on one agent
    platform_settings_update(weekly_token_budget=1000)
    spender = agent_factory(owner=owner)
    _spent(spender, 1000, NOW - timedelta(hours=2))
    # and another agent of theirs that is due
    agent = agent_factory(owner=owner, schedule={"type": "interval", "every_minutes": 60})
    _due(agent, NOW)
    # when the scheduler ticks
    result = scheduler_tick(now=NOW, redispatch=False)
    # then the slot is recorded as skipped/budget_exceeded, never started, no tokens, nothing enqueued
    run = AgentRun.objects.get(agent=agent)
    assert (run.state, run.reason, run.trigger) == ("skipped", "budget_exceeded", "scheduled")
    assert run.tokens_used == 0 and run.started_at is None
    assert result.queued == [] and dispatched == []
    # and the agent keeps its schedule (budget is a runtime refusal, not a closed gate)
    agent.refresh_from_db()
    assert agent.next_run_at > NOW


@pytest.mark.p0
def test_over_budget_manual_run_is_refused_409_budget_exceeded(owner, agent_factory, time_machine):
    time_machine.move_to(NOW, tick=False)
    platform_settings_update(weekly_token_budget=100)
    agent = agent_factory(owner=owner)
    _spent(agent, 150, NOW - timedelta(hours=1))
    with pytest.raises(Conflict) as caught:
        agent_run_request(agent=agent)
    assert caught.value.code == "budget_exceeded" and caught.value.status == 409
    assert AgentRun.objects.filter(agent=agent).count() == 1


@pytest.mark.p0
def test_budget_limit_lives_in_platform_settings_and_changes_centrally(owner, agent_factory, dispatched):
    agent = agent_factory(owner=owner, schedule={"type": "interval", "every_minutes": 60})
    _spent(agent, 5000, NOW - timedelta(hours=3))
    # given a limit below what was spent: the slot is skipped
    platform_settings_update(weekly_token_budget=4000)
    _due(agent, NOW)
    scheduler_tick(now=NOW, redispatch=False)
    assert AgentRun.objects.filter(agent=agent, state="skipped", reason="budget_exceeded").count() == 1
    # when the admin raises the limit in platform settings (no restart, no module copy)
    platform_settings_update(weekly_token_budget=6000)
    _due(agent, NOW)
    scheduler_tick(now=NOW, redispatch=False)
    # then the next slot runs
    assert AgentRun.objects.filter(agent=agent, state="queued", trigger="scheduled").count() == 1


@pytest.mark.p1
def test_budget_week_starts_monday_midnight_in_the_owner_timezone(user_factory, agent_factory):
    # given an owner in Asia/Vladivostok (UTC+10): their Monday began at Sunday 14:00 UTC
    owner = user_factory(username="vlad", timezone="Asia/Vladivostok")
    agent = agent_factory(owner=owner)
    monday = datetime(2026, 11, 23, 1, 0, tzinfo=UTC)  # Monday 11:00 in Vladivostok
    _spent(agent, 300, datetime(2026, 11, 22, 14, 30, tzinfo=UTC))  # Monday 00:30 local: this week
    _spent(agent, 700, datetime(2026, 11, 22, 13, 30, tzinfo=UTC))  # Sunday 23:30 local: last week
    assert owner_tokens_this_week(owner=owner, now=monday) == 300


@pytest.mark.p1
def test_a_new_week_reopens_the_budget(owner, agent_factory, dispatched):
    platform_settings_update(weekly_token_budget=100)
    agent = agent_factory(owner=owner, schedule={"type": "interval", "every_minutes": 60})
    _spent(agent, 500, NOW - timedelta(hours=1))
    next_week = NOW + timedelta(days=7)
    _due(agent, next_week)
    result = scheduler_tick(now=next_week, redispatch=False)
    assert len(result.queued) == 1


@pytest.mark.p0
def test_a_queued_run_rechecks_the_budget_when_it_starts(owner, agent_factory, fake_chat, run_task, time_machine):
    """A run queued while there was room, started after the week's budget was spent (by another
    agent's run that finished meanwhile), is ``skipped / budget_exceeded`` with no tokens and no
    model call. Failed before the fix: the queued run started and spent on top of the budget."""
    time_machine.move_to(NOW, tick=False)
    platform_settings_update(weekly_token_budget=10_000, agent_run_token_cap=1_000)
    agent = agent_factory(owner=owner)
    run = agent_run_request(agent=agent, now=NOW)
    # meanwhile another agent of the owner finished a run that spent the whole budget
    _spent(agent_factory(owner=owner), 10_000, NOW - timedelta(minutes=1))
    fake_chat.add_round([])  # a model call would be recorded here

    run_task(run.pk)

    run.refresh_from_db()
    assert (run.state, run.reason, run.tokens_used, run.started_at) == ("skipped", "budget_exceeded", 0, None)
    assert fake_chat.calls == []
