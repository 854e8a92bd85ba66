"""search() prepares its lexical statements and details by id (``achilles.prepared``): the pinned
results hold with them prepared under a generic plan, under custom plans, and not prepared at all;
its HNSW statements and the words' record counts, whose rows a plan decides, are never prepared.

Transactional, so that the parallel path (``test_search_parallel.py``) is the one taken, as in
production; the pins inside a transaction are ``test_search_pinned.py``'s (prepared by default).
"""

from __future__ import annotations

import pytest
from django.db import connection

from achilles import prepared
from knowledge.search.lexical import LEXICAL_FIRST_SQL
from knowledge.search.withheld import WORDS_SQL
from tests.knowledge.integration.test_search_pinned import _build, _searched, assert_pinned

pytestmark = pytest.mark.django_db(transaction=True)


def _held() -> dict[str, str]:
    """{name: the text that prepared it} (the message's text: PREPAREs of one message share it)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT name, statement FROM pg_prepared_statements")
        return dict(cursor.fetchall())


def test_pinned_results_with_and_without_prepared_statements(make_record, hash_embedder, settings, monkeypatch):
    settings.WITHHELD_HINTS_PER_HOUR = 10_000  # the hint policy's hourly cap is not under test here
    settings.KS_SEARCH_PARALLEL = True
    monkeypatch.setattr(prepared, "ENABLED", True)
    where, queries = _build(make_record)
    assert not connection.in_atomic_block
    try:
        for mode in ("force_generic_plan", "force_custom_plan"):
            with connection.cursor() as cursor:
                cursor.execute(f"SET plan_cache_mode = {mode}")
            assert_pinned(_searched(where, queries))
    finally:
        with connection.cursor() as cursor:
            cursor.execute("RESET plan_cache_mode")

    held = _held()
    texts = " ".join(held.values())
    for sql in (LEXICAL_FIRST_SQL, WORDS_SQL):
        assert prepared.shape(sql)[0] in held
    assert "UNION ALL" in texts and "JOIN knowledge_records r ON r.id = c.record_id" in texts  # levels, details
    # a generic plan ignores how selective the ACL is: the HNSW statements keep their custom plans
    assert "ORDER BY embedding" not in texts and "hnsw." not in texts
    assert "count(DISTINCT s.record_id)" not in texts  # which chunks its LIMIT counts is the plan's

    monkeypatch.setattr(prepared, "ENABLED", False)
    with connection.cursor() as cursor:
        cursor.execute("DEALLOCATE ALL")
        prepared.forget(cursor)
    assert_pinned(_searched(where, queries))
    assert _held() == {}
