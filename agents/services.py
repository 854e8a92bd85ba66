"""Every write of the Agent Engine (AE-RUN, AE-GOV, AE-BUDGET, AE-SCHED).

Agents: ``agent_create`` / ``agent_update`` / ``agent_delete`` / ``agent_set_admin_paused``.
Runs: ``agent_run_request`` (manual), ``run_execute`` (the body of the Celery task),
``agent_runs_reap_stale``, ``agent_runs_redispatch`` and ``scheduler_tick`` (Beat jobs).

Time is always passed in from Python (``now``), never the database's ``now()``, so the tests'
time control moves every decision the same way.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from achilles.errors import Conflict, NotFound, PermissionDenied, ValidationFailed
from achilles.models import AgentModel, User
from achilles.platform import platform_settings
from achilles.services import default_chat_model
from agents import schedule as sched
from agents.choices import RunReason, RunState, RunTrigger
from agents.models import Agent, AgentRun
from agents.selectors import owner_over_budget

logger = logging.getLogger(__name__)

ACTIVE_CONSTRAINT = "agents_agentrun_one_active_per_agent"
TICK_BATCH_SIZE = 1000
# A queued run without a confirmed enqueue for this long is sent again (broker was down).
REDISPATCH_GRACE_SECONDS = 15


# --------------------------------------------------------------------------- agents

def _resolve_model(name: str | None) -> AgentModel:
    """A chat model from the allow-list; omitted → the list's default chat model."""
    if name is None:
        model = default_chat_model()
        if model is None:
            raise ValidationFailed("no default chat model is configured; name one in `model`", code="no_default_model")
        return model
    model = AgentModel.objects.filter(name=name).first()
    if model is None:
        raise ValidationFailed(f"model {name!r} is not on the allow-list", code="unknown_model")
    if model.kind != "chat":
        raise ValidationFailed(f"model {name!r} is an {model.kind} model, not a chat model", code="wrong_model_kind")
    return model


def _owner_tz(owner: User) -> str:
    return owner.timezone or platform_settings().timezone


def _compute_next_run(agent: Agent, now: datetime, previous: datetime | None = None) -> datetime | None:
    if not agent.gates_open or not agent.schedule:
        return None
    return sched.next_run_at(agent.schedule, _owner_tz(agent.owner), now=now, previous=previous)


def _clean_name(name: str) -> str:
    name = (name or "").strip()
    if not name:
        raise ValidationFailed("name must not be empty", code="name_empty")
    return name


@transaction.atomic
def agent_create(*, owner: User, name: str, instructions: str = "", model_name: str | None = None,
                 schedule: dict | None = None, enabled: bool = True, now: datetime | None = None,
                 first_run_at: datetime | None = None) -> Agent:
    """``first_run_at`` overrides the first slot (the demo agent runs a minute after start-up)."""
    now = now or timezone.now()
    agent = Agent(owner=owner, name=_clean_name(name), instructions=instructions, model=_resolve_model(model_name),
                  schedule=schedule or None, enabled=enabled)
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
        raise PermissionDenied("admin_paused is set by platform admins only", code="admin_only")
    unknown = set(changes) - {"name", "instructions", "model", "schedule", "enabled"}
    if unknown:
        raise ValidationFailed(f"not editable: {', '.join(sorted(unknown))}", code="not_editable")
    now = now or timezone.now()
    agent = Agent.objects.select_for_update(of=("self",), no_key=True).select_related("owner", "model").get(pk=agent.pk)
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
    agent.save()
    return agent


@transaction.atomic
def agent_delete(*, agent: Agent) -> None:
    # One DELETE: the database cascades to agent_runs.
    Agent.objects.filter(pk=agent.pk).delete()


