"""The Redis cache backend keeps one client per process, whatever thread asks."""

from __future__ import annotations

import threading

import pytest
from django.core.cache import cache, caches

pytestmark = [pytest.mark.integration]


def test_every_thread_shares_one_redis_client_and_sees_the_same_data():
    cache.set("shared-client-probe", "ok", 30)
    seen = {}

    def worker(name):
        backend = caches["default"]  # Django hands each thread its own cache object
        seen[name] = (backend, backend._cache, backend.get("shared-client-probe"))

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    backends = {id(entry[0]) for entry in seen.values()}  # kept alive in `seen`
    clients = {id(entry[1]) for entry in seen.values()}
    assert len(backends) == 3, "each thread has its own cache object"
    assert clients == {id(cache._cache)}, "but all of them talk through one client"
    assert {entry[2] for entry in seen.values()} == {"ok"}
