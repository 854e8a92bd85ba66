"""The named result columns of the search (``Detail``, ``NearestRow``, ``SemanticRow``, ``LevelRow``,
``WordRow``) name the columns their statements return at those positions, and ``Batch`` reads a
message's result sets back by the names they were appended under."""

from __future__ import annotations

import pytest
from django.db import connection

from knowledge.models import EMBEDDING_DIM
from knowledge.search import vector
from knowledge.search.batch import Batch
from knowledge.search.hybrid import DETAIL_COLUMNS, DETAILS_SQL, LEVEL_SIMILARITY, Detail
from knowledge.search.lexical import LevelRow, SideLists, lower_levels_statement
from knowledge.search.vector import NearestRow, SemanticRow
from knowledge.search.withheld import WORDS_SQL, WordRow

pytestmark = pytest.mark.django_db

PRINCIPALS = ["public"]
# The store's own dimension: a statement compares it with whatever vectors the database holds (a
# chunk or topic another test left embedded), and pgvector refuses to compare two dimensions.
QUERY_VECTOR = [0.5] * EMBEDDING_DIM
VEC = vector.vector_literal(QUERY_VECTOR)


def _columns(sql: str, params: dict) -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return [column.name for column in cursor.description]


def _assert_details_from(columns: list[str], start: int) -> None:
    """DETAIL_COLUMNS from ``start`` on: the named ones where ``Detail`` says."""
    details = columns[start:]
    assert details[Detail.CHUNK_ID] == "id"
    assert details[Detail.RECORD_ID] == "record_id"
    assert details[Detail.SOURCE_SYSTEM] == "source_system"
    assert details[Detail.AUTHOR_PRINCIPAL_ID] == "author_principal_id"
    assert details[Detail.VISIBLE] == "visible"
    assert details[Detail.NEVER_HINT] == "never_hint"
    assert len(details) == Detail.NEVER_HINT + 1


def test_the_details_statement_returns_the_detail_columns():
    _assert_details_from(_columns(DETAILS_SQL, {"principals": PRINCIPALS, "ids": []}), 0)


@pytest.mark.parametrize("exact", [False, True])
def test_the_nearest_statements_return_similarity_then_the_details(exact):
    plan = vector.NearestPlan(exact, vector.ef_search(8))
    statements, params = vector.nearest_message(QUERY_VECTOR, PRINCIPALS, 8, DETAIL_COLUMNS, plan=plan)
    (_settings, _), (sql, _) = statements
    columns = _columns(sql, params)
    assert columns[NearestRow.SIMILARITY] == "similarity"
    _assert_details_from(columns, NearestRow.CHUNK_ID)


def test_the_by_id_statement_returns_similarity_then_the_details():
    sql = vector.BY_ID_SQL.format(similarity=vector.EXTRA_SIMILARITY, columns=DETAIL_COLUMNS)
    columns = _columns(sql, {"principals": PRINCIPALS, "vec": VEC, "extra": [], "by_id": []})
    assert len(columns) == NearestRow.CHUNK_ID + Detail.NEVER_HINT + 1
    _assert_details_from(columns, NearestRow.CHUNK_ID)


def test_the_semantic_statement_returns_similarity_visible_then_the_details():
    sql, _ = vector.semantic_statement(DETAIL_COLUMNS, 8)
    columns = _columns(sql, {"principals": PRINCIPALS, "topic_vec": VEC})
    assert columns[SemanticRow.SIMILARITY] == "similarity"
    assert columns[SemanticRow.VISIBLE] == "visible"
    _assert_details_from(columns, SemanticRow.CHUNK_ID)


@pytest.mark.parametrize("one_pass", [False, True])
def test_the_lower_levels_statement_returns_its_columns_then_the_details(one_pass):
    statement = lower_levels_statement(
        SideLists([], [], set()), ["a", "b", "c"], PRINCIPALS, 8, 3, DETAIL_COLUMNS, LEVEL_SIMILARITY, one_pass=one_pass
    )
    assert statement is not None
    sql, params = statement
    columns = _columns(sql, {**params, "vec": VEC})
    assert [columns[LevelRow.FILTERED], columns[LevelRow.LEVEL], columns[LevelRow.SCORE]] == [
        "filtered",
        "level",
        "score",
    ]
    _assert_details_from(columns, LevelRow.CHUNK_ID)


def test_the_words_statement_returns_its_columns():
    columns = _columns(WORDS_SQL, {"words": ["отпуск"]})
    assert columns[WordRow.ORD] == "ord"
    assert columns[WordRow.LEXEMES] == "lexemes"
    assert len(columns) == WordRow.GENERATION + 1


def test_a_batch_reads_its_result_sets_back_by_name():
    # given a message of an unnamed statement between named ones, prepared and not
    batch = (
        Batch({"a": 1})
        .add("first", "SELECT %(a)s::int AS n", prepare=True)
        .add(None, "SELECT set_config('application_name', 'batch-test', true)", prepare=False)
        .add("empty", "SELECT 1 WHERE false", prepare=False)
        .add("last", "SELECT %(b)s::int AS n UNION ALL SELECT 3", prepare=False, params={"b": 2})
    )
    # when
    with connection.cursor() as cursor:
        sets = batch.run(cursor)
    # then
    assert sets == {"first": [(1,)], "empty": [], "last": [(2,), (3,)]}


def test_a_name_is_given_once_in_a_batch():
    batch = Batch().add("rows", "SELECT 1", prepare=False)
    with pytest.raises(ValueError):
        batch.add("rows", "SELECT 2", prepare=False)