@transaction.atomic
def agent_set_admin_paused(*, agent_id: int, paused: bool, now: datetime | None = None) -> Agent:
    """The admin's lock; the owner's ``enabled`` is never touched. Resuming recomputes the next slot."""
    now = now or timezone.now()
    agent = Agent.objects.select_for_update(of=("self",), no_key=True).select_related("owner", "model").filter(pk=agent_id).first()
    if agent is None:
        raise NotFound("agent not found", code="agent_not_found")
    if agent.admin_paused != paused:
        agent.admin_paused = paused
        agent.next_run_at = _compute_next_run(agent, now)
        agent.save(update_fields=["admin_paused", "next_run_at"])
    return agent


def agents_set_admin_paused(*, agent_ids: Iterable[int], paused: bool) -> int:
    """Bulk pause/resume (admin action); returns how many agents changed."""
    changed = 0
    for agent_id in agent_ids:
        agent = Agent.objects.filter(pk=agent_id).only("admin_paused").first()
        if agent is not None and agent.admin_paused != paused:
            agent_set_admin_paused(agent_id=agent_id, paused=paused)
            changed += 1
    return changed


# --------------------------------------------------------------------------- dispatch

def _send(run_id: int, producer=None) -> None:
    """Put one run on the broker (separate function so tests can capture it)."""
    from agents.tasks import agent_run_task

    # No publish retries: with the broker down the run stays queued and the tick re-sends it.
    agent_run_task.apply_async(args=[run_id], retry=False, producer=producer)


PUBLISH_CHUNK = 200


def runs_dispatch(run_ids: Iterable[int]) -> list[int]:
    """Enqueue runs and stamp ``enqueued_at``; failures are logged and left to the re-dispatcher.

    One producer for the whole list, and kombu's publish batch (a Redis pipeline) per chunk: a
    tick's thousand runs cost a few round trips instead of a thousand. A chunk whose flush fails
    is left unstamped, so the tick re-sends it (a duplicate delivery is harmless).
    """
    from agents.tasks import agent_run_task

    sent: list[int] = []
    run_ids = list(run_ids)
    if not run_ids:
        return sent
    try:
        with agent_run_task.app.producer_or_acquire() as producer:
            for start in range(0, len(run_ids), PUBLISH_CHUNK):
                chunk = run_ids[start:start + PUBLISH_CHUNK]
                try:
                    with producer.batch(max_size=4 * PUBLISH_CHUNK):
                        for run_id in chunk:
                            _send(run_id, producer)
                except Exception as exc:
                    logger.warning("%d agent run(s) not enqueued (%s); the scheduler tick will re-dispatch them",
                                   len(chunk), exc)
                    continue
                sent.extend(chunk)
    except Exception as exc:  # no broker connection at all
        logger.warning("agent runs not enqueued (%s); the scheduler tick will re-dispatch them", exc)
    if sent:
        AgentRun.objects.filter(pk__in=sent, state=RunState.QUEUED).update(enqueued_at=timezone.now())
    return sent


def _dispatch_on_commit(run_ids: list[int]) -> None:
    if run_ids:
        transaction.on_commit(lambda: runs_dispatch(run_ids))


# --------------------------------------------------------------------------- manual runs

def _gate_conflict(agent: Agent) -> Conflict | None:
    if agent.admin_paused:
        return Conflict("the agent is paused by a platform admin", code="agent_paused")
    if not agent.enabled:
        return Conflict("the agent is switched off", code="agent_disabled")
    if agent.model_id is None:
        return Conflict("the agent's model was removed from the allow-list; choose another", code="model_missing")
    return None


