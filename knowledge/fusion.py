"""Reciprocal Rank Fusion and the withheld computation (KS-3/4). Pure functions, no ORM.

``rrf`` fuses ranked lists of chunk ids: score(c) = Σ 1/(K + rank_in_list). Ties are broken by
the best single-list rank, then by chunk id, so equal inputs always give the same order.

Withheld: a hidden record is «relevant» when one of its chunks would make the top k of the same
fused search run without the ACL filter (each side also yields its unfiltered top-N, with a
visibility flag per row, in the same statements that produce the visible lists).
"""

from __future__ import annotations

from collections.abc import Sequence

RRF_K = 60


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


def exact_first(exact: Sequence[int], lists: Sequence[Sequence[int]], *, k: int = RRF_K) -> list[tuple[int, float]]:
    """``rrf`` of ``lists`` and ``exact`` (the chunks holding an identifier the query names, best
    first: ``knowledge.search.identifiers``), with the exact ones first in their own order and the
    rest after them in fused order; every score is the chunk's fused one."""
    if not exact:
        return rrf(lists, k=k)
    fused = rrf([*lists, exact], k=k)
    scores = dict(fused)
    first = list(dict.fromkeys(exact))
    wanted = set(first)
    return [(chunk_id, scores[chunk_id]) for chunk_id in first] + [item for item in fused if item[0] not in wanted]


def withheld_chunk_ids(*, unfiltered: Sequence[Sequence[int]], hidden: set[int], k: int) -> list[int]:
    """Hidden chunk ids that rank in the top ``k`` of the fusion of the unfiltered lists, best first."""
    if not hidden:
        return []
    return [chunk_id for chunk_id, _ in rrf(unfiltered)[:k] if chunk_id in hidden]
