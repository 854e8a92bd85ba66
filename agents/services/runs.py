"""Run lifecycle: the manual request, the execution (the Celery task's body), the stale reaper
and the re-dispatcher of runs whose enqueue was lost."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable
from datetime import datetime, timedelta

from django.db import IntegrityError, connection, transaction
from django.db.models import Q, QuerySet
from django.utils import timezone
from django.utils.translation import gettext as _

from achilles.errors import Conflict, NotFound
from achilles.health import worker_known_dead
from achilles.llm import get_chat_provider
from achilles.notifications import notify_on_commit
from achilles.platform import platform_settings
from agents.choices import RunReason, RunState, RunTrigger
from agents.loop import IterationCapReached, LoopFailed, TokenCapReached, run_loop
from agents.models import Agent, AgentRun
from agents.pages import RUN_REASON_RU
from agents.prompt import compose_messages, tool_specs
from agents.selectors import owner_over_budget, owner_tokens_this_week
from agents.services import dispatch
from agents.tools import KnowledgeTools
from knowledge.facade import Identity

logger = logging.getLogger(__name__)

ACTIVE_CONSTRAINT = "agents_agentrun_one_active_per_agent"
# A queued run without a confirmed enqueue for this long is sent again (broker was down).
REDISPATCH_GRACE_SECONDS = 15
REDISPATCH_BATCH = 1000


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
    try:
        with transaction.atomic():
            # The agent row first, FOR KEY SHARE (the lock the run's FK check takes anyway, so the
            # scheduler's NO KEY UPDATE is not blocked): a DELETE that committed after the caller
            # read the agent is seen here (404) instead of by the trigger copying the owner (a NULL,
            # NotNullViolation, a 500); one still running waits for this run and cascades to it.
            if not _agent_key_share(agent.pk):
                raise NotFound(_("Агент не найден."), code="agent_not_found")
            # Check and reserve as one step per owner: concurrent starts queue on the lock, and
            # each sees the runs the others queued (a reservation of one run's cap each).
            owner_budget_lock(owner_ids=[agent.owner_id])
            if owner_over_budget(owner=agent.owner, now=now):
                raise Conflict(_("Недельный бюджет токенов владельца исчерпан."), code="budget_exceeded")
            run = AgentRun.objects.create(agent=agent, trigger=RunTrigger.MANUAL, state=RunState.QUEUED)
            dispatch.dispatch_on_commit([run.pk])
    except IntegrityError as exc:
        if ACTIVE_CONSTRAINT in str(exc):
            raise Conflict(_("У агента уже есть запуск в очереди или в работе."), code="already_running") from exc
        if "agent_runs_agent_id_fk" in str(exc) or "foreign key" in str(exc).lower():
            raise NotFound(_("Агент не найден."), code="agent_not_found") from exc
        raise
    return run


def _agent_key_share(agent_id: int) -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM agents WHERE id = %s FOR KEY SHARE", [agent_id])
        return cursor.fetchone() is not None


# pg_advisory_xact_lock(key, owner_id): the budget lock's namespace (any constant of our own).
BUDGET_LOCK_KEY = 0x41474E54  # "AGNT"
BUDGET_LOCK_SQL = "SELECT pg_advisory_xact_lock(%s, o::int) FROM unnest(%s::bigint[]) AS o ORDER BY o"


def owner_budget_lock(*, owner_ids: Iterable[int]) -> None:
    """Take the owners' budget locks until the transaction ends (in id order: no deadlock between
    a manual start and a scheduler batch that both lock several)."""
    ids = sorted(set(owner_ids))
    if ids:
        with connection.cursor() as cursor:
            cursor.execute(BUDGET_LOCK_SQL, [BUDGET_LOCK_KEY, ids])


class RunAbandoned(Exception):
    """The run row left ``running`` under us (reaped as stale): stop working on it."""


def _finish(
    run_id: int,
    *,
    state: str,
    reason: str = "",
    output: str = "",
    error: str = "",
    tokens: int = 0,
    input_tokens: int | None = None,
    sources: list[dict] | None = None,
) -> bool:
    # Only a run still ``running`` may finish: a zombie that was reaped keeps its ``stale`` verdict.
    # The split is stored when the rounds reported it and it fits the total (the rest is output).
    split = input_tokens is not None and 0 <= input_tokens <= tokens
    finished = bool(
        AgentRun.objects.filter(pk=run_id, state=RunState.RUNNING).update(
            state=state,
            reason=reason,
            output=output,
            sources=sources or None,
            error=error[:4000],
            tokens_used=tokens,
            input_tokens=input_tokens if split else None,
            output_tokens=tokens - input_tokens if split and input_tokens is not None else None,
            finished_at=timezone.now(),
            heartbeat_at=timezone.now(),
        )
    )
    if finished:
        _notify_owner(run_id, state=state, reason=reason)
    if finished and tokens > 0:
        # a cycle: agents.services.alerts takes the owner's budget lock from this module
        from agents.services.alerts import owner_budget_alerts_check  # noqa: PLC0415

        owner_budget_alerts_check(run_id=run_id)
    return finished


def _instructions_for(run: AgentRun, agent: Agent) -> str:
    """The agent's task; an ``event`` run adds what woke it (the issues and what changed)."""
    if run.trigger != RunTrigger.EVENT:
        return agent.instructions
    # a cycle: agents.services.events imports this module's budget lock
    from agents.services.events import event_brief  # noqa: PLC0415

    return f"{agent.instructions.strip()}\n\n{event_brief(list(run.events.order_by('id')))}"


