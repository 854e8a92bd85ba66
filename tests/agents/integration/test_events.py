"""Agents woken by hub events (``agents.services.events``): the mirror's upload announces its changes
(``achilles.hooks.jira_issues_changed``), matching subscriptions record a debounced event, the tick
starts one ``event`` run per agent under the rules every run has. Driven through the real writer,
``hub.protocol.mirror_upload``."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from agents.models import AgentEvent, AgentRun
from agents.services.events import agent_events_fire, agent_subscription_create, event_brief
from agents.services.runs import _instructions_for
from hub.permissions import hub_group_ensure
from hub.protocol import mirror_upload
from hub.services import settings_set
from tests.achilles.factories import UserFactory

pytestmark = [pytest.mark.integration, pytest.mark.django_db]

T0 = "2026-12-01T10:00:00.000+0000"


def issue(key: str, *, status: str = "To Do", summary: str = "Задача", updated: str = T0, **extra) -> dict:
    return {
        "key": key,
        "project": key.split("-")[0],
        "summary": summary,
        "status": status,
        "issue_type": extra.pop("issue_type", "Task"),
        "priority": "Medium",
        "assignee": "",
        "labels": extra.pop("labels", ["AWPCA"]),
        "updated": updated,
        "fields": {},
        **extra,
    }


def at(minute: int) -> str:
    return f"2026-12-01T10:{minute:02d}:00.000+0000"


@pytest.fixture
def hub_owner(db):
    user = UserFactory(username="olga")
    user.groups.add(hub_group_ensure())
    return user


@pytest.fixture
def mirror(db):
    """The mirror after its initial load: AURORA-1 and AURORA-2 in To Do, OTHER-1 elsewhere."""
    mirror_upload(
        sync_agent=None,
        sync_run_id=None,
        issues=[issue("AURORA-1"), issue("AURORA-2"), issue("OTHER-1")],
    )


def upload(*issues: dict) -> None:
    mirror_upload(sync_agent=None, sync_run_id=None, issues=list(issues))


def fire(seconds: float = 61) -> list[int]:
    return agent_events_fire(now=timezone.now() + timedelta(seconds=seconds))


def test_the_initial_load_is_no_news(agent_factory, hub_owner):
    agent = agent_factory(owner=hub_owner)
    agent_subscription_create(agent=agent, events=["created", "updated", "transitioned"])
    upload(issue("AURORA-1"), issue("AURORA-2"))
    assert not AgentEvent.objects.exists()
    # a new issue in a project already mirrored is
    upload(issue("AURORA-3"))
    assert list(AgentEvent.objects.values_list("issue_key", "kinds")) == [("AURORA-3", ["created"])]


def test_a_transition_into_the_status_wakes_only_the_matching_subscription(
    agent_factory, hub_owner, mirror, dispatched, django_capture_on_commit_callbacks
):
    # given an agent subscribed to «AURORA, status → In Progress»
    agent = agent_factory(owner=hub_owner)
    agent_subscription_create(
        agent=agent, events=["transitioned"], project="aurora", status="In Progress", debounce_seconds=5
    )
    # when one issue moves there, another AURORA issue moves elsewhere and an OTHER issue moves there
    upload(
        issue("AURORA-1", status="In Progress", updated=at(1)),
        issue("AURORA-2", status="Done", updated=at(1)),
        issue("OTHER-1", status="In Progress", updated=at(1)),
    )
    # then nothing starts before the debounce is over, and one run after it
    assert fire(seconds=1) == []
    with django_capture_on_commit_callbacks(execute=True):
        [run_id] = fire(seconds=6)
    run = AgentRun.objects.get(pk=run_id)
    assert (run.trigger, run.state, dispatched) == ("event", "queued", [run_id])
    [event] = run.events.all()
    assert (event.issue_key, event.kinds, event.changes) == (
        "AURORA-1",
        ["transitioned"],
        {"status": ["To Do", "In Progress"]},
    )
    # the run's task says what woke it
    assert "AURORA-1 (transitioned): status: To Do → In Progress" in _instructions_for(run, agent)
    assert fire(seconds=3600) == []


def test_a_burst_of_edits_is_one_event_and_one_run(agent_factory, hub_owner, mirror, dispatched):
    agent = agent_factory(owner=hub_owner)
    agent_subscription_create(agent=agent, events=["updated"], project="AURORA", debounce_seconds=30)
    for n in range(1, 6):
        upload(issue("AURORA-1", summary=f"Правка {n}", updated=at(n)))
    [event] = AgentEvent.objects.all()
    assert event.hits == 5 and event.changes == {"summary": ["Задача", "Правка 5"]}
    [run_id] = fire(seconds=31)
    assert AgentRun.objects.filter(agent=agent).count() == 1
    assert list(AgentRun.objects.get(pk=run_id).events.values_list("hits", flat=True)) == [5]


def test_an_event_while_a_run_is_active_is_coalesced_into_the_next_run(
    agent_factory, run_factory, hub_owner, mirror, dispatched
):
    # given an agent whose manual run is still running
    agent = agent_factory(owner=hub_owner)
    agent_subscription_create(agent=agent, events=["updated", "transitioned"], debounce_seconds=0)
    active = run_factory(agent=agent, trigger="manual", state="running", started_at=timezone.now())
    # when two issues change
    upload(issue("AURORA-1", summary="Новое", updated=at(1)), issue("AURORA-2", status="Done", updated=at(1)))
    # then no run and no skipped row while the run is active: the events wait
    assert fire() == []
    assert AgentRun.objects.filter(agent=agent).count() == 1
    assert AgentEvent.objects.filter(run__isnull=True).count() == 2
    # and once it ends, one run carries both
    AgentRun.objects.filter(pk=active.pk).update(state="succeeded", finished_at=timezone.now())
    [run_id] = fire()
    assert sorted(AgentRun.objects.get(pk=run_id).events.values_list("issue_key", flat=True)) == [
        "AURORA-1",
        "AURORA-2",
    ]
    brief = event_brief(list(AgentEvent.objects.filter(run_id=run_id).order_by("issue_key")))
    assert "AURORA-2 (transitioned): status: To Do → Done" in brief


def test_the_weekly_budget_and_the_gates_hold_for_event_runs(agent_factory, hub_owner, mirror, dispatched):
    from achilles.platform import platform_settings_update

    spent = agent_factory(owner=hub_owner)
    agent_subscription_create(agent=spent, events=["updated"], debounce_seconds=0)
    closed = agent_factory(owner=UserFactory(username="ivan"))
    closed.owner.groups.add(hub_group_ensure())
    agent_subscription_create(agent=closed, events=["updated"], debounce_seconds=0)
    upload(issue("AURORA-1", summary="Новое", updated=at(1)))
    assert AgentEvent.objects.count() == 2
    # when the first owner's budget is spent and the second agent is switched off before the tick
    platform_settings_update(weekly_token_budget=0)
    type(closed).objects.filter(pk=closed.pk).update(enabled=False)
    # then each event is attached to a skipped run saying why, and nothing is queued
    assert fire() == []
    assert sorted(AgentRun.objects.values_list("trigger", "state", "reason")) == [
        ("event", "skipped", "budget_exceeded"),
        ("event", "skipped", "gate_closed"),
    ]
    assert not AgentEvent.objects.filter(run__isnull=True).exists()


def test_the_owner_hears_only_of_issues_they_may_read(agent_factory, hub_owner, mirror):
    staff = UserFactory(username="hubadmin", is_staff=True)
    staff.groups.add(hub_group_ensure())
    settings_set(user=staff, key="project_acl", value={"AURORA": ["user:" + str(staff.pk)]})
    no_hub = agent_factory(owner=UserFactory(username="nohub"))
    agent_subscription_create(agent=no_hub, events=["updated"])
    hidden = agent_factory(owner=hub_owner)
    agent_subscription_create(agent=hidden, events=["updated"])
    upload(issue("AURORA-1", summary="Новое", updated=at(1)), issue("OTHER-1", summary="Новое", updated=at(1)))
    # olga may read OTHER, not AURORA; the user without the hub group hears nothing
    assert list(AgentEvent.objects.values_list("agent_id", "issue_key")) == [(hidden.pk, "OTHER-1")]


def test_filters_on_type_and_label(agent_factory, hub_owner, mirror):
    agent = agent_factory(owner=hub_owner)
    agent_subscription_create(agent=agent, events=["updated"], issue_type="bug", label="urgent")
    upload(
        issue("AURORA-1", summary="a", updated=at(1), issue_type="Bug", labels=["AWPCA", "URGENT"]),
        issue("AURORA-2", summary="b", updated=at(1), issue_type="Task", labels=["urgent"]),
    )
    assert list(AgentEvent.objects.values_list("issue_key", flat=True)) == ["AURORA-1"]


# ------------------------------------------------------------------ the database says no


def _raw(sql: str, params: list) -> None:
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(sql, params)


@pytest.mark.parametrize(
    ("events", "debounce", "constraint"),
    [
        ("{}", 60, "agents_subscription_events_valid"),
        ("{created,deleted}", 60, "agents_subscription_events_valid"),
        ("{updated}", 3601, "agents_subscription_debounce_bounded"),
    ],
)
def test_subscription_constraints_refuse_raw_sql(agent_factory, events, debounce, constraint):
    agent = agent_factory()
    with pytest.raises(IntegrityError, match=constraint):
        _raw(
            "INSERT INTO agent_subscriptions (agent_id, events, project, issue_type, status, label, debounce_seconds)"
            " VALUES (%s, %s, '', '', '', '', %s)",
            [agent.pk, events, debounce],
        )


def _event_sql(agent_id: int, key: str = "AURORA-1", kinds: str = "{updated}") -> None:
    _raw(
        "INSERT INTO agent_events (agent_id, issue_key, kinds, changes, hits, fire_at)"
        " VALUES (%s, %s, %s, '{}', 1, now())",
        [agent_id, key, kinds],
    )


def test_event_constraints_refuse_raw_sql(agent_factory):
    agent = agent_factory()
    _event_sql(agent.pk)
    with pytest.raises(IntegrityError, match="agents_event_one_pending_per_issue"):
        _event_sql(agent.pk)
    with pytest.raises(IntegrityError, match="agents_event_kinds_valid"):
        _event_sql(agent.pk, "AURORA-2", "{deleted}")
    with pytest.raises(IntegrityError, match="agents_event_issue_key_format"):
        _event_sql(agent.pk, "aurora 2")
    with pytest.raises(IntegrityError, match="agents_agentrun_trigger_valid"):
        _raw(
            "INSERT INTO agent_runs (agent_id, trigger, state, reason, output, error, tokens_used)"
            " VALUES (%s, 'webhook', 'queued', '', '', '', 0)",
            [agent.pk],
        )


def test_deleting_the_agent_takes_its_subscriptions_and_events(agent_factory):
    agent = agent_factory()
    agent_subscription_create(agent=agent, events=["updated"])
    _event_sql(agent.pk)
    _raw("DELETE FROM agents WHERE id = %s", [agent.pk])
    with connection.cursor() as cursor:
        cursor.execute("SELECT (SELECT count(*) FROM agent_subscriptions) + (SELECT count(*) FROM agent_events)")
        assert cursor.fetchone()[0] == 0
