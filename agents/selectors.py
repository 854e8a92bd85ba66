"""Reads of the Agent Engine, with the permission built in (``agent_get_for_owner`` → 404)."""

from __future__ import annotations

from datetime import datetime

from django.db.models import Count, Q, QuerySet, Sum
from django.utils.translation import gettext as _

from achilles.errors import NotFound
from achilles.models import User
from achilles.pagination import DEFAULT_LIMIT, Window, keyset_page
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
        raise NotFound(_("Агент не найден."), code="agent_not_found")
    return agent


def agent_list_for_owner(*, user: User) -> QuerySet[Agent]:
    return Agent.objects.select_related("model", "owner").filter(owner=user).order_by("id")


def agent_page_for_owner(*, user: User, cursor: str | None = None, limit: int = DEFAULT_LIMIT) -> Window[Agent]:
    """The owner's agents, oldest first; keyset on id."""
    return keyset_page(agent_list_for_owner(user=user), scope="agents", keys=("id",), cursor=cursor, limit=limit)


def agent_list_for_admin(
    *, owner: str | None = None, enabled: bool | None = None, admin_paused: bool | None = None
) -> QuerySet[Agent]:
    qs = Agent.objects.select_related("model", "owner").order_by("id")
    if owner:
        qs = qs.filter(owner__username=owner)
    if enabled is not None:
        qs = qs.filter(enabled=enabled)
    if admin_paused is not None:
        qs = qs.filter(admin_paused=admin_paused)
    return qs


def agent_page_for_admin(
    *,
    owner: str | None = None,
    enabled: bool | None = None,
    admin_paused: bool | None = None,
    cursor: str | None = None,
    limit: int = DEFAULT_LIMIT,
) -> Window[Agent]:
    """The admin registry: every owner's agents matching the filters, oldest first; keyset on id."""
    qs = agent_list_for_admin(owner=owner, enabled=enabled, admin_paused=admin_paused)
    return keyset_page(qs, scope="admin-agents", keys=("id",), cursor=cursor, limit=limit)


def active_run_states(agent_ids: list[int]) -> dict[int, str]:
    """agent id → state of its one queued/running run, if any."""
    rows = AgentRun.objects.filter(agent_id__in=agent_ids, state__in=ACTIVE_STATES).values_list("agent_id", "state")
    return dict(rows)


def agent_runs_page(*, agent: Agent, cursor: str | None = None, limit: int = DEFAULT_LIMIT) -> Window[AgentRun]:
    """The agent's runs, newest first; keyset on id."""
    return keyset_page(
        AgentRun.objects.filter(agent=agent).prefetch_related("events"),
        scope="runs",
        keys=("-id",),
        cursor=cursor,
        limit=limit,
    )


def owner_tokens_this_week(*, owner: User, now: datetime) -> int:
    """SUM(tokens_used) of every run of every agent of ``owner`` finished in the owner's current week."""
    start, end = week_bounds(owner.effective_timezone(), now)
    total = AgentRun.objects.filter(agent__owner=owner, finished_at__gte=start, finished_at__lt=end).aggregate(
        total=Sum("tokens_used")
    )["total"]
    return int(total or 0)


def owners_tokens_this_week(*, owners: list[User], now: datetime) -> dict[int, int]:
    """:func:`owner_tokens_this_week` for many owners in one query (each in their own week)."""
    weeks: dict[tuple[datetime, datetime], list[int]] = {}
    for owner in {o.pk: o for o in owners}.values():
        weeks.setdefault(week_bounds(owner.effective_timezone(), now), []).append(owner.pk)
    if not weeks:
        return {}
    in_week = Q(pk__in=[])
    for (start, end), ids in weeks.items():
        in_week |= Q(agent__owner_id__in=ids, finished_at__gte=start, finished_at__lt=end)
    spent = dict(
        AgentRun.objects.filter(in_week)
        .values("agent__owner_id")
        .annotate(total=Sum("tokens_used"))
        .values_list("agent__owner_id", "total")
    )
    return {pk: int(spent.get(pk) or 0) for group in weeks.values() for pk in group}


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
    return (
        budget_room(
            spent=owner_tokens_this_week(owner=owner, now=now),
            active=active,
            budget=row.weekly_token_budget,
            run_cap=row.agent_run_token_cap,
        )
        == 0
    )


def owners_over_budget(*, owners: list[User], now: datetime) -> dict[int, bool]:
    """:func:`owner_over_budget` for many owners in two queries (a list page names many owners)."""
    if not owners:
        return {}
    row = platform_settings()
    spent = owners_tokens_this_week(owners=owners, now=now)
    ids = list(spent)
    active = dict(
        AgentRun.objects.filter(agent__owner_id__in=ids, state__in=ACTIVE_STATES)
        .values("agent__owner_id")
        .annotate(n=Count("id"))
        .values_list("agent__owner_id", "n")
    )
    return {
        pk: budget_room(
            spent=int(spent.get(pk) or 0),
            active=active.get(pk, 0),
            budget=row.weekly_token_budget,
            run_cap=row.agent_run_token_cap,
        )
        == 0
        for pk in ids
    }


def agent_run_blocker(*, agent: Agent, active_state: str | None, over_budget: bool) -> str | None:
    """Why a run of ``agent`` cannot start now — the code ``POST /run`` would answer with, checked
    in the same order (gates, budget, an active run) — or None when it can."""
    if agent.admin_paused:
        return "agent_paused"
    if not agent.enabled:
        return "agent_disabled"
    if agent.model_id is None:
        return "model_missing"
    if over_budget:
        return "budget_exceeded"
    if active_state in ACTIVE_STATES:
        return "already_running"
    return None
