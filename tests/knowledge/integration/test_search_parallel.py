"""search() outside a transaction: the vector statements on pooled connections of their own.

The nearest visible chunks and the semantic side of withheld run beside the lexical statements.
The results must be exactly the pinned ones (``test_search_pinned.py``) on every path: in parallel,
with the pool exhausted (a job gives up after ``POOL_WAIT_SECONDS`` and the request's connection
runs its statement itself), and with the parallel path turned off. The corpus is committed (a
second connection cannot see a test transaction's rows), so this test is transactional.
"""

from __future__ import annotations

import json
import time

import pytest
from django.db import connection

from knowledge.search import hybrid, vector
from tests.knowledge.integration.test_search_pinned import PINNED, _build, _searched, assert_pinned

pytestmark = pytest.mark.django_db(transaction=True)


def _settled(counter: str, expected: int) -> bool:
    """The job counter reaches ``expected`` (a job whose rows went unused may end after its search)."""
    deadline = time.monotonic() + 5
    while vector.beside_jobs[counter] < expected and time.monotonic() < deadline:
        time.sleep(0.01)
    return vector.beside_jobs[counter] == expected


def test_every_path_returns_the_pinned_results(make_record, hash_embedder, settings, monkeypatch):
    settings.WITHHELD_HINTS_PER_HOUR = 10_000  # the hint policy's hourly cap is not under test here
    where, queries = _build(make_record)
    assert not connection.in_atomic_block and connection.pool is not None

    settings.KS_SEARCH_PARALLEL = True
    # a job waits for a connection as long as it takes (the pool grows): every one runs beside
    monkeypatch.setattr(vector, "POOL_WAIT_SECONDS", 10.0)
    ran = vector.beside_jobs["ran"]
    assert_pinned(_searched(where, queries))
    # every search took the parallel path: the nearest chunks and the semantic side, two jobs each
    assert _settled("ran", ran + 2 * 4 * len(queries))

    # the pool at its limit: search does not start the jobs, all stays on the request's connection;
    # and a job that finds no connection after all (the pool filled meanwhile) gives up after
    # POOL_WAIT_SECONDS and the request's connection runs its statement itself
    monkeypatch.setattr(vector, "POOL_WAIT_SECONDS", 0.01)
    pool = connection.pool
    pinned = json.loads(PINNED.read_text())
    held = []
    try:
        while pool.get_stats().get("pool_size", 0) < pool.max_size or pool.get_stats().get("pool_available", 0):
            held.append(pool.getconn(timeout=5))
        assert hybrid.parallel_pool() is None
        jobs = dict(vector.beside_jobs)
        observed = _searched(where, queries[:5])
        assert observed == {key: pinned[key] for key in observed}
        assert vector.beside_jobs == jobs

        monkeypatch.setattr(hybrid, "parallel_pool", lambda: pool)
        gave_up = vector.beside_jobs["no_connection"]
        observed = _searched(where, queries[5:10])
        assert observed == {key: pinned[key] for key in observed}
        assert _settled("no_connection", gave_up + 2 * 4 * 5)
    finally:
        for conn in held:
            pool.putconn(conn)
        monkeypatch.undo()

    settings.KS_SEARCH_PARALLEL = False
    ran = vector.beside_jobs["ran"]
    assert_pinned(_searched(where, queries))
    assert vector.beside_jobs["ran"] == ran


def test_a_dead_pooled_connection_is_handed_back_not_an_error(make_record, hash_embedder, settings):
    """The jobs beside take pooled connections without the pool's health check (a round trip the
    search would wait for): one the server has closed fails its statement, and the request's
    connection runs it instead — the same pinned results, no error."""
    settings.WITHHELD_HINTS_PER_HOUR = 10_000
    settings.KS_SEARCH_PARALLEL = True
    where, queries = _build(make_record)
    pinned = json.loads(PINNED.read_text())
    observed = _searched(where, queries[:3])  # the pool now holds idle connections beside this one
    assert observed == {key: pinned[key] for key in observed}
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid() AND state = 'idle'"
        )
        assert cursor.fetchone()[0] >= 1
    broken = vector.beside_jobs["broken"]
    observed = _searched(where, queries[3:8])
    assert observed == {key: pinned[key] for key in observed}
    assert vector.beside_jobs["broken"] > broken
