"""A selective ACL is read exactly where the planner would walk the HNSW graph filtering by it.

At 300k chunks the planner sends a 1 % identity into the graph (pgvector's cost model does not see
how far a filtered walk goes): hundreds of ms and an approximate list. ``nearest_exact`` asks the
planner what it would do and, when that is a graph walk filtered by the ACL expecting at most
``EXACT_MAX_ROWS`` rows, search sends the exact statement instead. A small table makes the planner
walk the graph only when the other scans are turned off, which is what these tests do (inside
their transaction) to put it where the 300k store puts it.
"""

from __future__ import annotations

import math

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from achilles import prepared
from knowledge import facade
from knowledge.search import vector
from tests.knowledge.conftest import identity_of

pytestmark = pytest.mark.django_db

RARE = ["group:rare"]
TOPICS = ["отпуск", "принтер", "бюджет", "доступ", "сервер", "договор"]


@pytest.fixture(autouse=True)
def _fresh_verdicts():
    vector._exact_plans.clear()
    yield
    vector._exact_plans.clear()


@pytest.fixture
def corpus(hash_embedder, make_record):
    """40 records everyone sees, 4 that only ``group:rare`` sees and one public; analysed, and the
    planner left only the graph for an ordered read (as at 300k chunks)."""
    for i in range(40):
        make_record(f"open/{i}.md", f"Документ {i}: {TOPICS[i % 6]} и {TOPICS[(i + 1) % 6]} компании.")
    for i in range(4):
        make_record(f"rare/{i}.md", f"Закрытый документ {i}: {TOPICS[i]} и {TOPICS[i + 2]}.", acl=RARE)
    make_record("public.md", "Открытый документ: отпуск и принтер.", acl=["public"])
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE knowledge_chunks")
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute("SET LOCAL enable_bitmapscan = off")
        cursor.execute("SET LOCAL enable_sort = off")


def _nearest_statements(queries) -> list[str]:
    """The vector messages sent (not the planner's verdict, asked first: EXPLAIN)."""
    return [q["sql"] for q in queries if "WITH h AS MATERIALIZED" in q["sql"] and "EXPLAIN" not in q["sql"]]


def test_the_planner_walking_the_graph_for_few_visible_rows_means_exact(corpus, monkeypatch):
    monkeypatch.setattr(vector, "EXACT_MAX_ROWS", 20)
    with connection.cursor() as cursor:
        cursor.execute(vector.NEAREST_PLAN_SQL, {"vec": "[1]", "principals": RARE, "n": 20})
        plan = cursor.fetchone()[0][0]["Plan"]
        # the premise: the planner's plan is the graph, filtered by the ACL, expecting few rows
        rows = vector._filtered_walk_rows(plan)
        assert rows is not None and rows <= 20
        assert vector.nearest_exact(cursor, RARE, 20)
        # many visible rows: the walk is the cheaper one, the graph stays
        assert not vector.nearest_exact(cursor, ["everyone"], 20)
        # `{public}` has a partial index of its own: no ACL filter, no walk to avoid
        assert not vector.nearest_exact(cursor, ["public"], 20)
        vector._exact_plans.clear()
        monkeypatch.setattr(vector, "EXACT_MAX_ROWS", 0)
        assert not vector.nearest_exact(cursor, RARE, 20)


def test_search_sends_the_exact_statement_for_the_selective_acl_and_the_graph_for_the_broad(corpus, monkeypatch):
    monkeypatch.setattr(vector, "EXACT_MAX_ROWS", 20)
    # the statements' text, not ``EXECUTE name``: the exact statement is prepared once per connection,
    # so a search of an earlier test on this connection left only its name to see (test_search_prepared
    # covers the prepared path)
    monkeypatch.setattr(prepared, "ENABLED", False)
    with CaptureQueriesContext(connection) as rare:
        facade.search("отпуск принтер", identity_of(*RARE), k=4)
    with CaptureQueriesContext(connection) as broad:
        facade.search("отпуск принтер", identity_of("everyone"), k=4)
    (rare_sql,) = _nearest_statements(rare.captured_queries)
    (broad_sql,) = _nearest_statements(broad.captured_queries)
    assert "ORDER BY similarity DESC, id" in rare_sql
    assert "ORDER BY similarity DESC, id" not in broad_sql and "ORDER BY embedding <=>" in broad_sql
    # and the exact statement's plan reads no graph, even with every other scan turned off
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN (FORMAT JSON) " + vector.NEAREST_EXACT_SQL, {"vec": "[1]", "principals": RARE, "n": 20})
        assert "hnsw" not in str(cursor.fetchone()[0])


