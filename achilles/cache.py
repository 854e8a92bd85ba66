"""The Redis cache backend with one client (and connection pool) per process.

Django keeps one cache object per thread, and under ASGI every request runs its sync part on a
thread of its own (asgiref's ThreadSensitiveContext), so the stock backend opened a fresh Redis
connection for nearly every request (bench/chat: ~4 % of the server's CPU went to connecting).
redis-py's pool is thread-safe and re-creates itself after a fork, so one per process is enough.
"""

from __future__ import annotations

import threading

from django.core.cache.backends.redis import RedisCache, RedisCacheClient
from django.utils.functional import cached_property

_CLIENTS: dict[tuple, RedisCacheClient] = {}
_LOCK = threading.Lock()


class SharedRedisCache(RedisCache):
    @cached_property
    def _cache(self) -> RedisCacheClient:
        key = (tuple(self._servers), repr(sorted(self._options.items())))
        with _LOCK:
            client = _CLIENTS.get(key)
            if client is None:
                client = _CLIENTS[key] = self._class(self._servers, **self._options)
        return client