def agent_run_request(*, agent: Agent, now: datetime | None = None) -> AgentRun:
    """Queue a manual run (schedule not needed; gates and budget still apply).

    The partial UNIQUE decides a race with a scheduled slot or another click: the loser gets 409.
    """
    now = now or timezone.now()
    conflict = _gate_conflict(agent)
    if conflict is not None:
        raise conflict
    if owner_over_budget(owner=agent.owner, now=now):
        raise Conflict("the owner's weekly token budget is spent", code="budget_exceeded")
    try:
        with transaction.atomic():
            run = AgentRun.objects.create(agent=agent, trigger=RunTrigger.MANUAL, state=RunState.QUEUED)
            _dispatch_on_commit([run.pk])
    except IntegrityError as exc:
        if ACTIVE_CONSTRAINT in str(exc):
            raise Conflict("the agent already has a queued or running run", code="already_running") from exc
        if "agent_runs_agent_id_fk" in str(exc) or "foreign key" in str(exc).lower():
            raise NotFound("agent not found", code="agent_not_found") from exc
        raise
    return run


# --------------------------------------------------------------------------- execution

class RunAbandoned(Exception):
    """The run row left ``running`` under us (reaped as stale): stop working on it."""


def _finish(run_id: int, *, state: str, reason: str = "", output: str = "", error: str = "", tokens: int = 0) -> bool:
    # Only a run still ``running`` may finish: a zombie that was reaped keeps its ``stale`` verdict.
    return bool(AgentRun.objects.filter(pk=run_id, state=RunState.RUNNING).update(
        state=state, reason=reason, output=output, error=error[:4000], tokens_used=tokens, finished_at=timezone.now(),
        heartbeat_at=timezone.now()))


def run_execute(run_id: int) -> str | None:
    """The body of ``agent_run_task``: queued → running → succeeded | failed. Idempotent: a
    duplicate delivery finds the run no longer queued and does nothing. Returns the final state."""
    from achilles.llm.registry import get_chat_provider
    from agents.loop import IterationCapReached, LoopFailed, run_loop
    from agents.prompt import compose_messages, tool_specs
    from agents.tools import KnowledgeTools
    from knowledge.facade import Identity

    run = AgentRun.objects.select_related("agent__owner", "agent__model").filter(pk=run_id).first()
    if run is None or run.state != RunState.QUEUED:
        return None
    agent = run.agent
    now = timezone.now()
    if not agent.gates_open or not agent.owner.is_active:
        # A gate closed between the request and the start: refused, never started.
        AgentRun.objects.filter(pk=run_id, state=RunState.QUEUED).update(
            state=RunState.SKIPPED, reason=RunReason.GATE_CLOSED, finished_at=now)
        return RunState.SKIPPED
    claimed = AgentRun.objects.filter(pk=run_id, state=RunState.QUEUED).update(
        state=RunState.RUNNING, started_at=now, heartbeat_at=now)
    if not claimed:
        return None

    settings_row = platform_settings()

    def heartbeat(iteration: int, tokens: int) -> None:
        alive = AgentRun.objects.filter(pk=run_id, state=RunState.RUNNING).update(
            heartbeat_at=timezone.now(), tokens_used=tokens)
        if not alive:
            raise RunAbandoned(run_id)

    try:
        provider = get_chat_provider(agent.model.spec())
        tools = KnowledgeTools(Identity.for_user(agent.owner))
        result = run_loop(provider=provider,
                          messages=compose_messages(platform_prompt=settings_row.platform_prompt,
                                                    agent_instructions=agent.instructions),
                          tools=tool_specs(), call_tool=tools.call, cap=settings_row.agent_iteration_cap,
                          heartbeat=heartbeat)
    except RunAbandoned:
        logger.warning("agent run %s was reaped while running; its result is dropped", run_id)
        return None
    except IterationCapReached as exc:
        _finish(run_id, state=RunState.FAILED, reason=RunReason.ITERATION_CAP, error=str(exc), tokens=exc.tokens_used)
        return RunState.FAILED
    except LoopFailed as exc:
        if isinstance(exc.cause, RunAbandoned):
            return None
        _finish(run_id, state=RunState.FAILED, reason=RunReason.MODEL_ERROR, error=str(exc.cause), tokens=exc.tokens_used)
        return RunState.FAILED
    except Exception as exc:
        logger.exception("agent run %s failed", run_id)
        _finish(run_id, state=RunState.FAILED, reason=RunReason.ERROR, error=f"{type(exc).__name__}: {exc}")
        return RunState.FAILED
    _finish(run_id, state=RunState.SUCCEEDED, output=result.output, tokens=result.tokens_used)
    return RunState.SUCCEEDED


