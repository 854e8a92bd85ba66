"""The chunks' GIN indexes keep no pending list (migration 0010): a search's scans never read one."""

from __future__ import annotations

import pytest
from django.db import connection

pytestmark = pytest.mark.django_db

INDEXES = ("knowledge_chunk_acl_gin", "knowledge_chunk_tsv_gin")


def _pending_pages_cleaned(name: str) -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT gin_clean_pending_list(%s::regclass)", [name])
        return cursor.fetchone()[0]


def test_new_chunks_go_straight_into_the_indexes(make_record):
    with connection.cursor() as cursor:
        cursor.execute("SELECT relname, reloptions FROM pg_class WHERE relname = ANY(%s)", [list(INDEXES)])
        assert dict(cursor.fetchall()) == {name: ["fastupdate=off"] for name in INDEXES}
    for n in range(20):
        make_record(f"gin-{n}", " ".join(f"слово{n}x{i} отпуск бюджет" for i in range(40)), acl=[f"group:g{n}"])
    # nothing was pending: with fast update on, these inserts would have left pages to move
    assert [_pending_pages_cleaned(name) for name in INDEXES] == [0, 0]


def test_with_fast_update_the_same_inserts_leave_a_pending_list(make_record):
    """The check above can fail: the same inserts under GIN's default leave pages pending."""
    with connection.cursor() as cursor:
        for name in INDEXES:
            cursor.execute(f"ALTER INDEX {name} SET (fastupdate = on)")
    for n in range(20):
        make_record(f"gin-{n}", " ".join(f"слово{n}x{i} отпуск бюджет" for i in range(40)), acl=[f"group:g{n}"])
    assert all(_pending_pages_cleaned(name) > 0 for name in INDEXES)
