"""What a grounding turn hands to its finalize: the retrieval trace draft and the grounding outcome.

Frozen values built by the pipeline (``conversations.pipeline``) and written by
``services.message_finalize``; the trace's JSON columns are produced here, in one place.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from conversations.citations import CitationOut
from conversations.grounding import WithheldHint
from conversations.packing import PackedSource
from conversations.support import Verdict
from conversations.websearch import WebResult
from knowledge.facade import Candidate, Identity, Withheld

Timings = Mapping[str, float | int | None]


@dataclass(frozen=True)
class TraceDraft:
    """The ``retrieval_trace`` row of one grounding turn, before its message exists."""

    standalone_query: str
    identity: Identity
    candidates: tuple[Candidate, ...]
    packed: tuple[PackedSource, ...]
    withheld: tuple[Withheld, ...]
    web_results: tuple[WebResult, ...]
    cache_hit: bool
    timings: Timings = field(default_factory=dict)
    ungrounded: tuple[Verdict, ...] = ()

    def columns(self) -> dict:
        """The row's columns (JSON-ready), ``message`` aside."""
        return {
            "standalone_query": self.standalone_query,
            "identity": {"principals": sorted(self.identity.principals), "user_id": self.identity.user_id},
            "candidates": [
                {
                    "record_id": c.record_id,
                    "chunk_id": c.chunk_id,
                    "source_system": c.source_system,
                    "score": c.score,
                    "rank": c.rank,
                }
                for c in self.candidates
            ],
            "packed": [
                {
                    "marker": s.marker,
                    "record_id": s.record_id,
                    "chunk_id": s.chunk_id,
                    "rank": s.rank,
                    "source_system": s.source_system,
                    "url": s.url,
                }
                for s in self.packed
            ],
            "withheld": [
                {"source_system": w.source_system, "author_principal_id": w.author_principal_id} for w in self.withheld
            ],
            "web_results": [{"title": w.title, "url": w.url} for w in self.web_results],
            "cache_hit": self.cache_hit,
            "timings": dict(self.timings),
            "ungrounded_sentences": [v.as_trace() for v in self.ungrounded],
        }


@dataclass(frozen=True)
class GroundingOutcome:
    """How a grounding step ended: what the answer cites and the withheld hint (if any)."""

    citations: tuple[CitationOut, ...] = ()
    hint: WithheldHint | None = None
