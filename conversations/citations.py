"""Citations (QE-10) and the answer access signal (QE-11), from the packed set only.

The model cites with ``[N]`` markers that point into the packed context. A citation is
record-level: all cited chunks of one record fold into one citation that keeps its best
(lowest-rank) chunk. Markers that point outside the packed set are not citable. Citations are
ordered by contribution: the relevance (KS rank) of the best cited chunk, leading source first.

Each citation also keeps, per marker, the passage that marker points to (``passages``): two
markers of one record that cite two of its chunks show each its own chunk, not both the best one.

The user reads the answer's own numbers: ``MarkerNumbers`` renumbers the packed markers a released
answer uses to 1, 2, … in order of first use (the model cited [3] and [7]; the reader sees [1] and
[2]), and the citations are built on those numbers.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from conversations.packing import PackedSource

MARKER = re.compile(r"\[(\d{1,3})\]")
_CODE_SPAN = re.compile(r"(`+)[\s\S]*?\1")
_FENCE = "```"


@dataclass(frozen=True)
class Passage:
    """The chunk one marker of a citation points to."""

    marker: int
    chunk_id: int | None
    text: str

    def as_dict(self) -> dict:
        return {"marker": self.marker, "chunk_id": self.chunk_id, "text": self.text}


@dataclass
class MarkerNumbers:
    """The packed markers an answer uses, renumbered 1, 2, … in order of first use.

    Applied to each released piece in order, so what streams, what is stored and what the
    citations say agree. Markers outside ``packed`` (the gate lets none through) and anything inside
    code (a fenced block, an inline code span: ``a[3]`` is an index, not a marker) stay as written.
    """

    packed: frozenset[int]
    numbers: dict[int, int] = field(default_factory=dict)

    def renumber(self, piece: str) -> str:
        if piece.strip().startswith(_FENCE):
            return piece
        out, last = [], 0
        for code in _CODE_SPAN.finditer(piece):
            out.append(MARKER.sub(self._number, piece[last : code.start()]))
            out.append(code.group(0))
            last = code.end()
        out.append(MARKER.sub(self._number, piece[last:]))
        return "".join(out)

    def _number(self, match: re.Match[str]) -> str:
        marker = int(match.group(1))
        if marker not in self.packed:
            return match.group(0)
        return f"[{self.numbers.setdefault(marker, len(self.numbers) + 1)}]"

    def sources(self, packed: Sequence[PackedSource]) -> list[PackedSource]:
        """The packed sources the answer cites, each under the number the reader sees."""
        return [replace(s, marker=self.numbers[s.marker]) for s in packed if s.marker in self.numbers]


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
    passages: tuple[Passage, ...] = ()

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
            "passages": [p.as_dict() for p in self.passages],
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
            passages=tuple(Passage(s.marker, s.chunk_id, s.text) for s in sorted(chunks, key=lambda s: s.marker)),
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
