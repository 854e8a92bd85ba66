"""A restriction (a clause in ``acl_also``) reaches the chunks without a new index entry (migration 0017).

The trigger copies a record's access into its chunk rows. No index of ``knowledge_chunks`` covers
``acl_also``, so PostgreSQL can update such a row in place on its page (a heap-only tuple: no entry
in the HNSW graph or the GIN indexes) — provided the page has room for the new row version, which
the table's fillfactor leaves. Chunks here are the size of real ones (≈ 3.5 KB with their text,
tsvector and 384-dim embedding inline): at the default fillfactor two share a page and an update
has to move to another page, writing a new entry into every index.
"""

from __future__ import annotations

import random

import pytest
from django.db import connection, transaction

from knowledge.models import EMBEDDING_DIM

pytestmark = pytest.mark.django_db

CHUNKS = 12
WORDS = ["отпуск", "бюджет", "договор", "поставщик", "регламент", "сервер", "доступ", "отчёт", "квартал", "проект"]
ENDINGS = ["а", "ом", "ами", "ов", "е", "у"]


def _sql(query, params=None):
    with connection.cursor() as cursor:
        cursor.execute(query, params or [])
        return cursor.fetchall() if cursor.description else None


def _updates() -> tuple[int, int]:
    """This transaction's row updates of knowledge_chunks: (all, in place on their page)."""
    ((updated, hot),) = _sql(
        "SELECT pg_stat_get_xact_tuples_updated('knowledge_chunks'::regclass), "
        "pg_stat_get_xact_tuples_hot_updated('knowledge_chunks'::regclass)"
    )
    return updated, hot


def _record_with_real_sized_chunks(make_record) -> int:
    rid = make_record("restricted.md", "Короткий текст", acl=["everyone"])
    _sql("DELETE FROM knowledge_chunks WHERE record_id = %s", [rid])
    rng = random.Random(7)
    for ordinal in range(CHUNKS):
        words = (f"{rng.choice(WORDS)}{rng.choice(ENDINGS)}" for _ in range(70))
        text = " ".join(f"{word} и в на" if n % 3 == 0 else word for n, word in enumerate(words))
        vector = "[" + ",".join(f"{rng.uniform(-1, 1):.6f}" for _ in range(EMBEDDING_DIM)) + "]"
        _sql(
            "INSERT INTO knowledge_chunks (record_id, ordinal, heading, text, embedding) VALUES (%s, %s, %s, %s, %s)",
            [rid, ordinal, "Раздел", text, vector],
        )
    ((smallest, largest),) = _sql(
        "SELECT min(pg_column_size(c.*)), max(pg_column_size(c.*)) FROM knowledge_chunks c WHERE record_id = %s",
        [rid],
    )
    assert 3000 < smallest <= largest < 4000, (smallest, largest)
    return rid


def test_a_clause_reaches_every_chunk_in_place(make_record):
    rid = _record_with_real_sized_chunks(make_record)
    before = _updates()
    _sql("UPDATE knowledge_records SET acl_also = '[[\"group:finance\"]]' WHERE id = %s", [rid])
    updated, hot = (now - then for now, then in zip(_updates(), before, strict=True))
    assert (updated, hot) == (CHUNKS, CHUNKS)
    # the copy is exact (the trigger's invariant) and search's access test follows it
    assert _sql("SELECT DISTINCT acl_also::text FROM knowledge_chunks WHERE record_id = %s", [rid]) == [
        ('[["group:finance"]]',)
    ]
    visible = (
        "SELECT count(*) FROM knowledge_chunks c WHERE record_id = %s AND knowledge_acl_allows(c.acl, c.acl_also, %s)"
    )
    assert _sql(visible, [rid, ["everyone"]]) == [(0,)]
    assert _sql(visible, [rid, ["everyone", "group:finance"]]) == [(CHUNKS,)]


@pytest.mark.django_db(transaction=True)
def test_the_next_change_finds_the_room_again(make_record):
    """A later change reuses the page once the first change's old row versions are gone: a vacuum
    (autovacuum's, here one by hand) or any reader of the page once no transaction that began
    before the change is still running removes them."""
    rid = _record_with_real_sized_chunks(make_record)
    _sql("UPDATE knowledge_records SET acl_also = '[[\"group:finance\"]]' WHERE id = %s", [rid])
    _sql("VACUUM knowledge_chunks")
    with transaction.atomic():
        before = _updates()
        _sql("UPDATE knowledge_records SET acl_also = NULL WHERE id = %s", [rid])
        updated, hot = (now - then for now, then in zip(_updates(), before, strict=True))
    assert (updated, hot) == (CHUNKS, CHUNKS)
    assert _sql("SELECT DISTINCT acl_also FROM knowledge_chunks WHERE record_id = %s", [rid]) == [(None,)]


def test_the_table_keeps_the_room():
    ((options,),) = _sql("SELECT reloptions FROM pg_class WHERE relname = 'knowledge_chunks'")
    assert "fillfactor=50" in options
