"""Health of the platform (PLAT-9): database, Redis and worker/beat heartbeats in Redis.

Each role (worker | agents_worker | ingest_worker | beat) is a sorted set of the processes that serve it, scored
by their last heartbeat. A Celery worker's heartbeat is written by its *consumer* (a bootstep on
the consumer's event-loop timer), not by a side thread: a consumer that died or hangs stops
writing, and a worker that shuts down removes itself, so ``/healthz`` shows it at once. The same
sets tell the reaper which worker is alive (``worker_known_dead``).
"""

from __future__ import annotations

import time

import redis
from django.conf import settings
from django.db import connection

from achilles import dbguard
from achilles.errors import as_application_error

ROLES = ("worker", "agents_worker", "ingest_worker", "beat")
# A worker's consumer writes every WORKER_HEARTBEAT_SECONDS (the setting, 5 s by default); one missed
# beat and a margin later (WORKER_DEAD_AFTER_SECONDS) it counts as dead for the reaper.
WORKER_HEARTBEAT_SECONDS: float = settings.WORKER_HEARTBEAT_SECONDS
WORKER_DEAD_AFTER_SECONDS = 3 * WORKER_HEARTBEAT_SECONDS


def _key(role: str) -> str:
    # Namespaced like the cache, so a test run never reads a running platform's heartbeat.
    return f"{settings.CACHES['default']['KEY_PREFIX']}:heartbeats:{role}"


def _redis():
    return redis.Redis.from_url(settings.REDIS_URL, socket_timeout=2, socket_connect_timeout=2)


def heartbeat_write(role: str, member: str = "-") -> None:
    """Record that ``member`` (a worker instance, ``hostname:pid``; "-" for a single writer) serving ``role`` is
    alive now; members silent for the whole retention are dropped."""
    now = time.time()
    keep = max(settings.HEARTBEAT_MAX_AGE_SECONDS, WORKER_DEAD_AFTER_SECONDS) * 5
    key = _key(role)
    pipe = _redis().pipeline()
    pipe.zadd(key, {member: now}).zremrangebyscore(key, "-inf", now - keep).expire(key, int(keep)).execute()


def heartbeat_remove(role: str, member: str) -> None:
    _redis().zrem(_key(role), member)


def heartbeat_age(role: str) -> float | None:
    """Age of the freshest heartbeat of ``role`` (None: no one ever wrote one, or long ago)."""
    newest = _redis().zrevrange(_key(role), 0, 0, withscores=True)
    return None if not newest else max(0.0, time.time() - newest[0][1])


def heartbeat_members(role: str) -> list[str]:
    """The instances that wrote a heartbeat of ``role`` within the retention (alive or not)."""
    return [member.decode() for member in _redis().zrange(_key(role), 0, -1)]


def worker_known_dead(instance: str, *, role: str = "agents_worker") -> bool:
    """True only when Redis *knows* the worker is gone: no heartbeat of it for
    WORKER_DEAD_AFTER_SECONDS while Redis itself has been up longer than that (a Redis that just
    restarted empty knows nothing yet). Redis unreachable → False (not known)."""
    try:
        client = _redis()
        uptime = int(client.info("server").get("uptime_in_seconds", 0))
        score = client.zscore(_key(role), instance)
    except Exception:
        return False
    if uptime <= WORKER_DEAD_AFTER_SECONDS:
        return False
    return score is None or time.time() - score > WORKER_DEAD_AFTER_SECONDS


# /healthz waits at most this long for a pooled connection (a request waits up to the pool's 10 s).
HEALTH_DB_WAIT_SECONDS = 2.0


def _database_check() -> None:
    """``SELECT 1`` on a pooled connection taken with a short wait of its own, through the connect
    breaker (``achilles.dbguard``): PostgreSQL down answers at once, a pool busy for 2 s says so."""
    pool = connection.pool
    if pool is None:  # DB_POOL_MAX_SIZE=0: the request's own connection (the breaker is in its connect)
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        return
    pool.open()
    conn = dbguard.checkout(pool.getconn, timeout=HEALTH_DB_WAIT_SECONDS)
    try:
        conn.execute("SELECT 1")
    finally:
        pool.putconn(conn)


def health_report() -> tuple[bool, dict[str, str]]:
    """``(all_ok, {...: "ok"|reason})``; every check is independent and bounded in time."""
    report: dict[str, str] = {}
    try:
        _database_check()
        report["db"] = "ok"
    except Exception as exc:  # the connect breaker (achilles/dbguard.py) answers at once while it is down
        error = as_application_error(exc)
        report["db"] = f"error: {error.code if error is not None else exc.__class__.__name__}"
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
