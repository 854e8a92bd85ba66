"""Order and cut (QE-7): v1 keeps the Knowledge Store's RRF order; no re-scoring here.

A cross-encoder reranker is v2. Ties are broken by (rank, -score, record_id, chunk_id), so the
same candidates always come out in the same order, bit for bit.
"""

from __future__ import annotations

from collections.abc import Sequence

from knowledge.facade import Candidate


def rrf_order(candidates: Sequence[Candidate]) -> list[Candidate]:
    return sorted(candidates, key=lambda c: (c.rank, -c.score, c.record_id, c.chunk_id))


def order_and_cut(candidates: Sequence[Candidate], limit: int) -> tuple[list[Candidate], list[Candidate]]:
    """(kept, cut): the first ``limit`` in RRF order, and the rest (never packed, never citable)."""
    ordered = rrf_order(candidates)
    limit = max(0, limit)
    return ordered[:limit], ordered[limit:]
