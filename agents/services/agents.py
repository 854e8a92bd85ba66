"""Agent writes: create, update, delete, and the admin's lock."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from django.db import transaction
from django.db.models import Q, QuerySet
from django.utils import timezone
from django.utils.translation import gettext as _

from achilles import audit
from achilles.audit import Actor
from achilles.errors import NotFound, PermissionDenied, ValidationFailed
from achilles.models import AllowedModel, User
from achilles.names import name_clean
from achilles.selectors import allowed_model_get
from agents import schedule as sched
from agents.models import Agent


def _resolve_model(name: str | None) -> AllowedModel:
    """A chat model from the allow-list; omitted → the list's default chat model."""
    return allowed_model_get(name=name, kind="chat", field="model")


def _owner_tz(owner: User) -> str:
    return owner.effective_timezone()


def _compute_next_run(
    agent: Agent, now: datetime, previous: datetime | None = None, tz: str | None = None
) -> datetime | None:
    if not agent.gates_open or not agent.schedule:
        return None
    return sched.next_run_at(agent.schedule, tz or _owner_tz(agent.owner), now=now, previous=previous)


def _clean_name(name: str) -> str:
    try:
        return name_clean(name or "")
    except ValueError as exc:
        raise ValidationFailed(f"name {exc}", code="name_empty", field="name") from exc


@transaction.atomic
def agent_create(
    *,
    owner: User,
    name: str,
    instructions: str = "",
    model_name: str | None = None,
    schedule: dict | None = None,
    enabled: bool = True,
    now: datetime | None = None,
    first_run_at: datetime | None = None,
) -> Agent:
    """``first_run_at`` overrides the first slot (the demo agent runs a minute after start-up)."""
    now = now or timezone.now()
    agent = Agent(
        owner=owner,
        name=_clean_name(name),
        instructions=instructions,
        model=_resolve_model(model_name),
        schedule=schedule or None,
        enabled=enabled,
    )
    agent.next_run_at = _compute_next_run(agent, now)
    if first_run_at is not None and agent.next_run_at is not None:
        agent.next_run_at = first_run_at
    agent.save()
    return agent


@transaction.atomic
def agent_update(*, agent: Agent, changes: dict[str, Any], now: datetime | None = None) -> Agent:
    """Apply the owner's changes (name, instructions, model, schedule, enabled).

    A new schedule or a reopened switch recomputes ``next_run_at`` from now; other edits keep it.
    """
    if "admin_paused" in changes:
        # The admin's lock is sticky: an owner's attempt is refused and changes nothing.
        raise PermissionDenied(
            _("Остановить агента администратором может только администратор платформы."), code="admin_only"
        )
    unknown = set(changes) - {"name", "instructions", "model", "schedule", "enabled"}
    if unknown:
        raise ValidationFailed(f"not editable: {', '.join(sorted(unknown))}", code="not_editable")
    now = now or timezone.now()
    agent_id = agent.pk
    # Locked, and read again: a delete that won the race leaves nothing to update (404, not a 500).
    locked = (
        Agent.objects.select_for_update(of=("self",), no_key=True)
        .select_related("owner", "model")
        .filter(pk=agent_id)
        .first()
    )
    if locked is None:
        raise NotFound(_("Агент не найден."), code="agent_not_found")
    agent = locked
    was_open, old_schedule = agent.gates_open, agent.schedule
    if "name" in changes:
        agent.name = _clean_name(changes["name"])
    if "instructions" in changes:
        agent.instructions = changes["instructions"] or ""
    if "model" in changes:
        agent.model = _resolve_model(changes["model"]) if changes["model"] is not None else _resolve_model(None)
    if "schedule" in changes:
        agent.schedule = changes["schedule"] or None
    if "enabled" in changes:
        agent.enabled = bool(changes["enabled"])
    if not agent.gates_open or not agent.schedule:
        agent.next_run_at = None
    elif not was_open or agent.schedule != old_schedule or agent.next_run_at is None:
        agent.next_run_at = _compute_next_run(agent, now)
    agent.save(force_update=True)  # never an INSERT that would bring a deleted agent back
    return agent


@transaction.atomic
def agent_delete(*, agent: Agent) -> None:
    # One DELETE: the database cascades to agent_runs.
    Agent.objects.filter(pk=agent.pk).delete()


@transaction.atomic
def agent_set_admin_paused(*, agent_id: int, paused: bool, now: datetime | None = None, actor: Actor = None) -> Agent:
    """The admin's lock; the owner's ``enabled`` is never touched. Resuming recomputes the next slot.
    A change is an audit event (``actor``: the admin)."""
    now = now or timezone.now()
    agent = (
        Agent.objects.select_for_update(of=("self",), no_key=True)
        .select_related("owner", "model")
        .filter(pk=agent_id)
        .first()
    )
    if agent is None:
        raise NotFound(_("Агент не найден."), code="agent_not_found")
    if agent.admin_paused != paused:
        agent.admin_paused = paused
        agent.next_run_at = _compute_next_run(agent, now)
        agent.save(update_fields=["admin_paused", "next_run_at"])
        audit.audit_record(
            actor=actor if actor is not None else "system",
            action=audit.AGENT_ADMIN_PAUSED if paused else audit.AGENT_ADMIN_RESUMED,
            target=f"agent:{agent.pk}",
            details={"name": agent.name, "owner": agent.owner.get_username()},
        )
    return agent


def agents_set_admin_paused(*, agent_ids: Iterable[int], paused: bool, actor: Actor = None) -> int:
    """Bulk pause/resume (admin action); returns how many agents changed."""
    changed = 0
    for agent_id in agent_ids:
        agent = Agent.objects.filter(pk=agent_id).only("admin_paused").first()
        if agent is not None and agent.admin_paused != paused:
            agent_set_admin_paused(agent_id=agent_id, paused=paused, actor=actor)
            changed += 1
    return changed


@transaction.atomic
def agents_reschedule_calendar(*, owner: User, now: datetime | None = None) -> int:
    """The owner's zone changed: calendar slots (HH:MM local) move; interval slots do not."""
    return _reschedule_calendar(Agent.objects.filter(owner=owner), now=now)


@transaction.atomic
def agents_reschedule_for_org_timezone(*, timezone_name: str, now: datetime | None = None) -> int:
    """The organisation's zone changed: calendar slots of owners without a zone of their own move.

    The new zone is passed in: the cached platform settings still hold the old one until commit.
    """
    without_zone = Q(owner__timezone__isnull=True) | Q(owner__timezone="")
    return _reschedule_calendar(Agent.objects.filter(without_zone), now=now, tz=timezone_name)


def _reschedule_calendar(agents: QuerySet[Agent], *, now: datetime | None, tz: str | None = None) -> int:
    now = now or timezone.now()
    changed = 0
    agents = (
        agents.select_for_update(of=("self",), no_key=True)
        .select_related("owner")
        .filter(next_run_at__isnull=False, schedule__type="calendar")
    )
    for agent in agents:
        agent.next_run_at = _compute_next_run(agent, now, tz=tz)
        agent.save(update_fields=["next_run_at"])
        changed += 1
    return changed
