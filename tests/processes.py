"""Real platform processes for tests: a Celery worker or daphne joining the test database.

They run the same code as production (`make run`), with the test run's database, cache namespace
and Celery queues, so what they commit is visible to the test and vice versa (use
``django_db(transaction=True)``). Each call returns the ``Popen``; ``stop`` ends it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from django.conf import settings
from django.db import connection


def child_env(**extra: str) -> dict[str, str]:
    return {**os.environ, "ACHILLES_TESTING": "1", "ACHILLES_DB_NAME": connection.settings_dict["NAME"],
            "TEST_DATABASE_NAME": settings.TEST_NAMESPACE, **extra}


def _spawn(args: list[str], log: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", *args], cwd=settings.BASE_DIR, env=child_env(),
                            stdout=subprocess.DEVNULL, stderr=open(log, "w"))


def start_celery_worker(log: Path, name: str, *, queues: list[str] | None = None,
                        loglevel: str = "INFO", extra: tuple[str, ...] = ()) -> subprocess.Popen:
    """A solo-pool worker; without ``queues`` it consumes every queue of the platform."""
    args = ["celery", "-A", "achilles.celery_app", "worker", "--pool=solo", f"--loglevel={loglevel}",
            f"--hostname={name}-{os.getpid()}@%h", *extra]
    if queues:
        args += ["-Q", ",".join(queues)]
    return _spawn(args, log)


def start_celery_beat(log: Path, schedule_file: Path) -> subprocess.Popen:
    return _spawn(["celery", "-A", "achilles.celery_app", "beat", "--loglevel=WARNING", "-s", str(schedule_file)], log)


def start_daphne(log: Path, port: int) -> subprocess.Popen:
    return _spawn(["daphne", "-b", "127.0.0.1", "-p", str(port), "achilles.asgi:application"], log)


def stop(proc: subprocess.Popen, timeout: float = 15) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
