"""The Celery broker transport: kombu's Redis transport with one fix for a Redis blip.

When the broker connection breaks while a task is unacknowledged (every agent run: acks_late),
the consumer first *collects* the connection — which detaches its transport (``client = None``)
when closing the channel times out — and then *closes* it. The second close closes the channel
again; the channel's pool was already dropped, rebuilding it reads ``transport.client.hostname``
and the worker dies: ``Unrecoverable error: AttributeError("'NoneType' object has no attribute
'hostname'")`` right after "Restoring 1 unacknowledged message(s)"; the late ack of the task
that was running meets the same dead channel once it finishes (kombu 5.7, reproduced by
tests/faults/test_worker_survives_redis.py).

A detached transport has no broker to restore the messages to anyway: they stay in Redis's
unacked set (restored there after the visibility timeout), and the run itself is tracked in the
database (a run claims its row once, so a redelivery never runs it twice). So such a channel
answers with a connection error (the restore is skipped, a late ack is logged) instead of
crashing the worker.

``install()`` points the URL schemes the platform uses at this transport; the Celery app calls
it before any connection is made (web, worker and beat processes alike).
"""

from __future__ import annotations

from kombu.transport import TRANSPORT_ALIASES
from kombu.transport import redis as kombu_redis


class Channel(kombu_redis.Channel):
    def _get_pool(self, asynchronous=False):
        # A channel whose transport was detached (collected after a broken connection) has no
        # connection parameters left: answer like a broken socket, which kombu and Celery handle
        # (restore skipped, ack logged), instead of an AttributeError that kills the worker.
        transport = self.connection
        if transport is None or transport.client is None:
            raise kombu_redis.redis.ConnectionError("the broker connection of this channel is closed")
        return super()._get_pool(asynchronous=asynchronous)


class Transport(kombu_redis.Transport):
    Channel = Channel


def install() -> None:
    for scheme in ("redis", "rediss", "redis+socket", "socket"):
        TRANSPORT_ALIASES[scheme] = "achilles.broker:Transport"