def test_the_exact_statement_returns_the_exact_nearest_visible_chunks(corpus, make_record, monkeypatch):
    """The list the exact path returns is the brute-force one: the visible chunks by cosine
    similarity — computed here in Python from the stored embeddings — the nearest ``depth`` of them."""
    monkeypatch.setattr(vector, "EXACT_MAX_ROWS", 20)
    from knowledge.search.embedding import embed_query, search_embedding_config

    # similarities to the query spread apart (the shared words vary), so the order is not a tie's
    for i, text in enumerate(["бюджет доступ бюджет", "бюджет доступ сервер отпуск", "бюджет сервер договор принтер"]):
        make_record(f"rare/more-{i}.md", text, acl=RARE)
    query_vector = embed_query(search_embedding_config(), "бюджет доступ")
    with connection.cursor() as cursor:
        cursor.execute("SELECT id, embedding::text FROM knowledge_chunks WHERE acl && %s::text[]", [RARE])
        stored = {chunk_id: [float(x) for x in text.strip("[]").split(",")] for chunk_id, text in cursor.fetchall()}

        def cosine(a, b):
            return sum(x * y for x, y in zip(a, b, strict=True)) / (
                math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
            )

        expected = sorted(stored, key=lambda chunk_id: -cosine(query_vector, stored[chunk_id]))
        assert vector.nearest_exact(cursor, RARE, 20)
        found = vector.vector_list(cursor, query_vector, RARE, 3, -1.0)
    assert len(stored) == 7 and found == expected[:3]


def test_a_walk_over_a_store_bigger_than_the_base_widens_its_list_and_search_sends_it(corpus, monkeypatch):
    """A graph walk filtered by the ACL gets the ef ``walk_ef`` gives for the store's size and the
    ACL's share (here the 45-chunk corpus stands for a store 4.5× the base size); an exact read and
    the partial index's walk keep the default; the search's HNSW settings carry the wider ef."""
    monkeypatch.setattr(vector, "EXACT_MAX_ROWS", 20)
    monkeypatch.setattr(vector, "EF_BASE_ROWS", 10)
    monkeypatch.setattr(prepared, "ENABLED", False)
    with connection.cursor() as cursor:
        cursor.execute(vector.STORE_ROWS_SQL)
        (store,) = cursor.fetchone()
        cursor.execute(vector.NEAREST_PLAN_SQL, {"vec": "[1]", "principals": ["everyone"], "n": 20})
        visible = vector._filtered_walk_rows(cursor.fetchone()[0][0]["Plan"])
        broad = vector.nearest_plan(cursor, ["everyone"], 20)
        rare = vector.nearest_plan(cursor, RARE, 20)
        public = vector.nearest_plan(cursor, ["public"], 20)
    default = vector.ef_search(20)
    assert store >= 40 and visible is not None
    assert broad == vector.NearestPlan(False, vector.walk_ef(default, store, visible, 20))
    assert broad.ef > default
    assert rare == vector.NearestPlan(True, default)
    assert public == vector.NearestPlan(False, default)
    with CaptureQueriesContext(connection) as captured:
        facade.search("отпуск принтер", identity_of("everyone"), k=4)
    settings = [q["sql"] for q in captured.captured_queries if "set_config('hnsw.ef_search'" in q["sql"]]
    nearest = [sql for sql in settings if "WITH h AS MATERIALIZED" in sql]
    assert nearest and all(f"set_config('hnsw.ef_search', '{broad.ef}', true)" in sql for sql in nearest)
    # the semantic side of withheld, in the same message, walks at the default ef (as it does beside)
    semantic = [sql for sql in nearest if "s.visible," in sql]
    assert semantic
    for sql in semantic:
        assert sql.index(f"set_config('hnsw.ef_search', '{default}', true)") < sql.index("s.visible,")
