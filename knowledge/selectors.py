"""Small reads of the Knowledge Store, the ACL inside every statement (KS-7; the identity check).

Search lives in ``knowledge.search``, the graph in ``knowledge.graph``, SQL in ``knowledge.sql``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import ParamSpec, TypeVar

from django.db import connection

from achilles.errors import ValidationFailed
from knowledge.contracts import Identity
from knowledge.models import Chunk, Record

P = ParamSpec("P")
R = TypeVar("R")


def principals_of(identity: Identity) -> list[str]:
    """The identity's principals, sorted (the ACL operand of every statement); not an Identity → 422."""
    if not isinstance(identity, Identity):
        raise ValidationFailed("identity must be a knowledge.facade.Identity", code="invalid_identity")
    return sorted(identity.principals)


def is_empty() -> bool:
    """True until the first chunk is stored; one index probe, no cache (flips with no restart)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT NOT EXISTS (SELECT 1 FROM knowledge_chunks)")
        row = cursor.fetchone()
        return bool(row[0]) if row else True


def generation() -> int:
    """The store's content generation (migration 0006): it moves, by trigger, on every change of
    what search can return or who may see it. One primary-key read."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT n FROM knowledge_generation WHERE id = 1")
        row = cursor.fetchone()
        return int(row[0]) if row else 0


def visible_records(record_ids: Sequence[int | None], identity: Identity) -> frozenset[int]:
    """Those of ``record_ids`` that exist and that ``identity`` may see now (one indexed query)."""
    principals = principals_of(identity)
    ids = sorted({int(i) for i in record_ids if i is not None})
    if not ids:
        return frozenset()
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT id FROM knowledge_records WHERE id = ANY(%s) AND knowledge_acl_allows(acl, acl_also, %s::text[])",
            [ids, principals],
        )
        return frozenset(row[0] for row in cursor.fetchall())


def readable_counts_by_source(identity: Identity) -> dict[str, int]:
    """``{source_system: records the identity may read}``; sources with none are absent, so nothing
    of what the identity cannot read (not even that a source holds something) is told."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT source_system, count(*) FROM knowledge_records WHERE knowledge_acl_allows(acl, acl_also, %s::text[])"
            " GROUP BY source_system",
            [principals_of(identity)],
        )
        return {row[0]: int(row[1]) for row in cursor.fetchall()}


@dataclass(frozen=True)
class StoreCounts:
    """How many records and chunks the store holds (all of them: the admins' status page)."""

    records: int
    chunks: int


def record_and_chunk_counts() -> StoreCounts:
    """The store's record and chunk counts, ACL aside (``GET /api/knowledge/status``, admins)."""
    return StoreCounts(records=Record.objects.count(), chunks=Chunk.objects.count())


def timed(fn: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> tuple[R, float]:
    """(result, milliseconds) — used by the admin preview and the benchmark."""
    started = time.perf_counter()
    result = fn(*args, **kwargs)
    return result, (time.perf_counter() - started) * 1000
