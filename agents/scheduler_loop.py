"""The scheduler's wake-up loop (AE-SCHED): the tick runs when the next agent is due, not on a period.

One cycle: if the earliest ``next_run_at`` has come, tick (``scheduler_tick`` claims everything
due); then sleep until the earliest ``next_run_at`` — or until PostgreSQL NOTIFYs
``agents_next_run`` (migration 0004: a next run set or moved earlier, whoever wrote it), whichever
comes first, and at most ``max_sleep`` seconds (a lost notification or a clock step costs no more).
Ticks are at least ``coalesce`` seconds apart: with a million agents something is due every few
milliseconds, and one tick per ``coalesce`` gathers them instead of a tick each; it is also the
bound on the lag it adds.

The Beat process runs it on a thread of its own (``achilles.beat``); the Beat job
``agents.scheduler_tick`` stays as the safety net and the re-dispatcher of lost enqueues.
Concurrent ticks are safe (SKIP LOCKED), so the two never double-run a slot.
"""

from __future__ import annotations

import logging
import threading
import time
from datetime import datetime

import psycopg
from django.conf import settings
from django.db import connection
from django.utils import timezone

from agents.services import scheduler_tick

logger = logging.getLogger(__name__)

NOTIFY_CHANNEL = "agents_next_run"
# The partial index agents_agent_due_idx answers this from its first entry.
_NEXT_DUE_SQL = "SELECT min(next_run_at) FROM agents WHERE next_run_at IS NOT NULL"
# After an unexpected error (database away): wait this long before trying again.
ERROR_BACKOFF_SECONDS = 1.0


def next_due() -> datetime | None:
    with connection.cursor() as cursor:
        cursor.execute(_NEXT_DUE_SQL)
        return cursor.fetchone()[0]


class SchedulerLoop:
    """Ticks at the next due time or when woken; ``progress_at`` (monotonic) says it is alive."""

    def __init__(self, *, coalesce: float | None = None, max_sleep: float | None = None) -> None:
        self.coalesce = settings.AGENT_SCHEDULER_COALESCE_SECONDS if coalesce is None else coalesce
        self.max_sleep = settings.AGENT_SCHEDULER_MAX_SLEEP_SECONDS if max_sleep is None else max_sleep
        self.progress_at = time.monotonic()
        self.ticks = 0
        self.wakeups = 0
        self._last_tick = float("-inf")
        self._listener: psycopg.Connection | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # ---------------------------------------------------------------- the cycle

    def cycle(self) -> float:
        """Tick if something is due (and the last tick is ``coalesce`` old); return how long to sleep."""
        due = next_due()
        now = timezone.now()
        if due is not None and due <= now:
            since = time.monotonic() - self._last_tick
            if since < self.coalesce:
                return self.coalesce - since
            self._last_tick = time.monotonic()
            # Lost enqueues are the Beat job's: re-sending them here would add a scan per tick.
            scheduler_tick(now=now, redispatch=False)
            self.ticks += 1
            due = next_due()
            now = timezone.now()
        if due is None:
            return self.max_sleep
        wait = max((due - now).total_seconds(), self._last_tick + self.coalesce - time.monotonic(), 0.0)
        return min(wait, self.max_sleep)

    def wait(self, seconds: float) -> bool:
        """Sleep up to ``seconds``; True when an ``agents_next_run`` notification cut it short."""
        listener = self._listen()
        woken = False
        for _ in listener.notifies(timeout=max(seconds, 0.0), stop_after=1):
            woken = True
        if woken:
            self.wakeups += 1
            # A bulk change may have sent more than one (one per transaction): take them all now.
            for _ in listener.notifies(timeout=0.0):
                pass
        return woken

    def _listen(self) -> psycopg.Connection:
        if self._listener is None or self._listener.closed:
            params = connection.get_connection_params()
            for key in ("cursor_factory", "context", "prepare_threshold"):
                params.pop(key, None)
            # Its own connection, outside the pool: LISTEN belongs to one session for its whole life.
            self._listener = psycopg.connect(**params, autocommit=True)
            self._listener.execute(f"LISTEN {NOTIFY_CHANNEL}")
        return self._listener

    def run_once(self) -> None:
        try:
            # Listen before reading the next due time: a change committed in between still wakes us.
            self._listen()
            self.wait(self.cycle())
        except Exception:
            logger.exception("agent scheduler loop: cycle failed; retrying in %ss", ERROR_BACKOFF_SECONDS)
            self.close()
            connection.close()  # this thread's own; a broken one is replaced on next use
            self._stop.wait(ERROR_BACKOFF_SECONDS)
        self.progress_at = time.monotonic()

    # ---------------------------------------------------------------- the thread

    def run(self) -> None:
        try:
            while not self._stop.is_set():
                self.run_once()
        finally:
            self.close()
            connection.close()

    def start(self) -> None:
        self._stop.clear()
        self.progress_at = time.monotonic()
        self._thread = threading.Thread(target=self.run, name="agents-scheduler-loop", daemon=True)
        self._thread.start()

    def stop(self, timeout: float | None = None) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout if timeout is not None else self.max_sleep + 5)

    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def alive(self, *, within: float) -> bool:
        """The thread runs and finished a cycle in the last ``within`` seconds (a sleep is at most
        ``max_sleep``, so a healthy loop is never older than that plus one tick)."""
        return self.running() and time.monotonic() - self.progress_at <= within

    def close(self) -> None:
        """Drop the listening connection (the next cycle opens a new one)."""
        if self._listener is not None:
            try:
                self._listener.close()
            finally:
                self._listener = None