def _notify_owner(run_id: int, *, state: str, reason: str) -> None:
    """The owner's notice that their run ended (written after commit: achilles.notifications)."""
    row = AgentRun.objects.filter(pk=run_id).values("agent__name", "agent__owner_id").first()
    if row is None:
        return
    name = row["agent__name"]
    if state == RunState.SUCCEEDED:
        title, body = f"Агент «{name}» закончил работу", "Запуск выполнен: результат — в истории запусков."
    else:
        title, body = (
            f"Агент «{name}»: запуск не удался",
            f"Причина: {RUN_REASON_RU.get(reason, reason)}." if reason else "",
        )
    notify_on_commit(user_id=row["agent__owner_id"], kind="agent_run", title=title, body=body, link="/agents/")


def run_execute(run_id: int, *, worker: str = "") -> str | None:
    """The body of ``agent_run_task``: queued → running → succeeded | failed. Idempotent: a
    duplicate delivery finds the run no longer queued and does nothing. ``worker`` (the Celery
    worker's hostname) is stored with the claim, so the reaper can tell when it died.
    Returns the final state."""
    run = AgentRun.objects.select_related("agent__owner", "agent__model").filter(pk=run_id).first()
    if run is None or run.state != RunState.QUEUED:
        return None
    agent = run.agent
    model = agent.model
    now = timezone.now()
    # (an open gate implies a model: the second test only tells the type checker)
    if not agent.gates_open or model is None or not agent.owner.is_active:
        # A gate closed between the request and the start: refused, never started.
        AgentRun.objects.filter(pk=run_id, state=RunState.QUEUED).update(
            state=RunState.SKIPPED, reason=RunReason.GATE_CLOSED, finished_at=now
        )
        return RunState.SKIPPED
    budget = platform_settings().weekly_token_budget
    if owner_tokens_this_week(owner=agent.owner, now=now) >= budget:
        # The budget was spent while this run waited in the queue (other runs of the owner
        # finished): refused at the start as the scheduler would have refused the slot.
        AgentRun.objects.filter(pk=run_id, state=RunState.QUEUED).update(
            state=RunState.SKIPPED, reason=RunReason.BUDGET_EXCEEDED, tokens_used=0, finished_at=now
        )
        return RunState.SKIPPED
    claimed = AgentRun.objects.filter(pk=run_id, state=RunState.QUEUED).update(
        state=RunState.RUNNING, started_at=now, heartbeat_at=now, worker=worker[:255], model=model.name
    )
    if not claimed:
        return None

    settings_row = platform_settings()

    def heartbeat(iteration: int, tokens: int) -> None:
        alive = AgentRun.objects.filter(pk=run_id, state=RunState.RUNNING).update(
            heartbeat_at=timezone.now(), tokens_used=tokens
        )
        if not alive:
            raise RunAbandoned(run_id)

    try:
        provider = get_chat_provider(model.spec())
        tools = KnowledgeTools(Identity.for_user(agent.owner))
        # An empty base is not a readiness gate: the run starts, without the knowledge tools.
        knowledge_empty = bool(tools.ks.is_empty())
        with Pulse(run_id, every=max(0.5, settings_row.agent_stale_after_seconds / 3)):
            result = run_loop(
                provider=provider,
                messages=compose_messages(
                    platform_prompt=settings_row.platform_prompt,
                    agent_instructions=_instructions_for(run, agent),
                    knowledge_empty=knowledge_empty,
                ),
                tools=tool_specs(knowledge_empty=knowledge_empty),
                call_tool=tools.call,
                cap=settings_row.agent_iteration_cap,
                token_cap=settings_row.agent_run_token_cap,
                heartbeat=heartbeat,
            )
    except RunAbandoned:
        logger.warning("agent run %s was reaped while running; its result is dropped", run_id)
        return None
    except IterationCapReached as exc:
        _finish(
            run_id,
            state=RunState.FAILED,
            reason=RunReason.ITERATION_CAP,
            error=str(exc),
            tokens=exc.tokens_used,
            input_tokens=exc.input_tokens,
        )
        return RunState.FAILED
    except TokenCapReached as exc:
        _finish(
            run_id,
            state=RunState.FAILED,
            reason=RunReason.TOKEN_CAP,
            error=str(exc),
            tokens=exc.tokens_used,
            input_tokens=exc.input_tokens,
        )
        return RunState.FAILED
    except LoopFailed as exc:
        if isinstance(exc.cause, RunAbandoned):
            return None
        _finish(
            run_id,
            state=RunState.FAILED,
            reason=RunReason.MODEL_ERROR,
            error=str(exc.cause),
            tokens=exc.tokens_used,
            input_tokens=exc.input_tokens,
        )
        return RunState.FAILED
    except Exception as exc:
        logger.exception("agent run %s failed", run_id)
        _finish(run_id, state=RunState.FAILED, reason=RunReason.ERROR, error=f"{type(exc).__name__}: {exc}")
        return RunState.FAILED
    _finish(
        run_id,
        state=RunState.SUCCEEDED,
        output=result.output,
        tokens=result.tokens_used,
        input_tokens=result.input_tokens,
        sources=tools.cited(result.output),
    )
    return RunState.SUCCEEDED


