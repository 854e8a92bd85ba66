"""Gates and cascades (AE-GOV): enabled, admin_paused, model present, budget — independent axes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.db import IntegrityError, connection, transaction

from achilles.errors import Conflict, PermissionDenied
from achilles.models import AllowedModel, User
from achilles.platform import platform_settings_update
from agents.models import Agent, AgentRun
from agents.services import agent_create, agent_run_request, agent_set_admin_paused, agent_update, scheduler_tick
from tests.achilles.factories import AllowedModelFactory

pytestmark = [pytest.mark.integration, pytest.mark.django_db]

NOW = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)
EVERY_10 = {"type": "interval", "every_minutes": 10}


def _scheduled(owner, **kwargs):
    return agent_create(owner=owner, name=kwargs.pop("name", "agent"), schedule=EVERY_10, now=NOW, **kwargs)


def _tick_much_later():
    for minutes in (10, 20, 30, 60):
        scheduler_tick(now=NOW + timedelta(minutes=minutes), redispatch=False)


@pytest.mark.p0
def test_owner_cannot_set_admin_paused_only_admin_can_flag_unchanged(owner, chat_model):
    agent = _scheduled(owner)
    with pytest.raises(PermissionDenied):
        agent_update(agent=agent, changes={"admin_paused": True})
    agent.refresh_from_db()
    assert agent.admin_paused is False
    agent_set_admin_paused(agent_id=agent.pk, paused=True)
    with pytest.raises(PermissionDenied):
        agent_update(agent=agent, changes={"admin_paused": False})
    agent.refresh_from_db()
    assert agent.admin_paused is True


@pytest.mark.p1
def test_admin_paused_set_by_admin_stops_the_agent_and_never_touches_enabled(owner, chat_model):
    agent = _scheduled(owner)
    paused = agent_set_admin_paused(agent_id=agent.pk, paused=True, now=NOW)
    assert (paused.admin_paused, paused.enabled, paused.next_run_at) == (True, True, None)
    resumed = agent_set_admin_paused(agent_id=agent.pk, paused=False, now=NOW)
    assert (resumed.admin_paused, resumed.enabled) == (False, True)
    assert resumed.next_run_at == NOW + timedelta(minutes=10)  # reopening recomputes next_run_at


@pytest.mark.p1
def test_enabled_is_the_owner_switch_and_independent_of_admin_paused(owner, chat_model):
    agent = _scheduled(owner)
    agent_set_admin_paused(agent_id=agent.pk, paused=True, now=NOW)
    # the owner switches on/off while the admin lock holds: the lock stays, the agent stays out of the scan
    agent = agent_update(agent=agent, changes={"enabled": False}, now=NOW)
    agent = agent_update(agent=agent, changes={"enabled": True}, now=NOW)
    assert (agent.enabled, agent.admin_paused, agent.next_run_at) == (True, True, None)
    # once the admin resumes, the owner's switch decides
    agent = agent_set_admin_paused(agent_id=agent.pk, paused=False, now=NOW)
    assert agent.next_run_at is not None


@pytest.mark.p0
@pytest.mark.parametrize("closed", ["enabled", "admin_paused", "model", "budget"])
def test_agent_runs_only_when_enabled_not_admin_paused_budget_within_and_model_present_axes_independent(
    owner, chat_model, dispatched, closed
):
    # given two due agents of one owner; exactly one axis is closed for the first
    agent, control = _scheduled(owner, name="gated"), _scheduled(owner, name="control")
    if closed == "enabled":
        agent = agent_update(agent=agent, changes={"enabled": False}, now=NOW)
    elif closed == "admin_paused":
        agent = agent_set_admin_paused(agent_id=agent.pk, paused=True, now=NOW)
    elif closed == "model":
        Agent.objects.filter(pk=agent.pk).update(model=None)
    else:
        platform_settings_update(weekly_token_budget=10)
        AgentRun.objects.create(
            agent=agent,
            trigger="manual",
            state="succeeded",
            tokens_used=10,
            started_at=NOW - timedelta(hours=1),
            finished_at=NOW - timedelta(hours=1),
        )
    # when the slot comes
    result = scheduler_tick(now=NOW + timedelta(minutes=10), redispatch=False)
    # then the gated agent does not run; the other axes are untouched
    agent.refresh_from_db()
    assert not AgentRun.objects.filter(agent=agent, state__in=["queued", "running"]).exists()
    assert agent.enabled == (closed != "enabled")
    assert agent.admin_paused == (closed == "admin_paused")
    assert (agent.model_id is None) == (closed == "model")
    if closed == "budget":
        # the owner's budget is shared: the control agent is refused too, with an honest row each
        assert result.skipped_budget == 2
    else:
        assert AgentRun.objects.filter(agent=agent).count() == 0
        assert AgentRun.objects.filter(agent=control, state="queued").count() == 1


@pytest.mark.p0
def test_model_removed_from_agent_models_sets_null_agent_out_of_scan_no_run_no_skipped_no_fallback_to_default(
    owner, chat_model, dispatched
):
    # given an agent on a non-default model
    special = AllowedModelFactory(name="special-model", provider=chat_model.provider)
    agent = _scheduled(owner, model_name="special-model")
    assert agent.next_run_at is not None
    # when the admin removes the model from the allow-list (one DELETE; the database does SET NULL)
    AllowedModel.objects.filter(pk=special.pk).delete()
    # then the agent has no model and no next run — no fallback to the default chat model
    agent.refresh_from_db()
    assert agent.model_id is None and agent.next_run_at is None
    _tick_much_later()
    assert AgentRun.objects.filter(agent=agent).count() == 0
    with pytest.raises(Conflict) as caught:
        agent_run_request(agent=agent)
    assert caught.value.code == "model_missing"
    assert AgentRun.objects.filter(agent=agent).count() == 0
    # the same holds when the row goes by raw SQL
    other = AllowedModelFactory(name="other-model", provider=chat_model.provider)
    second = _scheduled(owner, name="second", model_name="other-model")
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM agent_models WHERE id = %s", [other.pk])
    second.refresh_from_db()
    assert (second.model_id, second.next_run_at) == (None, None)


@pytest.mark.p0
@pytest.mark.parametrize("gate", ["enabled=false", "admin_paused=true"])
def test_closed_gate_agent_out_of_scan_manual_run_refused_no_skipped_rows_pile_up(owner, chat_model, dispatched, gate):
    agent = _scheduled(owner)
    if gate == "enabled=false":
        agent = agent_update(agent=agent, changes={"enabled": False}, now=NOW)
    else:
        agent = agent_set_admin_paused(agent_id=agent.pk, paused=True, now=NOW)
    assert agent.next_run_at is None
    _tick_much_later()
    with pytest.raises(Conflict) as caught:
        agent_run_request(agent=agent)
    assert caught.value.status == 409
    assert AgentRun.objects.filter(agent=agent).count() == 0


@pytest.mark.p0
def test_closed_gate_with_a_next_run_at_is_refused_by_the_database(owner, chat_model):
    agent = _scheduled(owner)
    # a raw UPDATE closing a gate clears next_run_at (trigger) …
    with connection.cursor() as cursor:
        cursor.execute("UPDATE agents SET admin_paused = true WHERE id = %s RETURNING next_run_at", [agent.pk])
        assert cursor.fetchone()[0] is None
    # … and a raw INSERT of a closed-gate agent with a next run violates the CHECK
    with (
        pytest.raises(IntegrityError, match="agents_agent_closed_gate_not_scheduled"),
        transaction.atomic(),
        connection.cursor() as cursor,
    ):
        cursor.execute(
            "INSERT INTO agents (owner_id, name, instructions, model_id, schedule, next_run_at, enabled, "
            "admin_paused) VALUES (%s, 'x', '', %s, '{\"type\": \"interval\", \"every_minutes\": 5}', now(), "
            "false, false)",
            [owner.pk, chat_model.pk],
        )
    with (
        pytest.raises(IntegrityError, match="agents_agent_name_not_empty"),
        transaction.atomic(),
        connection.cursor() as cursor,
    ):
        cursor.execute(
            "INSERT INTO agents (owner_id, name, instructions, enabled, admin_paused) VALUES (%s, '', '', true, false)",
            [owner.pk],
        )


@pytest.mark.p0
def test_owner_deactivated_disables_all_their_agents_reactivation_does_not_restore(owner, chat_model, user_factory):
    agents = [_scheduled(owner, name=f"a{i}") for i in range(3)]
    bystander = _scheduled(user_factory(username="bystander"))
    # when the account is deactivated (any path: ORM save here, raw SQL below)
    owner.is_active = False
    owner.save()
    for agent in agents:
        agent.refresh_from_db()
        assert (agent.enabled, agent.next_run_at) == (False, None)
    bystander.refresh_from_db()
    assert bystander.enabled is True
    # reactivation does not bring them back: only the owner switches them on again
    User.objects.filter(pk=owner.pk).update(is_active=True)
    assert not Agent.objects.filter(owner=owner, enabled=True).exists()
    owner.refresh_from_db()
    revived = agent_update(agent=agents[0], changes={"enabled": True}, now=NOW)
    assert revived.enabled and revived.next_run_at is not None
    with connection.cursor() as cursor:
        cursor.execute("UPDATE users SET is_active = false WHERE id = %s", [owner.pk])
    revived.refresh_from_db()
    assert revived.enabled is False


@pytest.mark.p0
def test_owner_deleted_agents_and_their_runs_go_by_on_delete_cascade(owner, chat_model):
    agent = _scheduled(owner)
    AgentRun.objects.create(agent=agent, trigger="manual", state="succeeded", finished_at=NOW)
    # one DELETE of the user; the database cascades (raw SQL proves it is not the ORM)
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM users WHERE id = %s", [owner.pk])
    assert not Agent.objects.filter(pk=agent.pk).exists()
    assert not AgentRun.objects.filter(agent_id=agent.pk).exists()


@pytest.mark.p1
def test_agent_deleted_its_runs_go_by_on_delete_cascade(owner, chat_model):
    agent = _scheduled(owner)
    AgentRun.objects.create(agent=agent, trigger="manual", state="queued")
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM agents WHERE id = %s", [agent.pk])
    assert AgentRun.objects.filter(agent_id=agent.pk).count() == 0
