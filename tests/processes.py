"""Real platform processes for tests: a Celery worker or daphne joining the test database.

They run the same code as production (`make run`), with the test run's database, cache namespace
and Celery queues, so what they commit is visible to the test and vice versa (use
``django_db(transaction=True)``). Each call returns the ``Popen``; ``stop`` ends it.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from pathlib import Path

from django.conf import settings
from django.db import connection

# How long a test waits for a process it started (a Celery worker, beat, daphne) to be ready or to
# have done its first work: a fresh Django process's start is ~1.5 s of CPU on the quiet machine,
# but took 60–130 s with other suites on the two cores (load 13–19). The waits end as soon as the
# condition holds, so a long deadline costs nothing when the machine is quiet.
STARTUP_SECONDS = 240


def child_env(**extra: str) -> dict[str, str]:
    return {
        **os.environ,
        "ACHILLES_TESTING": "1",
        "ACHILLES_DB_NAME": connection.settings_dict["NAME"],
        "TEST_DATABASE_NAME": settings.TEST_NAMESPACE,
        **extra,
    }


def _spawn(args: list[str], log: Path, env: dict[str, str] | None = None) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", *args],
        cwd=settings.BASE_DIR,
        env=child_env(**(env or {})),
        stdout=subprocess.DEVNULL,
        stderr=open(log, "w"),
    )


def start_celery_worker(
    log: Path,
    name: str,
    *,
    queues: list[str] | None = None,
    loglevel: str = "INFO",
    extra: tuple[str, ...] = (),
    pool: str = "solo",
    env: dict[str, str] | None = None,
) -> subprocess.Popen:
    """A solo-pool worker (``pool="prefork"`` for `make run`'s kind); without ``queues`` it
    consumes every queue of the platform; ``env``: settings of its own (``WORKER_HEARTBEAT_SECONDS``)."""
    args = [
        "celery",
        "-A",
        "achilles.celery_app",
        "worker",
        f"--pool={pool}",
        f"--loglevel={loglevel}",
        f"--hostname={name}-{os.getpid()}@%h",
        *extra,
    ]
    if queues:
        args += ["-Q", ",".join(queues)]
    return _spawn(args, log, env)


def start_celery_beat(log: Path, schedule_file: Path) -> subprocess.Popen:
    return _spawn(["celery", "-A", "achilles.celery_app", "beat", "--loglevel=WARNING", "-s", str(schedule_file)], log)


def start_daphne(
    log: Path, port: int, *, extra: tuple[str, ...] = (), env: dict[str, str] | None = None
) -> subprocess.Popen:
    """daphne as `make run` starts it; ``extra``: more of its options, ``env``: settings of its own."""
    return _spawn(["daphne", "-b", "127.0.0.1", "-p", str(port), *extra, "achilles.asgi:application"], log, env)


def wait_database_idle(timeout: float = 15) -> None:
    """Until no session of another process is inside a query or a transaction on the test database,
    seen twice in a row: a server shared by several tests (tests/browser, the sync-agent end-to-end
    tests) has finished what one test's requests started before the test's data is flushed."""
    import time

    deadline = time.monotonic() + timeout
    quiet = 0
    while time.monotonic() < deadline:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                "AND pid <> pg_backend_pid() AND backend_type = 'client backend' AND state <> 'idle'"
            )
            busy = cursor.fetchone()[0]
        quiet = quiet + 1 if not busy else 0
        if quiet >= 2:
            return
        time.sleep(0.05)
    raise AssertionError(f"another process is still busy on the test database {timeout} s after the test")


def stop(proc: subprocess.Popen, timeout: float = 15) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


# --- the embedded services, stopped and started again (the fault suite) ----------------------------


def embedded_services() -> bool:
    """True when this run uses the embedded PostgreSQL and Redis (only those can be restarted here)."""
    from achilles.bootstrap import embedded_in_use

    return embedded_in_use() == {"postgres", "redis"}


def redis_stop() -> None:
    import redis

    with contextlib.suppress(redis.ConnectionError):  # the shutdown closes the socket under the client
        redis.Redis.from_url(settings.REDIS_URL, socket_timeout=5).shutdown(nosave=True)


def redis_start() -> None:
    from achilles import embedded

    embedded.ensure_redis(settings.VAR_DIR)


def postgres_stop() -> None:
    """A fast shutdown: every session is cut, like a restart of the server."""
    import signal

    from achilles import embedded

    embedded._signal_postmaster(settings.VAR_DIR, signal.SIGINT)


def postgres_start() -> None:
    from achilles import embedded

    embedded.ensure_postgres(settings.VAR_DIR)


def database_reconnect() -> None:
    """After a PostgreSQL restart: drop this process's session and its pool's dead connections, and
    close the connect breaker (``postgres_start`` waited for the server to answer): the test's next
    statement connects at once instead of failing fast until the breaker's next probe."""
    from achilles.dbguard import BREAKER

    connection.close()
    close_pool = getattr(connection, "close_pool", None)
    if close_pool is not None:
        close_pool()
    BREAKER.succeeded()