class Pulse:
    """Keeps a running run's ``heartbeat_at`` fresh from a side thread while the worker process
    lives. The loop's heartbeat comes once per iteration, so a single model call longer than
    ``agent_stale_after_seconds`` used to look like a dead worker and got reaped mid-call. A killed
    worker takes the thread with it, so the reaper still finds it; a reaped run stops the pulse."""

    def __init__(self, run_id: int, *, every: float):
        self.run_id = run_id
        self.every = every
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name=f"agent-run-{run_id}-pulse", daemon=True)

    def __enter__(self) -> Pulse:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join()

    def _beat(self) -> None:
        try:
            while not self._stop.wait(self.every):
                alive = AgentRun.objects.filter(pk=self.run_id, state=RunState.RUNNING).update(
                    heartbeat_at=timezone.now()
                )
                if not alive:  # reaped or finished: the loop's own heartbeat reports it
                    return
        except Exception:  # the database away for a moment: the loop's heartbeat decides
            logger.warning("agent run %s: the heartbeat pulse stopped", self.run_id, exc_info=True)
        finally:
            connection.close()  # this thread's connection back to the pool


def _reap(queryset: QuerySet[AgentRun], *, reason: str, **changes: object) -> int:
    """Fail the running runs of ``queryset`` and notify their owners. The rows are locked first
    (FOR NO KEY UPDATE, as the scheduler: no conflict with FK checks; SKIP LOCKED: a run whose
    heartbeat is being written is alive, the next tick sees it again), so exactly the runs failed
    here are the ones notified."""
    with transaction.atomic():
        ids = list(queryset.select_for_update(skip_locked=True, no_key=True).values_list("pk", flat=True))
        if not ids:
            return 0
        reaped = AgentRun.objects.filter(pk__in=ids).update(state=RunState.FAILED, reason=reason, **changes)
        for run_id in ids:
            _notify_owner(run_id, state=RunState.FAILED, reason=reason)
    return reaped


def agent_runs_reap_stale(*, now: datetime | None = None) -> int:
    """Release the single-flight lock of runs no worker will finish:

    - a running run whose heartbeat is older than ``agent_stale_after_seconds`` → failed/stale;
    - a running run whose worker is *known* dead (its consumer's heartbeat is gone from Redis,
      see ``achilles.health.worker_known_dead``) → failed/worker_lost at once, not after the
      whole stale window (an orphaned pool process may still pulse the row's heartbeat).
    """
    now = now or timezone.now()
    cutoff = now - timedelta(seconds=platform_settings().agent_stale_after_seconds)
    reaped = _reap(
        AgentRun.objects.filter(state=RunState.RUNNING, heartbeat_at__lt=cutoff),
        reason=RunReason.STALE,
        finished_at=now,
        error=f"no heartbeat since before {cutoff.isoformat()}; the worker died or hung",
    )
    workers = set(
        AgentRun.objects.filter(state=RunState.RUNNING).exclude(worker="").values_list("worker", flat=True).distinct()
    )
    dead = sorted(w for w in workers if worker_known_dead(w))
    if dead:
        reaped += _reap(
            AgentRun.objects.filter(state=RunState.RUNNING, worker__in=dead),
            reason=RunReason.WORKER_LOST,
            finished_at=now,
            error="the worker running it stopped (no heartbeat from its consumer)",
        )
    if reaped:
        logger.warning("reaped %d agent run(s) (stale or worker lost)", reaped)
    return reaped


def agent_runs_redispatch(*, now: datetime | None = None, grace_seconds: int = REDISPATCH_GRACE_SECONDS) -> list[int]:
    """Queued runs whose enqueue never succeeded (broker down) or whose message was lost are sent
    again; a duplicate delivery is harmless (``run_execute`` claims only a queued run)."""
    now = now or timezone.now()
    lost_after = now - timedelta(seconds=max(platform_settings().agent_stale_after_seconds, grace_seconds))
    ids = list(
        AgentRun.objects.filter(state=RunState.QUEUED)
        .filter(
            Q(enqueued_at__isnull=True, created_at__lt=now - timedelta(seconds=grace_seconds))
            | Q(enqueued_at__lt=lost_after)
        )
        .order_by("id")
        .values_list("id", flat=True)[:REDISPATCH_BATCH]
    )
    return dispatch.runs_dispatch(ids) if ids else []
