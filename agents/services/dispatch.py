"""Putting runs on the broker: batched, after commit, failures left to the re-dispatcher."""

from __future__ import annotations

import base64
import json
import logging
import os
import queue
import re
import threading
from collections.abc import Iterable
from typing import TYPE_CHECKING

from celery.utils import uuid
from django.db import connection, transaction
from django.utils import timezone
from kombu import Queue as KombuQueue
from kombu.transport import redis as kombu_redis

from agents.choices import RunState
from agents.tasks import agent_run_task

if TYPE_CHECKING:
    from kombu import Producer, Queue

logger = logging.getLogger(__name__)


def _route() -> Queue:
    """The queue Celery's router picks for a run (task routes and the default queue apply)."""
    return agent_run_task.app.amqp.router.route({}, agent_run_task.name, (0,), {})["queue"]


def _send(run_id: int, producer: Producer | None = None, queue: Queue | None = None) -> None:
    """Put one run on the broker (separate function so tests can capture it).

    On the batched path (a producer and its declared queue) the Celery protocol-2 message is
    built by ``app.amqp`` and published straight to the routed queue: the message
    ``apply_async`` would send, without its per-call routing and declaring, which dominate a
    busy tick.
    """
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


PUBLISH_CHUNK = 1000
# A run id no real run has: the template message is rendered for it, then split around it.
_TEMPLATE_RUN_ID = 987654321987654
_SLOTS = {"id": "\x01id\x01", "argsrepr": "\x01argsrepr\x01", "body": "\x01body\x01", "tag": "\x01tag\x01"}


class _RedisRunMessages:
    """The exact Redis list entry kombu writes for a run, as a template: per run only the task
    id, the delivery tag, ``argsrepr`` and the body change.

    Celery builds and kombu wraps each message in ≈ 50 µs of Python (two JSON encodings, routing,
    a dict per layer); a busy tick sends 10 000 of them on a thread that competes with the tick
    for the GIL. The template is taken from a real publication (``_send`` of a sentinel run to a
    throwaway list, popped straight back), so it is whatever this Celery and kombu write — headers,
    properties, serializer and body encoding included — and a chunk is rendered by string joins
    and pushed with one ``LPUSH`` (atomic: all of the chunk or none of it).
    """

    def __init__(self, parts: list[str], body_parts: tuple[str, str], key: str) -> None:
        self.parts = parts
        self.body_parts = body_parts
        self.key = key

    @classmethod
    def capture(cls, producer: Producer, queue: Queue) -> _RedisRunMessages | None:
        """Publish a sentinel run through kombu, read back what it wrote; None where the shape is
        not the plain one (another transport, priorities, expiring queues): the caller then uses
        kombu per message."""
        channel = producer.channel
        # An expiring queue gets a PEXPIRE beside each push from kombu: not the plain shape.
        if not isinstance(channel, kombu_redis.Channel) or getattr(queue, "expires", None):
            return None
        scratch = f"{queue.name}.template.{uuid()}"
        _send(_TEMPLATE_RUN_ID, producer, KombuQueue(scratch))
        with channel.conn_or_acquire() as client:
            raw = client.lpop(scratch)
        if raw is None:  # not where a plain queue's messages go
            return None
        message = json.loads(raw)
        headers, properties = message["headers"], message["properties"]
        task_id = headers["id"]
        if (
            properties.get("body_encoding") != "base64"
            or properties.get("priority") not in (0, None)
            or headers.get("root_id") != task_id
            or properties.get("correlation_id") != task_id
            or properties.get("delivery_info", {}).get("routing_key") != scratch
        ):
            return None
        body = base64.b64decode(message["body"]).decode()
        if body.count(str(_TEMPLATE_RUN_ID)) != 1 or headers.get("argsrepr") != f"({_TEMPLATE_RUN_ID},)":
            return None
        body_parts = tuple(body.split(str(_TEMPLATE_RUN_ID)))
        headers["id"] = headers["root_id"] = properties["correlation_id"] = _SLOTS["id"]
        headers["argsrepr"] = _SLOTS["argsrepr"]
        message["body"] = _SLOTS["body"]
        properties["delivery_tag"] = _SLOTS["tag"]
        properties["delivery_info"]["routing_key"] = queue.name
        text = json.dumps(message)
        # json.dumps escapes the \x01 markers as \u0001: split the text around them.
        markers = {json.dumps(v)[1:-1]: k for k, v in _SLOTS.items()}
        parts = re.split("(" + "|".join(re.escape(m) for m in markers) + ")", text)
        parts = [markers.get(p, p) if i % 2 else p for i, p in enumerate(parts)]
        if sorted(parts[1::2]) != sorted(["id", "id", "id", "argsrepr", "body", "tag"]):
            return None
        messages = cls(parts, (body_parts[0], body_parts[1]), queue.name)
        # Rendered for the sentinel, the template gives back exactly what kombu wrote (but the queue).
        expected = json.loads(raw)
        expected["properties"]["delivery_info"]["routing_key"] = queue.name
        tag = expected["properties"]["delivery_tag"]
        if json.loads(messages.render(_TEMPLATE_RUN_ID, task_id=task_id, tag=tag)) != expected:
            return None
        return messages

    def render(self, run_id: int, *, task_id: str, tag: str) -> str:
        values = {
            "id": task_id,
            "argsrepr": f"({run_id},)",
            "body": base64.b64encode(f"{self.body_parts[0]}{run_id}{self.body_parts[1]}".encode()).decode(),
            "tag": tag,
        }
        parts = self.parts
        return "".join([values[p] if i % 2 else p for i, p in enumerate(parts)])


