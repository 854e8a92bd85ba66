"""The vector candidate list: pgvector cosine similarity over the HNSW index, ACL in the SQL.

One statement. The planner picks the HNSW index for a broad identity (pgvector's iterative scan
keeps walking the graph until N rows pass the ACL) and an exact scan over the ACL's GIN bitmap for
a narrow one. The lexical candidates are re-scored by exact cosine in the same statement and
compete for the vector list too: an approximate index can miss a close neighbour, the lexical side
often has it (recall@10 +0.07–0.17 on the benchmark).
"""

from __future__ import annotations

from collections.abc import Sequence

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
# Candidate list width of the HNSW scan (pgvector's default is 40). Hash embeddings of short
# queries are a hard case for HNSW; bench/knowledge prints recall and latency for a sweep.
HNSW_EF_SEARCH = 250


def vector_literal(vector: Sequence[float]) -> str:
    return "[" + ",".join(f"{float(x):.7g}" for x in vector) + "]"


def ef_search(depth: int) -> int:
    """``hnsw.ef_search`` for a list ``depth`` deep: the scan must hold at least the list."""
    return max(HNSW_EF_SEARCH, depth)


def vector_list(cursor: CursorWrapper, vector: Sequence[float], principals: list[str], depth: int, floor: float,
                extra: Sequence[int] = (), configured: bool = False) -> list[int]:
    """The ``depth`` most similar visible chunks among the HNSW candidates and ``extra`` ids.

    ``configured``: the HNSW settings were already set in this transaction (by the lexical list)."""
    if not configured:
        cursor.execute("SELECT set_config('hnsw.iterative_scan', 'relaxed_order', true),"
                       " set_config('hnsw.ef_search', %s, true)", [str(ef_search(depth))])
    cursor.execute(VECTOR_SQL, {"vec": vector_literal(vector), "principals": principals, "n": depth,
                                "extra": list(extra)})
    # relaxed_order may return neighbours slightly out of order, and extras come unordered: sort
    ranked = sorted((row for row in cursor.fetchall() if row[1] >= floor), key=lambda row: (-row[1], row[0]))
    return [row[0] for row in ranked[:depth]]
