"""The ASGI application reuses its requests' threads (issue 15: CPU per chat turn).

Django made a thread per request (asgiref's ``ThreadSensitiveContext``) and joined it at the end;
``InlineHooksASGIHandler`` hands each request an idle one instead. What must not change: a request
finds no database connection left open by the one before it on the same thread (``request_finished``
gives it back to the pool), concurrent requests never share a thread, and the pool gets every
connection back.
"""

from __future__ import annotations

import asyncio
import json
import threading

import pytest
from django.db import connection
from django.test import override_settings

from achilles.inline_middleware import InlineHooksASGIHandler
from tests.achilles.integration import request_threads_urls
from tests.achilles.integration.test_inline_middleware import _call

pytestmark = [
    pytest.mark.integration,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("threads_urlconf"),
]


@pytest.fixture
def threads_urlconf():
    with override_settings(ROOT_URLCONF="tests.achilles.integration.request_threads_urls"):
        yield


def _pool_in_use() -> int:
    pool = connection.pool
    if pool is None:
        return 0
    stats = pool.get_stats()
    return stats["pool_size"] - stats["pool_available"]


def test_sequential_requests_reuse_one_thread_and_find_no_connection_left_open():
    app = InlineHooksASGIHandler()
    in_use = _pool_in_use()

    async def requests():
        return [json.loads((await _call(app, "GET", "/probe"))[2]) for _ in range(5)]

    answers = asyncio.run(requests())
    # The last request's end (its request_finished) is queued on its thread, not waited for: what
    # was queued there before this no-op has run once it has.
    for executor in app._idle_executors:
        executor.submit(lambda: None).result(timeout=10)

    assert len({a["thread"] for a in answers}) == 1  # one thread, reused (Django's own made five)
    assert not any(a["found_open"] for a in answers)  # each request's connection went back at its end
    assert _pool_in_use() == in_use  # and back into the pool: none held by the idle thread


def test_concurrent_requests_never_share_a_thread():
    app = InlineHooksASGIHandler()
    request_threads_urls.MEETING.reset()

    async def requests():
        answers = await asyncio.gather(*(_call(app, "GET", "/slow") for _ in range(3)))
        later = await _call(app, "GET", "/probe")
        assert [a[0] for a in answers] == [200, 200, 200]  # they met: side by side, not queued
        return [json.loads(a[2]) for a in answers], json.loads(later[2])

    loop = asyncio.new_event_loop()
    try:
        concurrent, later = loop.run_until_complete(requests())
    finally:
        loop.close()

    assert len({a["thread"] for a in concurrent}) == 3
    assert later["thread"] in {a["thread"] for a in concurrent} and not later["found_open"]


def test_the_idle_threads_are_bounded(monkeypatch):
    from achilles import inline_middleware

    monkeypatch.setattr(inline_middleware, "IDLE_REQUEST_THREADS_MAX", 1)
    app = InlineHooksASGIHandler()

    async def requests():
        await asyncio.gather(*(_call(app, "GET", "/slow") for _ in range(3)))

    asyncio.run(requests())
    assert len(app._idle_executors) == 1


def test_a_sync_view_crosses_to_its_thread_once_with_the_request_signals_around_it(monkeypatch):
    from asgiref import sync as asgiref_sync
    from django.core.asgi import ASGIHandler
    from django.core.signals import request_finished, request_started

    hops = 0
    call = asgiref_sync.SyncToAsync.__call__

    async def counted(self, *args, **kwargs):
        nonlocal hops
        hops += 1
        return await call(self, *args, **kwargs)

    monkeypatch.setattr(asgiref_sync.SyncToAsync, "__call__", counted)
    seen: list[tuple[str, int]] = []

    def started(**kwargs):
        seen.append(("started", threading.get_ident()))

    def finished(**kwargs):
        seen.append(("finished", threading.get_ident()))

    request_started.connect(started)
    request_finished.connect(finished)
    try:

        def drained(app) -> None:
            for executor in getattr(app, "_idle_executors", []):
                executor.submit(lambda: None).result(timeout=10)  # what was queued there has run

        def one(app) -> tuple[int, dict]:
            nonlocal hops
            asyncio.run(_call(app, "GET", "/probe"))  # warm
            drained(app)
            hops = 0
            seen.clear()
            answer = json.loads(asyncio.run(_call(app, "GET", "/probe"))[2])
            drained(app)
            return hops, answer

        ours_hops, ours = one(InlineHooksASGIHandler())
        ours_seen = list(seen)
        _, theirs = one(ASGIHandler())
        theirs_seen = list(seen)
    finally:
        request_started.disconnect(started)
        request_finished.disconnect(finished)

    # Django's own crosses three times (request_started, the view, response.close) besides its
    # middleware's hops; ours once, the view's, with request_started's receivers first in it
    assert ours_hops == 1
    assert ours_seen == [("started", ours["thread"]), ("finished", ours["thread"])]
    assert theirs_seen == [("started", theirs["thread"]), ("finished", theirs["thread"])]
    assert not ours["found_open"]
