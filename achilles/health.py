"""Health of the platform (PLAT-9): database, Redis and worker/beat heartbeats in Redis."""

from __future__ import annotations

import threading
import time

from django.conf import settings
from django.db import connection



def _key(role: str) -> str:
    # Namespaced like the cache, so a test run never reads a running platform's heartbeat.
    return f"{settings.CACHES['default']['KEY_PREFIX']}:heartbeat:{role}"
_stop = threading.Event()


def _redis():
    import redis

    return redis.Redis.from_url(settings.REDIS_URL, socket_timeout=2, socket_connect_timeout=2)


ROLES = ("worker", "agents_worker", "beat")


def heartbeat_write(role: str) -> None:
    """Record that ``role`` (worker | agents_worker | beat) is alive now."""
    ttl = settings.HEARTBEAT_MAX_AGE_SECONDS * 5
    _redis().set(_key(role), f"{time.time():.3f}", ex=ttl)


def heartbeat_age(role: str) -> float | None:
    value = _redis().get(_key(role))
    return None if value is None else max(0.0, time.time() - float(value))


def start_heartbeat_thread(roles: tuple[str, ...], every: float = 10.0) -> None:
    """A worker writes the heartbeats of the queues it serves from a daemon thread while it runs."""
    _stop.clear()

    def beat():
        while not _stop.is_set():
            for role in roles:
                try:
                    heartbeat_write(role)
                except Exception:  # Redis gone for a moment: healthz will say so
                    pass
            _stop.wait(every)

    threading.Thread(target=beat, name="heartbeat", daemon=True).start()


def stop_heartbeat_thread() -> None:
    _stop.set()


def health_report() -> tuple[bool, dict[str, str]]:
    """``({...: "ok"|reason}, all_ok)``; every check is independent and bounded in time."""
    report: dict[str, str] = {}
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        report["db"] = "ok"
    except Exception as exc:
        report["db"] = f"error: {exc.__class__.__name__}"
    try:
        _redis().ping()
        report["redis"] = "ok"
        for role in ROLES:
            age = heartbeat_age(role)
            if age is None:
                report[role] = "no heartbeat"
            elif age > settings.HEARTBEAT_MAX_AGE_SECONDS:
                report[role] = f"stale heartbeat ({int(age)}s old)"
            else:
                report[role] = "ok"
    except Exception as exc:
        report["redis"] = f"error: {exc.__class__.__name__}"
        for role in ROLES:
            report[role] = "unknown (redis down)"
    return all(v == "ok" for v in report.values()), report
