"""Agents woken by hub events: subscriptions, the debounced record of matching changes, and the
start of ``event`` runs under every rule a run has.

- **Match** (``agent_events_record``, inside the mirror upload's transaction): a change wakes an agent
  when one of its subscriptions names the change's kind and every filter it sets holds (project, issue
  type, status after the change, a label), the agent's gates are open, and its owner may read the
  issue now (``hub.use_hub`` and the hub's project ACL, the same rule as the owner's own reads).
- **Debounce**: one pending row per agent and issue (the partial UNIQUE ``agents_event_one_pending_per_issue``);
  each further change merges into it (``changes`` keep the first «before» and the last «after»,
  ``hits`` counts them) and moves ``fire_at`` to now + the subscription's ``debounce_seconds``.
- **Start** (``agent_events_fire``, each scheduler tick): the agent's due rows become one run with
  ``trigger=event``. Single flight: while the agent has a queued or running run the rows stay pending
  and are **coalesced into the next run** once it ends (no event is dropped, no ``skipped`` row). The
  weekly budget and the gates are checked as for a manual run; refused, the rows are attached to a
  ``skipped`` run saying why (``budget_exceeded`` / ``gate_closed``).
"""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime, timedelta
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from achilles import hooks
from achilles.errors import Conflict, NotFound
from achilles.identity import principals_for
from agents.choices import JiraEventKind, RunReason, RunState, RunTrigger
from agents.models import Agent, AgentEvent, AgentRun, AgentSubscription
from agents.selectors import owner_over_budget
from agents.services import dispatch
from agents.services.runs import ACTIVE_CONSTRAINT, owner_budget_lock

HUB_PERMISSION = "hub.use_hub"
# An agent's subscriptions are one unpaged list (the API and the agents page): bounded here.
MAX_SUBSCRIPTIONS_PER_AGENT = 20


def agent_subscription_create(
    *,
    agent: Agent,
    events: list[str],
    project: str = "",
    issue_type: str = "",
    status: str = "",
    label: str = "",
    debounce_seconds: int = 60,
) -> AgentSubscription:
    """Subscribe ``agent`` to hub events (the caller has checked it owns the agent); 409
    ``subscription_limit`` beyond MAX_SUBSCRIPTIONS_PER_AGENT (the agent's row locked, so two
    concurrent creates cannot both take the last place)."""
    with transaction.atomic():
        Agent.objects.select_for_update(no_key=True).filter(pk=agent.pk).exists()
        if AgentSubscription.objects.filter(agent=agent).count() >= MAX_SUBSCRIPTIONS_PER_AGENT:
            raise Conflict(
                _("У агента может быть не больше %(n)s подписок.") % {"n": MAX_SUBSCRIPTIONS_PER_AGENT},
                code="subscription_limit",
            )
        return _subscription_create(
            agent=agent,
            events=events,
            project=project,
            issue_type=issue_type,
            status=status,
            label=label,
            debounce_seconds=debounce_seconds,
        )


def _subscription_create(
    *, agent: Agent, events: list[str], project: str, issue_type: str, status: str, label: str, debounce_seconds: int
) -> AgentSubscription:
    return AgentSubscription.objects.create(
        agent=agent,
        events=sorted(set(events)),
        project=project.strip().upper(),
        issue_type=issue_type.strip(),
        status=status.strip(),
        label=label.strip(),
        debounce_seconds=debounce_seconds,
    )


def agent_subscription_delete(*, agent: Agent, subscription_id: int) -> None:
    deleted, _kinds = AgentSubscription.objects.filter(agent=agent, pk=subscription_id).delete()
    if not deleted:
        raise NotFound(_("Подписка не найдена."), code="subscription_not_found")


def _matches(sub: AgentSubscription, change: hooks.JiraIssueChange) -> bool:
    return (
        change.kind in sub.events
        and (not sub.project or sub.project == change.project.upper())
        and (not sub.issue_type or sub.issue_type.casefold() == change.issue_type.casefold())
        and (not sub.status or sub.status.casefold() == change.status.casefold())
        and (not sub.label or sub.label.casefold() in {label.casefold() for label in change.labels})
    )


def _merge(changes: dict[str, Any], more: dict[str, Any]) -> dict[str, Any]:
    """Over a burst: each field keeps its first «before» and takes the latest «after»."""
    merged = dict(changes)
    for field, (old, new) in more.items():
        merged[field] = [merged[field][0], new] if field in merged else [old, new]
    return merged


