"""Start-up checks: a configured service that does not answer stops the process (PLAT-2)."""

from __future__ import annotations

import re

import psycopg
import redis


def _redact(url: str) -> str:
    return re.sub(r"//([^:/@]+):[^@]*@", r"//\1:***@", url)


def require_services(database: dict, redis_url: str, *, database_from_env: bool, redis_from_env: bool) -> str | None:
    """Return a message naming the first configured service that does not answer."""
    if database_from_env:
        try:
            psycopg.connect(
                dbname=database["NAME"],
                user=database.get("USER") or None,
                password=database.get("PASSWORD") or None,
                host=database.get("HOST") or None,
                port=database.get("PORT") or None,
                connect_timeout=5,
            ).close()
        except Exception as exc:
            return f"DATABASE_URL does not answer ({exc.__class__.__name__}: {str(exc).strip()[:200]})"
    if redis_from_env:
        try:
            redis.Redis.from_url(redis_url, socket_timeout=3, socket_connect_timeout=3).ping()
        except Exception as exc:
            return f"REDIS_URL {_redact(redis_url)} does not answer ({exc.__class__.__name__}: {exc})"
    return None