# --------------------------------------------------------------------------- periodic jobs

def agent_runs_reap_stale(*, now: datetime | None = None) -> int:
    """A running run whose heartbeat is older than ``agent_stale_after_seconds`` → failed/stale;
    this releases the single-flight lock, so the agent runs again."""
    now = now or timezone.now()
    cutoff = now - timedelta(seconds=platform_settings().agent_stale_after_seconds)
    reaped = AgentRun.objects.filter(state=RunState.RUNNING, heartbeat_at__lt=cutoff).update(
        state=RunState.FAILED, reason=RunReason.STALE, finished_at=now,
        error=f"no heartbeat since before {cutoff.isoformat()}; the worker died or hung")
    if reaped:
        logger.warning("reaped %d stale agent run(s)", reaped)
    return reaped


def agent_runs_redispatch(*, now: datetime | None = None, grace_seconds: int = REDISPATCH_GRACE_SECONDS) -> list[int]:
    """Queued runs whose enqueue never succeeded (broker down) or whose message was lost are sent
    again; a duplicate delivery is harmless (``run_execute`` claims only a queued run)."""
    now = now or timezone.now()
    lost_after = now - timedelta(seconds=max(platform_settings().agent_stale_after_seconds, grace_seconds))
    from django.db.models import Q

    ids = list(AgentRun.objects.filter(state=RunState.QUEUED)
               .filter(Q(enqueued_at__isnull=True, created_at__lt=now - timedelta(seconds=grace_seconds))
                       | Q(enqueued_at__lt=lost_after))
               .order_by("id").values_list("id", flat=True)[:TICK_BATCH_SIZE])
    return runs_dispatch(ids) if ids else []


@dataclass
class TickResult:
    queued: list[int]
    skipped_already_running: int = 0
    skipped_budget: int = 0
    redispatched: int = 0

    @property
    def claimed(self) -> int:
        return len(self.queued) + self.skipped_already_running + self.skipped_budget


# NO KEY UPDATE, not UPDATE: a concurrent manual run's INSERT takes KEY SHARE on the agent row
# (its FK check); with FOR UPDATE the two would deadlock on the partial UNIQUE.
_CLAIM_SQL = """
SELECT a.id, a.owner_id, a.schedule, a.next_run_at, u.timezone
FROM agents a JOIN users u ON u.id = a.owner_id
WHERE a.next_run_at <= %s
ORDER BY a.next_run_at
LIMIT %s
FOR NO KEY UPDATE OF a SKIP LOCKED
"""

_BUDGET_SQL = """
SELECT o.owner_id, COALESCE(SUM(r.tokens_used), 0)
FROM unnest(%s::bigint[], %s::timestamptz[], %s::timestamptz[]) AS o(owner_id, week_start, week_end)
JOIN agents a ON a.owner_id = o.owner_id
JOIN agent_runs r ON r.agent_id = a.id AND r.finished_at >= o.week_start AND r.finished_at < o.week_end
GROUP BY o.owner_id
"""

_INSERT_QUEUED_SQL = """
INSERT INTO agent_runs (agent_id, trigger, state, reason, output, error, tokens_used, scheduled_for)
SELECT v.agent_id, 'scheduled', 'queued', '', '', '', 0, v.slot
FROM unnest(%s::bigint[], %s::timestamptz[]) AS v(agent_id, slot)
ON CONFLICT (agent_id) WHERE state IN ('queued', 'running') DO NOTHING
RETURNING id, agent_id
"""

