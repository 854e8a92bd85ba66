"""The cache keeps one ``redis.Redis`` per connection pool (bench/http: Django's backend made one
for every command, ≈ 3 % of the web process's CPU on ``GET /api/me``); it still reads and writes,
from any thread."""

from __future__ import annotations

import threading

import pytest
from django.core.cache import cache

pytestmark = [pytest.mark.integration]


def test_the_cache_reuses_its_redis_client_across_commands_and_threads():
    seen = []

    def commands():
        cache.set("cache-client-probe", threading.get_ident(), 30)
        assert cache.get("cache-client-probe") is not None
        seen.append(cache._cache.get_client(write=True))
        seen.append(cache._cache.get_client())

    threads = [threading.Thread(target=commands) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    commands()

    assert len(seen) == 8
    assert len({id(client) for client in seen}) == 1  # one server here: one pool, one client
    cache.delete("cache-client-probe")
