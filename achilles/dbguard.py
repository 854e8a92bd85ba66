"""PostgreSQL away answers at once: the connect breaker and the sliced wait for a pooled connection.

With PostgreSQL down, every request used to wait out the pool's whole ``timeout`` (10 s) before its
500: the pool's own attempts failed within milliseconds, but a waiting client is never told, it only
times out. Here one breaker per process remembers that a connection attempt failed (the pool's
workers connect through :class:`BreakerConnection`), and a request

- waits for a pooled connection in short slices (:func:`checkout`): while the breaker is closed a
  slice that times out only means the pool is busy, and the request goes on waiting up to the pool's
  timeout; once it is open, the request fails with :class:`DatabaseUnreachable` after that slice;
- while the breaker is open, fails at once — but for one request per ``RETRY_EVERY_SECONDS``, which
  tries (a probe: the pool grows by a fresh attempt), so the first request after PostgreSQL is back
  gets its connection and a successful connect closes the breaker for everyone.

Pure logic over an injected clock and ``getconn``: ``tests/achilles/unit/test_dbguard.py`` runs it
without a database. The backend (``achilles/postgres/base.py``) wires it into Django.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

import psycopg
from psycopg_pool import PoolTimeout

logger = logging.getLogger("achilles.db")

T = TypeVar("T")

# How long a request waits for a pooled connection in one go before it looks at the breaker again.
CHECKOUT_SLICE_SECONDS = 0.25
# While the breaker is open, one request per interval tries the database (the others fail at once).
RETRY_EVERY_SECONDS = 0.5
# How long the pool keeps retrying one failed connection attempt (psycopg_pool's default, 300 s, backs
# off to a minute between tries: a database back after an outage of a minute went unnoticed that long).
POOL_RECONNECT_SECONDS = 2.0


class DatabaseUnreachable(psycopg.OperationalError):
    """No connection: PostgreSQL did not answer a recent connection attempt (raised without waiting).
    A psycopg ``OperationalError``, so Django raises it as ``django.db.OperationalError``."""


class ConnectBreaker:
    """Open from a failed connection attempt until a successful one (thread-safe)."""

    def __init__(self, *, retry_every: float = RETRY_EVERY_SECONDS, clock: Callable[[], float] = time.monotonic):
        self.retry_every = retry_every
        self.clock = clock
        self._lock = threading.Lock()
        self._failed_since: float | None = None
        self._last_try = float("-inf")

    @property
    def is_open(self) -> bool:
        return self._failed_since is not None

    def failed(self, error: BaseException | None = None) -> None:
        with self._lock:
            if self._failed_since is None:
                self._failed_since = self.clock()
                self._last_try = self._failed_since
                logger.warning("the database is unreachable; requests fail at once until it answers (%s)", error)

    def succeeded(self) -> None:
        if self._failed_since is None:  # the usual case: no lock taken
            return
        with self._lock:
            if self._failed_since is not None:
                logger.warning("the database answers again after %.1fs", self.clock() - self._failed_since)
                self._failed_since = None

    def admit(self) -> bool:
        """True: try the database now (closed, or this caller is the interval's one probe)."""
        if self._failed_since is None:
            return True
        with self._lock:
            if self._failed_since is None:
                return True
            now = self.clock()
            if now - self._last_try >= self.retry_every:
                self._last_try = now
                return True
            return False

    def refuse(self) -> DatabaseUnreachable:
        return DatabaseUnreachable("the database is unreachable; try again shortly")


BREAKER = ConnectBreaker()


def checkout(
    getconn: Callable[[float], T],
    *,
    timeout: float,
    breaker: ConnectBreaker = BREAKER,
    slice_seconds: float = CHECKOUT_SLICE_SECONDS,
) -> T:
    """A connection from ``getconn(timeout)`` (a pool's), waiting at most ``timeout`` while the
    database answers and at most one slice once the breaker says it does not."""
    if not breaker.admit():
        raise breaker.refuse()
    deadline = breaker.clock() + timeout
    while True:
        left = deadline - breaker.clock()
        try:
            conn = getconn(max(0.0, min(slice_seconds, left)))
        except PoolTimeout:
            if breaker.is_open:
                raise breaker.refuse() from None
            if breaker.clock() >= deadline:
                raise
            continue
        breaker.succeeded()  # a checked connection: the database answers
        return conn


class BreakerConnection(psycopg.Connection):
    """psycopg's connection whose connect tells the breaker how it went (the pool's ``connection_class``)."""

    @classmethod
    def connect(cls, conninfo: str = "", **kwargs: Any):
        try:
            conn = super().connect(conninfo, **kwargs)
        except psycopg.OperationalError as exc:
            BREAKER.failed(exc)
            raise
        BREAKER.succeeded()
        return conn
