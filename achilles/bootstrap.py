"""The one start-up step of every entry point (manage.py, asgi.py, celery_app.py, pytest, bench).

``achilles.settings`` only reads the environment; it starts nothing and connects nowhere. Before a
process uses its database or Redis, its entry point calls :func:`bootstrap`:

- with ``DATABASE_URL`` / ``REDIS_URL`` unset, it starts or joins the embedded PostgreSQL and Redis
  under ``ACHILLES_VAR_DIR`` (``achilles.embedded``; a file lock serialises concurrent starts) and
  exports their URLs, so every process this one starts (a Celery worker or daphne started by a
  test, honcho's children) joins the same servers without starting anything itself;
- a configured URL that does not answer stops the process with a message naming the variable
  (``ACHILLES_SKIP_SERVICE_CHECK=true`` skips that check).

It runs once per process; later calls return at once.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from urllib.parse import quote, unquote

BASE_DIR = Path(__file__).resolve().parent.parent
_done = False


def var_dir() -> Path:
    return Path(os.environ.get("ACHILLES_VAR_DIR") or BASE_DIR / "var")


def embedded_database_url(var: Path) -> str:
    from achilles import embedded

    # The socket directory is the data directory (pgserver's layout): quoted as the URL's host.
    return f"postgres://postgres@{quote(str(var / 'pgdata'), safe='')}/{embedded.DATABASE_NAME}"


def embedded_redis_url(var: Path) -> str:
    from achilles import embedded

    return f"unix://{embedded.redis_paths(var)[1]}"


def database_settings(url: str) -> dict:
    """Django's connection settings for a ``postgres://`` URL (a unix socket directory may be the
    URL's quoted host, as in the embedded server's URL)."""
    import environ

    try:
        database = environ.Env.db_url_config(url)
    except Exception as exc:
        _fail(f"DATABASE_URL cannot be parsed ({exc})")
    if database["ENGINE"] != "django.db.backends.postgresql":
        _fail("DATABASE_URL must point at PostgreSQL (postgres://...)")
    database["HOST"] = unquote(database.get("HOST") or "")
    return database


def _fail(message: str):
    sys.stderr.write(f"achilles: configuration error: {message}\n")
    raise SystemExit(2)


EMBEDDED_MARK = "ACHILLES_EMBEDDED_SERVICES"


def embedded_in_use() -> set[str]:
    """Which of ``postgres`` / ``redis`` this process uses embedded (after :func:`bootstrap`)."""
    return {name for name in os.environ.get(EMBEDDED_MARK, "").split(",") if name}


def bootstrap_skip() -> None:
    """Mark this process set up without starting, joining or checking anything — for static analysis
    only (``achilles.lint_settings``: mypy's Django plugin imports every app, and with the apps' task
    modules the Celery app, whose import bootstraps). A process that uses the database never calls it."""
    global _done
    _done = True


def bootstrap() -> None:
    """Start or join the services this process needs and export ``DATABASE_URL`` / ``REDIS_URL``.

    ``ACHILLES_EMBEDDED_SERVICES`` (exported with the URLs) tells the processes started from here
    that the URLs point at embedded servers: they start or join them too (a worker started while the
    embedded Redis is down brings it back, as every process did before) instead of treating them as
    configured services that must already answer."""
    global _done
    if _done:
        return
    _read_dotenv()
    from achilles import embedded

    var = var_dir()
    # Inherited from the process that started this one, and only while the URL is still the
    # embedded server's (a caller that sets its own URL means a configured service).
    inherited = embedded_in_use()
    database_url, redis_url = os.environ.get("DATABASE_URL"), os.environ.get("REDIS_URL")
    embedded_postgres = not database_url or ("postgres" in inherited and database_url == embedded_database_url(var))
    embedded_redis = not redis_url or ("redis" in inherited and redis_url == embedded_redis_url(var))
    if embedded_postgres:
        embedded.ensure_postgres(var)
        os.environ["DATABASE_URL"] = embedded_database_url(var)
    if embedded_redis:
        os.environ["REDIS_URL"] = embedded.ensure_redis(var)
    os.environ[EMBEDDED_MARK] = ",".join(
        name for name, used in (("postgres", embedded_postgres), ("redis", embedded_redis)) if used
    )
    if os.environ.get("ACHILLES_SKIP_SERVICE_CHECK", "").strip().lower() not in {"1", "true", "yes", "on"}:
        from achilles.checks import require_services

        problem = require_services(
            database_settings(os.environ["DATABASE_URL"]),
            os.environ["REDIS_URL"],
            database_from_env=not embedded_postgres,
            redis_from_env=not embedded_redis,
        )
        if problem:
            _fail(problem)
    _done = True


def _read_dotenv() -> None:
    dotenv = BASE_DIR / ".env"
    if dotenv.exists():
        import environ

        environ.Env.read_env(dotenv, overwrite=False)
