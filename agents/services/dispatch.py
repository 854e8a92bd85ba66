"""Putting runs on the broker: batched, after commit, failures left to the re-dispatcher."""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Iterable
from typing import TYPE_CHECKING

from celery.utils import uuid
from django.db import connection, transaction
from django.utils import timezone

from agents.choices import RunState
from agents.models import AgentRun

if TYPE_CHECKING:
    from kombu import Producer, Queue

logger = logging.getLogger(__name__)


def _route() -> Queue:
    """The queue Celery's router picks for a run (task routes and the default queue apply)."""
    from agents.tasks import agent_run_task

    return agent_run_task.app.amqp.router.route({}, agent_run_task.name, (0,), {})["queue"]


def _send(run_id: int, producer: Producer | None = None, queue: Queue | None = None) -> None:
    """Put one run on the broker (separate function so tests can capture it).

    On the batched path (a producer and its declared queue) the Celery protocol-2 message is
    built by ``app.amqp`` and published straight to the routed queue: the message
    ``apply_async`` would send, without its per-call routing and declaring, which dominate a
    busy tick.
    """
    from agents.tasks import agent_run_task

    if producer is None or queue is None:
        # No publish retries: with the broker down the run stays queued and the tick re-sends it.
        agent_run_task.apply_async(args=[run_id], retry=False, producer=producer)
        return
    message = agent_run_task.app.amqp.as_task_v2(
        uuid(), agent_run_task.name, args=(run_id,), kwargs={}, argsrepr=f"({run_id},)", kwargsrepr="{}"
    )
    # The anonymous exchange with the queue's name delivers straight into that queue (AMQP's
    # default exchange; kombu's virtual transports alike), skipping a binding lookup per message.
    producer.publish(
        message.body,
        exchange="",
        routing_key=queue.name,
        headers=message.headers,
        serializer="json",
        retry=False,
        **message.properties,
    )


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
            queue = _route()
            producer.maybe_declare(queue)
            for start in range(0, len(run_ids), PUBLISH_CHUNK):
                chunk = run_ids[start : start + PUBLISH_CHUNK]
                try:
                    with producer.batch(max_size=4 * PUBLISH_CHUNK):
                        for run_id in chunk:
                            _send(run_id, producer, queue)
                except Exception as exc:
                    logger.warning(
                        "%d agent run(s) not enqueued (%s); the scheduler tick will re-dispatch them", len(chunk), exc
                    )
                    continue
                sent.extend(chunk)
    except Exception as exc:  # no broker connection at all
        logger.warning("agent runs not enqueued (%s); the scheduler tick will re-dispatch them", exc)
    if sent:
        AgentRun.objects.filter(pk__in=sent, state=RunState.QUEUED).update(enqueued_at=timezone.now())
    return sent


def dispatch_on_commit(run_ids: list[int], publisher: BackgroundPublisher | None = None) -> None:
    if run_ids:
        if publisher is None:
            transaction.on_commit(lambda: runs_dispatch(run_ids))
        else:
            transaction.on_commit(lambda: publisher.submit(run_ids))


class BackgroundPublisher:
    """Publishes committed batches on a thread of its own while the caller writes the next batch.

    A busy tick is half database round trips (the caller waits on PostgreSQL) and half building
    and sending broker messages (Python): overlapped, one 10 000-run tick costs about the larger of
    the two instead of their sum. ``close()`` waits for everything submitted; after it, a late
    ``submit`` (an on-commit callback run later, as tests do) publishes in the caller's thread.
    """

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[list[int] | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._closed = False

    def submit(self, run_ids: list[int]) -> None:
        if self._closed:
            runs_dispatch(run_ids)
            return
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="agent-runs-publisher", daemon=True)
            self._thread.start()
        self._queue.put(run_ids)

    def _run(self) -> None:
        try:
            while (run_ids := self._queue.get()) is not None:
                runs_dispatch(run_ids)  # never raises: failures are left to the re-dispatcher
        finally:
            connection.close()  # this thread's own (the enqueued_at stamps)

    def close(self) -> None:
        self._closed = True
        if self._thread is not None:
            self._queue.put(None)
            self._thread.join()