_INSERT_SKIPPED_SQL = """
INSERT INTO agent_runs (agent_id, trigger, state, reason, output, error, tokens_used, scheduled_for, finished_at)
SELECT v.agent_id, 'scheduled', 'skipped', v.reason, '', '', 0, v.slot, %s
FROM unnest(%s::bigint[], %s::text[], %s::timestamptz[]) AS v(agent_id, reason, slot)
"""

_ADVANCE_SQL = """
UPDATE agents SET next_run_at = v.next_run_at
FROM unnest(%s::bigint[], %s::timestamptz[]) AS v(id, next_run_at)
WHERE agents.id = v.id
"""


def _tick_batch(now: datetime, batch_size: int, result: TickResult) -> int:
    """One transaction: claim due agents (SKIP LOCKED), write their runs, advance their slots."""
    org_tz = platform_settings().timezone
    budget = platform_settings().weekly_token_budget
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(_CLAIM_SQL, [now, batch_size])
        rows = cursor.fetchall()
        if not rows:
            return 0
        owner_tz: dict[int, str] = {owner_id: tz or org_tz for _, owner_id, _, _, tz in rows}
        weeks = {owner_id: sched.week_bounds(tz, now) for owner_id, tz in owner_tz.items()}
        owners = list(weeks)
        cursor.execute(_BUDGET_SQL, [owners, [weeks[o][0] for o in owners], [weeks[o][1] for o in owners]])
        spent = dict(cursor.fetchall())
        over_budget = {owner for owner in owners if spent.get(owner, 0) >= budget}

        runnable = [(agent_id, slot) for agent_id, owner_id, _, slot, _ in rows if owner_id not in over_budget]
        queued_ids: list[int] = []
        queued_agents: set[int] = set()
        if runnable:
            cursor.execute(_INSERT_QUEUED_SQL, [[a for a, _ in runnable], [s for _, s in runnable]])
            for run_id, agent_id in cursor.fetchall():
                queued_ids.append(run_id)
                queued_agents.add(agent_id)
        skipped = [(agent_id, RunReason.BUDGET_EXCEEDED.value, slot)
                   for agent_id, owner_id, _, slot, _ in rows if owner_id in over_budget]
        skipped += [(agent_id, RunReason.ALREADY_RUNNING.value, slot)
                    for agent_id, slot in runnable if agent_id not in queued_agents]
        if skipped:
            cursor.execute(_INSERT_SKIPPED_SQL, [now, [s[0] for s in skipped], [s[1] for s in skipped],
                                                 [s[2] for s in skipped]])
        # Django's psycopg loaders hand jsonb over as text.
        next_slots = [sched.next_run_at(json.loads(schedule) if isinstance(schedule, str) else schedule,
                                        owner_tz[owner_id], now=now, previous=slot)
                      for _, owner_id, schedule, slot, _ in rows]
        cursor.execute(_ADVANCE_SQL, [[r[0] for r in rows], next_slots])
        _dispatch_on_commit(queued_ids)
    result.queued.extend(queued_ids)
    result.skipped_budget += sum(1 for s in skipped if s[1] == RunReason.BUDGET_EXCEEDED)
    result.skipped_already_running += sum(1 for s in skipped if s[1] == RunReason.ALREADY_RUNNING)
    return len(rows)


def scheduler_tick(*, now: datetime | None = None, batch_size: int = TICK_BATCH_SIZE,
                   redispatch: bool = True) -> TickResult:
    """The Beat job: every due agent gets a ``scheduled`` run (or a ``skipped`` row saying why),
    its ``next_run_at`` moves to the next slot, and queued runs are enqueued after commit.
    Closed gates are not here at all: their ``next_run_at`` is NULL, so nothing piles up."""
    now = now or timezone.now()
    result = TickResult(queued=[])
    while _tick_batch(now, batch_size, result) == batch_size:
        pass
    if redispatch:
        result.redispatched = len(agent_runs_redispatch(now=now))
    return result
