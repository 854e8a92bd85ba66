"""search() prepares its lexical statements, details by id, the exact nearest chunks and the
semantic side of withheld (``achilles.prepared``): the pinned results hold with them prepared under
generic plans, under custom plans, and not prepared at all, on the parallel path and on one
connection. The ACL-filtered walk of the graph and the words' record counts, whose rows a plan
decides, are never prepared.

Transactional, so that the parallel path (``test_search_parallel.py``) is the one taken, as in
production; the pins inside a transaction are ``test_search_pinned.py``'s (prepared by default).
"""

from __future__ import annotations

import re

import pytest
from django.db import connection

from achilles import prepared
from knowledge.search import vector
from knowledge.search.hybrid import DETAIL_COLUMNS
from knowledge.search.lexical import LEXICAL_FIRST_SQL
from knowledge.search.withheld import LEXEME_RECORDS_SQL, WORDS_SQL
from tests.knowledge.integration.test_search_pinned import _build, _searched, assert_pinned

pytestmark = pytest.mark.django_db(transaction=True)


def _held() -> dict[str, str]:
    """{name: the text that prepared it} on the request's connection (PREPAREs of one message
    share the message's text)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT name, statement FROM pg_prepared_statements")
        return dict(cursor.fetchall())


def _every_connection_held() -> set[str]:
    with prepared._prepared_lock:
        return set().union(*prepared._prepared.values())


def test_pinned_results_with_and_without_prepared_statements(make_record, hash_embedder, settings, monkeypatch):
    settings.WITHHELD_HINTS_PER_HOUR = 10_000  # the hint policy's hourly cap is not under test here
    monkeypatch.setattr(prepared, "ENABLED", True)
    where, queries = _build(make_record)
    assert not connection.in_atomic_block
    try:
        # on one connection every statement runs on the request's, under the mode set here
        for parallel in (True, False):
            settings.KS_SEARCH_PARALLEL = parallel
            for mode in ("force_generic_plan", "force_custom_plan"):
                with connection.cursor() as cursor:
                    cursor.execute(f"SET plan_cache_mode = {mode}")
                assert_pinned(_searched(where, queries))
    finally:
        with connection.cursor() as cursor:
            cursor.execute("RESET plan_cache_mode")

    held = _held()
    for sql in (LEXICAL_FIRST_SQL, WORDS_SQL, vector.semantic_statement(DETAIL_COLUMNS, 8)[0]):
        assert prepared.shape(sql)[0] in held
    texts = " ".join(held.values())
    assert "UNION ALL" in texts and "c.id = ANY($" in texts  # the lower levels, the details by id
    everywhere = _every_connection_held()
    walk = vector.JOINED.format(flag="", columns=DETAIL_COLUMNS, inner=vector.NEAREST_SQL)
    assert prepared.shape(walk)[0] not in everywhere
    assert not any(prepared.shape(sql)[0] in everywhere for sql in (vector.HNSW_SETTINGS_SQL, LEXEME_RECORDS_SQL))
    assert "count(DISTINCT s.record_id)" not in texts  # which chunks its LIMIT counts is the plan's

    monkeypatch.setattr(prepared, "ENABLED", False)
    with connection.cursor() as cursor:
        cursor.execute("DEALLOCATE ALL")
        prepared.forget(cursor)
    assert_pinned(_searched(where, queries))
    assert _held() == {}


def _plan(mode: str, execute: str, params: dict) -> list[str]:
    """The plan's nodes; a sort of the whole (small) table is costed out, as at scale."""
    with connection.cursor() as cursor:
        cursor.execute(f"SET plan_cache_mode = {mode}; SET enable_sort = off")
        cursor.execute("EXPLAIN " + execute, params)
        nodes = [re.sub(r"\(.*", "", row[0]).strip(" ->") for row in cursor.fetchall()]
        cursor.execute("RESET plan_cache_mode; RESET enable_sort")
    return [node for node in nodes if node]


def test_the_semantic_side_prepared_walks_the_graph_as_a_custom_plan_does(make_record, hash_embedder):
    """Its rows are the graph's (approximate): a generic plan must read them the same way — with the
    LIMIT written in, the planner knows how few rows it returns. (The exact nearest chunks are
    ordered totally: any plan returns the same rows, as the pins above show.)"""
    _build(make_record)
    with connection.cursor() as cursor:
        # the statistics of this corpus, whatever earlier tests left behind in the tables (dead rows)
        cursor.execute("ANALYZE knowledge_chunks, knowledge_records, knowledge_source_policies")
    vec = vector.vector_literal([0.05] * 384)
    sql = vector.semantic_statement(DETAIL_COLUMNS, 8)[0]
    with connection.cursor() as cursor:
        execute = prepared.executable(cursor, [(sql, True)])[0]
    params = {"topic_vec": vec, "principals": ["public"]}
    generic = _plan("force_generic_plan", execute, params)
    assert generic == _plan("force_custom_plan", execute, params)
    assert any("Index Scan using knowledge_chunk_emb_hnsw32" in node for node in generic)
