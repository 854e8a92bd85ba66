"""Celery Beat on django-celery-beat's DatabaseScheduler, with a heartbeat each tick."""

from __future__ import annotations

import time

from django_celery_beat.schedulers import DatabaseScheduler

from achilles.health import heartbeat_write


class HeartbeatDatabaseScheduler(DatabaseScheduler):
    """Writes the beat heartbeat that ``/healthz`` reports, at most every few seconds."""

    _last_heartbeat = 0.0

    def tick(self, *args, **kwargs):
        now = time.monotonic()
        if now - self._last_heartbeat > 5:
            try:
                heartbeat_write("beat")
                self._last_heartbeat = now
            except Exception:
                pass
        # Wake at least every 5 s so the heartbeat stays fresh with a sparse schedule.
        return min(super().tick(*args, **kwargs), 5.0)
