"""Reads of the Agent Engine, with the permission built in (``agent_get_for_owner`` → 404)."""

from __future__ import annotations

from datetime import datetime

from django.db.models import QuerySet, Sum

from achilles.errors import NotFound
from achilles.models import User
from achilles.platform import platform_settings
from agents.choices import ACTIVE_STATES
from agents.models import Agent, AgentRun
from agents.schedule import week_bounds


def agent_get_for_owner(*, agent_id: int, user: User, for_update: bool = False) -> Agent:
    """The caller's own agent; unknown and foreign agents alike are 404 (existence never revealed)."""
    qs = Agent.objects.select_related("model", "owner")
    if for_update:
        qs = qs.select_for_update(of=("self",), no_key=True)
    agent = qs.filter(pk=agent_id, owner=user).first()
    if agent is None:
        raise NotFound("agent not found", code="agent_not_found")
    return agent


def agent_list_for_owner(*, user: User) -> QuerySet[Agent]:
    return Agent.objects.select_related("model", "owner").filter(owner=user).order_by("id")


def agent_list_for_admin(*, owner: str | None = None, enabled: bool | None = None,
                         admin_paused: bool | None = None) -> QuerySet[Agent]:
    qs = Agent.objects.select_related("model", "owner").order_by("id")
    if owner:
        qs = qs.filter(owner__username=owner)
    if enabled is not None:
        qs = qs.filter(enabled=enabled)
    if admin_paused is not None:
        qs = qs.filter(admin_paused=admin_paused)
    return qs


def active_run_states(agent_ids: list[int]) -> dict[int, str]:
    """agent id → state of its one queued/running run, if any."""
    rows = AgentRun.objects.filter(agent_id__in=agent_ids, state__in=ACTIVE_STATES).values_list("agent_id", "state")
    return dict(rows)


def agent_runs_list(*, agent: Agent, limit: int = 50, before_id: int | None = None) -> list[AgentRun]:
    qs = AgentRun.objects.filter(agent=agent).order_by("-id")
    if before_id is not None:
        qs = qs.filter(id__lt=before_id)
    return list(qs[:limit])


def owner_tokens_this_week(*, owner: User, now: datetime) -> int:
    """SUM(tokens_used) of every run of every agent of ``owner`` finished in the owner's current week."""
    start, end = week_bounds(owner.effective_timezone(), now)
    total = (AgentRun.objects.filter(agent__owner=owner, finished_at__gte=start, finished_at__lt=end)
             .aggregate(total=Sum("tokens_used"))["total"])
    return int(total or 0)


def budget_room(*, spent: int, active: int, budget: int, run_cap: int) -> int:
    """The one budget rule: how many more runs an owner may start this week. Each queued or
    running run reserves the per-run token cap, so a start needs spend + reservations < budget
    (0 → over budget). The manual start and the scheduler tick both decide with it."""
    return max(0, -(-(budget - spent - run_cap * active) // run_cap))


def owner_over_budget(*, owner: User, now: datetime) -> bool:
    """No room for one more run: the week's spend plus a reservation of the per-run token cap for
    each queued/running run reaches the budget. Decided under the owner's budget lock
    (``agents.services.runs.owner_budget_lock``), so concurrent starts cannot all see room."""
    row = platform_settings()
    active = AgentRun.objects.filter(agent__owner=owner, state__in=ACTIVE_STATES).count()
    return budget_room(spent=owner_tokens_this_week(owner=owner, now=now), active=active,
                       budget=row.weekly_token_budget, run_cap=row.agent_run_token_cap) == 0
