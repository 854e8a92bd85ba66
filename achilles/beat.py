"""Celery Beat on django-celery-beat's DatabaseScheduler, with a heartbeat each tick, hosting the
loop ``settings.BEAT_LOOP`` names — the agent scheduler's wake-up loop (agents/scheduler_loop.py) —
on a thread of its own."""

from __future__ import annotations

import time

from django.conf import settings
from django.utils.module_loading import import_string
from django_celery_beat.schedulers import DatabaseScheduler

from achilles.health import heartbeat_write

# A healthy loop finishes a cycle at least every max sleep plus one tick (≤ 1 s at 1M agents);
# older than max sleep plus this and Beat stops vouching for itself, so /healthz shows "beat" stale.
LOOP_STUCK_AFTER_SECONDS = 30.0


class HeartbeatDatabaseScheduler(DatabaseScheduler):
    """Writes the beat heartbeat that ``/healthz`` reports, at most every few seconds, while the
    agent scheduler loop it runs is alive (a dead loop is started again on the next tick)."""

    _last_heartbeat = 0.0
    _agents_loop = None

    def _loop_alive(self) -> bool:
        loop = self._agents_loop
        if loop is None or not loop.running():
            # Started on the first tick, not in __init__: only the Beat service ticks, while
            # anything that merely reads the schedule (tests, the admin) constructs one too.
            loop = self._agents_loop = import_string(settings.BEAT_LOOP)()
            loop.start()
        return loop.alive(within=settings.AGENT_SCHEDULER_MAX_SLEEP_SECONDS + LOOP_STUCK_AFTER_SECONDS)

    def tick(self, *args, **kwargs):
        now = time.monotonic()
        alive = self._loop_alive()
        if now - self._last_heartbeat > 5 and alive:
            try:
                heartbeat_write("beat")
                self._last_heartbeat = now
            except Exception:
                pass
        # Wake at least every 5 s so the heartbeat stays fresh with a sparse schedule.
        return min(super().tick(*args, **kwargs), 5.0)

    def close(self):
        if self._agents_loop is not None:
            self._agents_loop.stop(timeout=2)
        super().close()
