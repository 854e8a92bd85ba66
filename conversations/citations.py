"""Citations (QE-10) and the answer access signal (QE-11), from the packed set only.

The model cites with ``[N]`` markers that point into the packed context. A citation is
record-level: all cited chunks of one record fold into one citation that keeps its best
(lowest-rank) chunk. Markers that point outside the packed set are not citable. Citations are
ordered by contribution: the relevance (KS rank) of the best cited chunk, leading source first.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from conversations.packing import PackedSource

MARKER = re.compile(r"\[(\d{1,3})\]")


@dataclass(frozen=True)
class CitationOut:
    record_id: int | None
    chunk_id: int | None
    title: str
    url: str
    source_system: str
    chunk_text: str
    rank: int
    markers: tuple[int, ...]

    def as_dict(self) -> dict:
        return {
            "record_id": self.record_id,
            "chunk_id": self.chunk_id,
            "title": self.title,
            "url": self.url,
            "source_system": self.source_system,
            "chunk_text": self.chunk_text,
            "rank": self.rank,
            "markers": list(self.markers),
        }


def cited_markers(answer: str) -> list[int]:
    """Markers in order of first appearance, without repeats."""
    seen: dict[int, None] = {}
    for match in MARKER.finditer(answer):
        seen.setdefault(int(match.group(1)), None)
    return list(seen)


def _source_key(source: PackedSource) -> tuple:
    # A KS record is one source; a web result is keyed by its url.
    return ("record", source.record_id) if source.record_id is not None else ("web", source.url)


def build_citations(packed: Sequence[PackedSource], answer: str) -> list[CitationOut]:
    by_marker = {source.marker: source for source in packed}
    groups: dict[tuple, list[PackedSource]] = {}
    for marker in cited_markers(answer):
        source = by_marker.get(marker)
        if source is not None:  # a marker outside the packed set cites nothing
            groups.setdefault(_source_key(source), []).append(source)
    best = [(min(chunks, key=lambda s: (s.rank, s.marker)), chunks) for chunks in groups.values()]
    best.sort(key=lambda item: (item[0].rank, item[0].marker))
    return [
        CitationOut(
            record_id=top.record_id,
            chunk_id=top.chunk_id,
            title=top.title,
            url=top.url,
            source_system=top.source_system,
            chunk_text=top.text,
            rank=n,
            markers=tuple(sorted(s.marker for s in chunks)),
        )
        for n, (top, chunks) in enumerate(best, start=1)
    ]


def answer_access_records(citations: Sequence[CitationOut]) -> list[int]:
    """KS records that earn one «обращение» for this answer: cited ones, once each."""
    seen: dict[int, None] = {}
    for citation in citations:
        if citation.record_id is not None:
            seen.setdefault(citation.record_id, None)
    return list(seen)