def agent_events_record(*, event: hooks.JiraIssuesChanged, now: datetime | None = None) -> int:
    """Record the changes the subscriptions match (``hooks.jira_issues_changed``); returns how many."""
    now = now or timezone.now()
    projects = {c.project.upper() for c in event.changes}
    subs = list(
        AgentSubscription.objects.select_related("agent__owner")
        .filter(
            agent__enabled=True,
            agent__admin_paused=False,
            agent__model__isnull=False,
            agent__owner__is_active=True,
            project__in=[*projects, ""],
        )
        .order_by("agent_id", "id")
    )
    if not subs:
        return 0
    principals: dict[int, set[str]] = {}
    hub_users: dict[int, bool] = {}
    recorded = 0
    for change in event.changes:
        woken: set[int] = set()
        for sub in subs:
            agent = sub.agent
            if agent.pk in woken or not _matches(sub, change):
                continue
            owner = agent.owner
            if owner.pk not in hub_users:
                hub_users[owner.pk] = owner.has_perm(HUB_PERMISSION)
                principals[owner.pk] = set(principals_for(owner))
            if not hub_users[owner.pk] or not principals[owner.pk] & set(change.readers):
                continue  # the owner may not read this issue: the agent never hears of it
            woken.add(agent.pk)
            _pending_merge(agent=agent, sub=sub, change=change, now=now)
            recorded += 1
    return recorded


def _pending_merge(*, agent: Agent, sub: AgentSubscription, change: hooks.JiraIssueChange, now: datetime) -> None:
    fire_at = now + timedelta(seconds=sub.debounce_seconds)
    for _attempt in range(2):
        pending = (
            AgentEvent.objects.select_for_update().filter(agent=agent, issue_key=change.key, run__isnull=True).first()
        )
        if pending is not None:
            AgentEvent.objects.filter(pk=pending.pk).update(
                kinds=sorted({*pending.kinds, change.kind}),
                changes=_merge(pending.changes, change.changes),
                hits=pending.hits + 1,
                fire_at=max(fire_at, pending.fire_at),
            )
            return
        try:
            with transaction.atomic():  # a racing upload's row wins the UNIQUE: merge into it instead
                AgentEvent.objects.create(
                    agent=agent,
                    subscription=sub,
                    issue_key=change.key,
                    kinds=[change.kind],
                    changes=change.changes,
                    fire_at=fire_at,
                )
            return
        except IntegrityError:
            continue


def on_jira_issues_changed(event: hooks.JiraIssuesChanged) -> None:
    agent_events_record(event=event)


def agent_events_fire(*, now: datetime | None = None) -> list[int]:
    """Start one ``event`` run per agent whose pending events are due; returns the queued run ids."""
    now = now or timezone.now()
    queued: list[int] = []
    with transaction.atomic():
        due = list(
            AgentEvent.objects.select_for_update(skip_locked=True, of=("self",))
            .filter(run__isnull=True, fire_at__lte=now)
            .order_by("agent_id", "id")
        )
        by_agent: dict[int, list[AgentEvent]] = defaultdict(list)
        for ev in due:
            by_agent[ev.agent_id].append(ev)
        agents = Agent.objects.select_related("owner").in_bulk(list(by_agent))
        owner_budget_lock(owner_ids=[a.owner_id for a in agents.values()])
        for agent_id, events in by_agent.items():
            agent = agents.get(agent_id)
            if agent is None:
                continue
            run = _event_run(agent=agent, now=now)
            if run is None:
                continue  # an active run: coalesced into the next one
            AgentEvent.objects.filter(pk__in=[e.pk for e in events]).update(run=run)
            if run.state == RunState.QUEUED:
                queued.append(run.pk)
        dispatch.dispatch_on_commit(queued)
    return queued


def _event_run(*, agent: Agent, now: datetime) -> AgentRun | None:
    def skipped(reason: str) -> AgentRun:
        return AgentRun.objects.create(
            agent=agent, trigger=RunTrigger.EVENT, state=RunState.SKIPPED, reason=reason, finished_at=now
        )

    if not agent.gates_open or not agent.owner.is_active:
        return skipped(RunReason.GATE_CLOSED)
    if AgentRun.objects.filter(agent=agent, state__in=(RunState.QUEUED, RunState.RUNNING)).exists():
        return None
    if owner_over_budget(owner=agent.owner, now=now):
        return skipped(RunReason.BUDGET_EXCEEDED)
    try:
        with transaction.atomic():
            return AgentRun.objects.create(agent=agent, trigger=RunTrigger.EVENT, state=RunState.QUEUED)
    except IntegrityError as exc:
        if ACTIVE_CONSTRAINT in str(exc):  # a manual run or a slot won the race: next time
            return None
        raise


def event_brief(events: list[AgentEvent]) -> str:
    """What woke the run, for the agent's task (appended to its instructions)."""
    lines = ["Запуск по событию Jira:"]
    for ev in events:
        what = ", ".join(f"{field}: {old or '—'} → {new or '—'}" for field, (old, new) in sorted(ev.changes.items()))
        kinds = "/".join(JiraEventKind(k).label for k in ev.kinds)
        lines.append(
            f"- {ev.issue_key} ({kinds}{', ' + str(ev.hits) + ' изменений' if ev.hits > 1 else ''})"
            + (f": {what}" if what else "")
        )
    return "\n".join(lines)
