"""The Redis cache backend: one client per process, and a cache that is only ever a cache.

One client: Django keeps one cache object per thread, and under ASGI every request runs its sync
part on a thread of its own (asgiref's ThreadSensitiveContext), so the stock backend opened a fresh
Redis connection for nearly every request (bench/chat: ~4 % of the server's CPU went to connecting).
redis-py's pool is thread-safe and re-creates itself after a fork, so one per process is enough.

Only a cache: everything the platform caches (the platform settings row, Query Engine candidates)
can be recomputed from PostgreSQL, so with Redis away a read is a miss and a write is skipped
(logged), and the request gets its normal result from the database instead of a 500 (issue 10,
finding 8). Counters and ``clear`` still raise: they have no database to fall back to, and the
error renderer makes an unreachable Redis a 503 ``cache_unavailable``.
"""

from __future__ import annotations

import logging
import threading
import time

from django.core.cache.backends.base import DEFAULT_TIMEOUT
from django.core.cache.backends.redis import RedisCache, RedisCacheClient
from django.utils.functional import cached_property
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

logger = logging.getLogger(__name__)

_CLIENTS: dict[tuple, RedisCacheClient] = {}
_LOCK = threading.Lock()
UNREACHABLE = (RedisConnectionError, RedisTimeoutError)
_WARN_EVERY_SECONDS = 10.0
_last_warning = 0.0


def _unreachable(operation: str, exc: Exception) -> None:
    global _last_warning
    now = time.monotonic()
    if now - _last_warning >= _WARN_EVERY_SECONDS:  # one line per 10 s, not one per request
        _last_warning = now
        logger.warning("cache unreachable (%s: %s); serving from the database", operation, exc)


class ReusedClientRedisCacheClient(RedisCacheClient):
    """Django's client, keeping one ``redis.Redis`` per connection pool: Django's makes a new one for
    every command (``Redis.__init__`` was ≈ 3 % of the web process's CPU on ``GET /api/me``, whose
    platform settings are a cache read; bench/http). A ``redis.Redis`` is thread-safe: each command
    takes a connection from the pool."""

    def get_client(self, key=None, *, write=False):
        pool = self._get_connection_pool(write)
        clients = self.__dict__.setdefault("_redis_clients", {})
        client = clients.get(pool)
        if client is None:
            client = clients.setdefault(pool, self._client(connection_pool=pool))
        return client


class SharedRedisCache(RedisCache):
    def __init__(self, server, params):
        super().__init__(server, params)
        self._class = ReusedClientRedisCacheClient

    @cached_property
    def _cache(self) -> RedisCacheClient:
        key = (tuple(self._servers), repr(sorted(self._options.items())))
        with _LOCK:
            client = _CLIENTS.get(key)
            if client is None:
                client = _CLIENTS[key] = self._class(self._servers, **self._options)
        return client

    # Reads: a miss.
    def get(self, key, default=None, version=None):
        try:
            return super().get(key, default, version)
        except UNREACHABLE as exc:
            _unreachable("get", exc)
            return default

    def get_many(self, keys, version=None):
        try:
            return super().get_many(keys, version)
        except UNREACHABLE as exc:
            _unreachable("get_many", exc)
            return {}

    def has_key(self, key, version=None):
        try:
            return super().has_key(key, version)
        except UNREACHABLE as exc:
            _unreachable("has_key", exc)
            return False

    # Writes: skipped (an entry that was not stored is recomputed next time).
    def set(self, key, value, timeout=DEFAULT_TIMEOUT, version=None):
        try:
            super().set(key, value, timeout, version)
        except UNREACHABLE as exc:
            _unreachable("set", exc)

    def add(self, key, value, timeout=DEFAULT_TIMEOUT, version=None):
        try:
            return super().add(key, value, timeout, version)
        except UNREACHABLE as exc:
            _unreachable("add", exc)
            return False

    def set_many(self, data, timeout=DEFAULT_TIMEOUT, version=None):
        try:
            return super().set_many(data, timeout, version)
        except UNREACHABLE as exc:
            _unreachable("set_many", exc)
            return list(data)

    def touch(self, key, timeout=DEFAULT_TIMEOUT, version=None):
        try:
            return super().touch(key, timeout, version)
        except UNREACHABLE as exc:
            _unreachable("touch", exc)
            return False

    # Invalidations: skipped too. Every cached entry carries a TTL (the platform settings 60 s;
    # candidates are keyed on the store's content generation, so they never outlive their data).
    def delete(self, key, version=None):
        try:
            return super().delete(key, version)
        except UNREACHABLE as exc:
            _unreachable("delete", exc)
            return False

    def delete_many(self, keys, version=None):
        try:
            return super().delete_many(keys, version)
        except UNREACHABLE as exc:
            _unreachable("delete_many", exc)
