"""Reciprocal Rank Fusion and the withheld computation (KS-3/4). Pure functions, no ORM.

``rrf`` fuses ranked lists of chunk ids: score(c) = Σ 1/(K + rank_in_list). Ties are broken by
the best single-list rank, then by chunk id, so equal inputs always give the same order.

Withheld: a hidden record is «relevant» when one of its chunks would make the top k of the same
fused search run without the ACL filter. Each side returns its visible top-N and its hidden top-N
with their raw scores; merging the two by score reproduces the unfiltered top-N exactly, so the
unfiltered fusion needs no third query.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

RRF_K = 60


@dataclass(frozen=True)
class Hit:
    """A chunk in one candidate list with the list's raw score (higher = better)."""

    chunk_id: int
    score: float


def rrf(lists: Sequence[Sequence[int]], *, k: int = RRF_K) -> list[tuple[int, float]]:
    """Fuse ranked lists of chunk ids → [(chunk_id, score)] best first, stable tie-break."""
    scores: dict[int, float] = {}
    best_rank: dict[int, int] = {}
    for ranked in lists:
        seen: set[int] = set()
        for position, chunk_id in enumerate(ranked, start=1):
            if chunk_id in seen:  # a list counts each chunk once
                continue
            seen.add(chunk_id)
            scores[chunk_id] = scores.get(chunk_id, 0.0) + 1.0 / (k + position)
            best_rank[chunk_id] = min(best_rank.get(chunk_id, position), position)
    return sorted(scores.items(), key=lambda item: (-item[1], best_rank[item[0]], item[0]))


def merge_by_score(visible: Sequence[Hit], hidden: Sequence[Hit], limit: int) -> list[int]:
    """The unfiltered top ``limit`` of one side, rebuilt from its visible and hidden top lists."""
    merged = sorted([*visible, *hidden], key=lambda hit: (-hit.score, hit.chunk_id))
    return [hit.chunk_id for hit in merged[:limit]]


def withheld_chunk_ids(*, visible: Sequence[Sequence[Hit]], hidden: Sequence[Sequence[Hit]], k: int,
                       depth: int) -> list[int]:
    """Hidden chunk ids that rank in the top ``k`` of the unfiltered fusion, best first."""
    hidden_ids = {hit.chunk_id for side in hidden for hit in side}
    if not hidden_ids:
        return []
    unfiltered = [merge_by_score(v, h, depth) for v, h in zip(visible, hidden, strict=True)]
    return [chunk_id for chunk_id, _ in rrf(unfiltered)[:k] if chunk_id in hidden_ids]
