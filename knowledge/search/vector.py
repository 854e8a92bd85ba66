"""The vector candidate list: pgvector cosine similarity over the HNSW index, ACL in the SQL.

One statement. The planner picks the HNSW index for a broad identity (pgvector's iterative scan
keeps walking the graph until N rows pass the ACL) and an exact scan over the ACL's GIN bitmap for
a narrow one. The lexical candidates are re-scored by exact cosine in the same statement and
compete for the vector list too: an approximate index can miss a close neighbour, the lexical side
often has it (recall@10 +0.07–0.17 on the benchmark).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db.backends.utils import CursorWrapper

VECTOR_SQL = """
WITH h AS MATERIALIZED (
    SELECT id, 1 - (embedding <=> %(vec)s::vector) AS similarity
    FROM knowledge_chunks
    WHERE embedding IS NOT NULL AND acl && %(principals)s::text[]
    ORDER BY embedding <=> %(vec)s::vector
    LIMIT %(n)s
)
SELECT id, similarity FROM h
UNION
SELECT id, 1 - (embedding <=> %(vec)s::vector)
FROM knowledge_chunks
WHERE id = ANY(%(extra)s) AND embedding IS NOT NULL AND acl && %(principals)s::text[]
"""
# The semantic side of withheld: the nearest chunks to the topical words, visible or not.
VECTOR_ALL_SQL = """
SELECT id, 1 - (embedding <=> %(topic_vec)s::vector) AS similarity, acl && %(principals)s::text[] AS visible
FROM knowledge_chunks
WHERE embedding IS NOT NULL
ORDER BY embedding <=> %(topic_vec)s::vector
LIMIT %(topic_n)s
"""
# The HNSW settings, local to the transaction, sent in the same message as the vector statements:
# the statements of one message run as one transaction (also in autocommit), so no BEGIN/COMMIT.
HNSW_SETTINGS_SQL = """
SELECT set_config('hnsw.iterative_scan', 'relaxed_order', true), set_config('hnsw.ef_search', %(ef_search)s, true)
"""
# Candidate list width of the HNSW scan (pgvector's default is 40). Hash embeddings of short
# queries are a hard case for HNSW; bench/knowledge prints recall and latency for a sweep.
HNSW_EF_SEARCH = 250


def vector_literal(vector: Sequence[float]) -> str:
    return "[" + ",".join(f"{float(x):.7g}" for x in vector) + "]"


def ef_search(depth: int) -> int:
    """``hnsw.ef_search`` for a list ``depth`` deep: the scan must hold at least the list."""
    return max(HNSW_EF_SEARCH, depth)


def vector_list(
    cursor: CursorWrapper,
    vector: Sequence[float],
    principals: list[str],
    depth: int,
    floor: float,
    extra: Sequence[int] = (),
) -> list[int]:
    """The ``depth`` most similar visible chunks among the HNSW candidates and ``extra`` ids."""
    return vector_lists(cursor, vector, principals, depth, floor, extra)[0]


def vector_lists(
    cursor: CursorWrapper,
    vector: Sequence[float] | None,
    principals: list[str],
    depth: int,
    floor: float,
    extra: Sequence[int] = (),
    semantic: tuple[Sequence[float], int, float] | None = None,
    details: tuple[str, Sequence[int]] | None = None,
) -> tuple[list[int], list[int], dict[int, tuple[Any, ...]]]:
    """One message: the HNSW settings, the vector list (when ``vector``: the ``depth`` most similar
    visible chunks among the HNSW candidates and ``extra`` ids, similarity ≥ ``floor``) and the
    semantic side of withheld (when ``semantic`` = (topic vector, k, floor): the hidden chunks among
    the k nearest, visible or not, whose similarity reaches that floor).

    ``details`` = (columns over ``c`` the chunk and ``r`` its record, starting with ``c.id``; more
    ids): every row of both lists carries those columns, and a last statement fetches them for the
    other ids — returned as {chunk id: columns}, so no round trip is needed for them afterwards."""
    statements = [HNSW_SETTINGS_SQL]
    params: dict[str, Any] = {"ef_search": str(ef_search(depth)), "principals": principals}
    joined = (
        "SELECT s.similarity, {flag} {columns} FROM ({inner}) AS s JOIN knowledge_chunks c ON c.id = s.id "
        "JOIN knowledge_records r ON r.id = c.record_id"
    )
    if vector is not None:
        statements.append(joined.format(flag="", columns=details[0], inner=VECTOR_SQL) if details else VECTOR_SQL)
        params.update(vec=vector_literal(vector), n=depth, extra=list(extra))
    if semantic is not None:
        statements.append(
            joined.format(flag="s.visible,", columns=details[0], inner=VECTOR_ALL_SQL) if details else VECTOR_ALL_SQL
        )
        params.update(topic_vec=vector_literal(semantic[0]), topic_n=semantic[1])
    if details:
        statements.append(
            f"SELECT {details[0]} FROM knowledge_chunks c JOIN knowledge_records r "
            "ON r.id = c.record_id WHERE c.id = ANY(%(detail_ids)s)"
        )
        params["detail_ids"] = list(details[1])
    cursor.execute(";".join(statements), params)
    ranked: list[int] = []
    hidden: list[int] = []
    found: dict[int, tuple[Any, ...]] = {}
    if vector is not None:
        cursor.nextset()
        pairs = []  # (id, similarity)
        for row in cursor.fetchall():
            if details:
                found[row[1]] = row[1:]
                pairs.append((row[1], row[0]))
            else:
                pairs.append((row[0], row[1]))
        # relaxed_order may return neighbours slightly out of order, and extras come unordered: sort
        ranked = [
            chunk_id for chunk_id, _ in sorted((p for p in pairs if p[1] >= floor), key=lambda p: (-p[1], p[0]))[:depth]
        ]
    if semantic is not None:
        cursor.nextset()
        nearest = []  # (id, similarity, visible)
        for row in cursor.fetchall():
            if details:
                found[row[2]] = row[2:]
                nearest.append((row[2], row[0], row[1]))
            else:
                nearest.append((row[0], row[1], row[2]))
        # in similarity order, ties by id: the relaxed-order scan and the graph's state (dead tuples
        # of rolled-back rows stay in it until vacuum) must not decide the order of the hints
        hidden = [
            chunk_id
            for chunk_id, similarity, visible in sorted(nearest, key=lambda r: (-r[1], r[0]))
            if not visible and similarity >= semantic[2]
        ]
    if details:
        cursor.nextset()
        found.update((row[0], row) for row in cursor.fetchall())
    return ranked, hidden, found