def _uuid4s(count: int) -> list[str]:
    """``count`` random (version 4) UUIDs in text, as Celery's task ids and kombu's delivery tags,
    from one read of the OS's random source: ``uuid.uuid4()`` costs ≈ 3 µs each, and a chunk of
    runs needs two per run."""
    raw = os.urandom(16 * count).hex()
    ids = []
    for start in range(0, 32 * count, 32):
        h = raw[start : start + 32]
        ids.append(f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{'89ab'[int(h[16], 16) & 3]}{h[17:20]}-{h[20:]}")
    return ids


# One template per process (the origin header names the process) and queue; None = not usable.
_templates: dict[tuple[int, str], _RedisRunMessages | None] = {}


def _publish(run_ids: list[int], producer: Producer, queue: Queue) -> None:
    """Put a chunk of runs on the broker: one LPUSH of rendered messages on Redis, kombu's
    publish batch per message elsewhere (separate function so tests can capture it)."""
    key = (os.getpid(), queue.name)
    if key not in _templates:
        _templates[key] = _RedisRunMessages.capture(producer, queue)
    messages = _templates[key]
    if messages is None:
        with producer.batch(max_size=4 * len(run_ids)):
            for run_id in run_ids:
                _send(run_id, producer, queue)
        return
    ids = _uuid4s(2 * len(run_ids))
    payloads = [messages.render(run_id, task_id=ids[2 * n], tag=ids[2 * n + 1]) for n, run_id in enumerate(run_ids)]
    with producer.channel.conn_or_acquire() as client:
        # LPUSH a b c leaves c … a: the consumer pops from the right, so a goes first.
        client.lpush(messages.key, *payloads)


def runs_dispatch(run_ids: Iterable[int]) -> list[int]:
    """Enqueue runs and stamp ``enqueued_at``; failures are logged and left to the re-dispatcher.

    One producer for the whole list, one push per chunk: a tick's thousand runs cost one round
    trip instead of a thousand. A chunk whose push fails is left unstamped, so the tick re-sends
    it (a duplicate delivery is harmless).
    """
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
                    _publish(chunk, producer, queue)
                except Exception as exc:
                    logger.warning(
                        "%d agent run(s) not enqueued (%s); the scheduler tick will re-dispatch them", len(chunk), exc
                    )
                    continue
                sent.extend(chunk)
    except Exception as exc:  # no broker connection at all
        logger.warning("agent runs not enqueued (%s); the scheduler tick will re-dispatch them", exc)
    if sent:
        # Raw, with the ids as one array literal: the ORM's pk__in quotes a thousand parameters in
        # Python (5 ms of CPU a chunk, taken from the tick writing the next batch).
        with connection.cursor() as cursor:
            cursor.execute(
                "UPDATE agent_runs SET enqueued_at = %s WHERE id = ANY(%s::bigint[]) AND state = %s",
                [timezone.now(), "{" + ",".join(map(str, sent)) + "}", RunState.QUEUED.value],
            )
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
