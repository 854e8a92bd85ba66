"""The run framework: dispatch, claim under a lease, checkpoint with each batch, finish, reap.

A run is resumable: the task is acked late (a worker killed with ``kill -9`` leaves it to be
re-delivered) and every batch commits its records together with the run's counters and checkpoint
in one transaction, so a resumed run starts after the last committed batch — nothing lost, nothing
stored twice (records are also keyed by ``(source_system, external_id)``).

Stuck runs: a worker refreshes ``heartbeat_at`` with each batch; the Beat job
``knowledge.connector_runs_reap`` (every 30 s) sends again a run queued for longer than
``DISPATCH_GRACE`` (its message was lost) or running with a heartbeat older than ``LEASE`` (its worker
died); the claim takes such a run over. A run taken up ``MAX_ATTEMPTS`` times fails.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from celery import current_app
from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from knowledge.connectors.models import ACTIVE_RUN_STATES, Connector, ConnectorRun, ConnectorRunError, RunState

log = logging.getLogger(__name__)

LEASE = timedelta(seconds=120)
DISPATCH_GRACE = timedelta(seconds=60)
MAX_ATTEMPTS = 5
MAX_ERROR_CHARS = 2000
RUN_TASK = "knowledge.tasks.connector_run_task"


def run_dispatch(run_id: int) -> None:
    """Send the run's task; a broker that is away is logged and left to the reaper."""
    try:
        current_app.send_task(RUN_TASK, args=[run_id])
    except Exception as exc:  # noqa: BLE001 — the reaper sends it again
        log.warning("connector run %s not sent (%s); the reaper will send it again", run_id, type(exc).__name__)


def run_claim(run_id: int, *, lease: timedelta = LEASE) -> ConnectorRun | None:
    """Take the run up: a queued one, or a running one whose worker stopped beating (a resume).
    None if it is finished, held by a live worker, or out of attempts (then it fails)."""
    now = timezone.now()
    with transaction.atomic():
        run = (
            ConnectorRun.objects.select_for_update(skip_locked=True)
            .select_related("connector")
            .filter(pk=run_id, state__in=ACTIVE_RUN_STATES)
            .first()
        )
        if run is None:
            return None
        if run.state == RunState.RUNNING and run.heartbeat_at and now - run.heartbeat_at < lease:
            return None
        if run.attempts >= MAX_ATTEMPTS:
            _finish(run, RunState.FAILED, f"taken up {run.attempts} times without finishing")
            return None
        run.state = RunState.RUNNING
        run.attempts += 1
        run.started_at = run.started_at or now
        run.heartbeat_at = now
        run.save(update_fields=["state", "attempts", "started_at", "heartbeat_at"])
    return run


@dataclass
class Batch:
    """What one batch did, committed with the checkpoint it reached."""

    seen: int = 0
    changed: int = 0
    deleted: int = 0
    errors: list[tuple[str, str]] = field(default_factory=list)


class RunCancelled(Exception):
    """The run was cancelled while this worker had it: the batch in hand is rolled back."""


def run_commit(run: ConnectorRun, *, batch: Batch, checkpoint: dict[str, Any], total: int | None = None) -> None:
    """Record a batch's counters, errors and checkpoint (call inside the batch's transaction).

    A run cancelled meanwhile raises ``RunCancelled``: the batch's transaction rolls back with its
    records, so the run stops at this batch boundary with the checkpoint of the one before."""
    updates: dict[str, Any] = {
        "seen": F("seen") + batch.seen,
        "changed": F("changed") + batch.changed,
        "deleted": F("deleted") + batch.deleted,
        "failed": F("failed") + len(batch.errors),
        "checkpoint": checkpoint,
        "heartbeat_at": timezone.now(),
    }
    if total is not None:
        updates["total"] = total
    if not ConnectorRun.objects.filter(pk=run.pk, state=RunState.RUNNING).update(**updates):
        raise RunCancelled(f"run {run.pk} was cancelled")
    ConnectorRunError.objects.bulk_create(
        [ConnectorRunError(run=run, external_id=eid[:512], error=err[:MAX_ERROR_CHARS]) for eid, err in batch.errors],
        ignore_conflicts=True,
    )
    run.checkpoint = checkpoint


def _finish(run: ConnectorRun, state: str, error: str = "") -> None:
    ConnectorRun.objects.filter(pk=run.pk, state__in=ACTIVE_RUN_STATES).update(
        state=state, finished_at=timezone.now(), error=error[:MAX_ERROR_CHARS]
    )


def run_finish(run: ConnectorRun, *, state: str, error: str = "") -> None:
    with transaction.atomic():
        _finish(run, state, error)
        if state == RunState.SUCCEEDED:
            stamp = "last_content_sync_at" if run.kind == "content" else "last_permission_sync_at"
            Connector.objects.filter(pk=run.connector_id).update(**{stamp: timezone.now()})


def run_execute(run_id: int, body: Callable[[ConnectorRun], None], *, lease: timedelta = LEASE) -> str:
    """Claim the run and run ``body``; an exception fails the run with its message (credentials
    never reach it: the client's errors name the call, not the headers)."""
    run = run_claim(run_id, lease=lease)
    if run is None:
        return "skipped"
    try:
        body(run)
    except RunCancelled:
        log.info("connector run %s cancelled; stopped at a batch boundary", run.pk)
        return RunState.CANCELLED
    except Exception as exc:
        log.exception("connector run %s failed", run.pk)
        run_finish(run, state=RunState.FAILED, error=f"{type(exc).__name__}: {exc}")
        return RunState.FAILED
    run_finish(run, state=RunState.SUCCEEDED)
    return RunState.SUCCEEDED


def run_cancel_mark(run_id: int, *, reason: str) -> bool:
    """Mark an active run cancelled (its worker stops at its next batch boundary; a queued one is
    never taken up). False if it had already finished."""
    return bool(
        ConnectorRun.objects.filter(pk=run_id, state__in=ACTIVE_RUN_STATES).update(
            state=RunState.CANCELLED, finished_at=timezone.now(), error=reason[:MAX_ERROR_CHARS]
        )
    )


def runs_reap(*, lease: timedelta = LEASE, grace: timedelta = DISPATCH_GRACE) -> list[int]:
    """Send again the runs whose message was lost or whose worker died; returns their ids."""
    now = timezone.now()
    stale = ConnectorRun.objects.filter(
        Q(state=RunState.QUEUED, created_at__lt=now - grace) | Q(state=RunState.RUNNING, heartbeat_at__lt=now - lease)
    ).values_list("pk", flat=True)
    ids = list(stale)
    # Its worker is taken for dead: forget its heartbeat, so the next claim takes the run over.
    ConnectorRun.objects.filter(pk__in=ids, state=RunState.RUNNING).update(heartbeat_at=None)
    for run_id in ids:
        run_dispatch(run_id)
    return ids
