"""Fakes shared by the Agent Engine tests (importable from unit tests: no database here)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from achilles.errors import ApplicationError
from knowledge.facade import Candidate, GraphNode, GraphResult, Identity, SearchResult, SqlResult, Withheld

OWNER_IDENTITY = Identity(principals=frozenset({"user:7", "group:sales", "everyone", "public"}), user_id=7)


@dataclass
class FakeKnowledgeStore:
    """Stands in for ``knowledge.facade``: records every call with the identity it ran under."""

    documents: list[tuple[str, str]] = field(
        default_factory=lambda: [("Отпуск", "Сотрудникам положено 28 дней отпуска.")]
    )
    empty: bool = False
    withheld: tuple[Withheld, ...] = ()
    sql_error: ApplicationError | None = None
    calls: list[tuple[str, Any, Any]] = field(default_factory=list)
    # Called (sync, outside the model's event loop) on every primitive call: lets a test look at
    # or change the database while a run is in flight.
    on_call: Callable[[str], None] | None = None

    def _record(self, name, argument, identity):
        self.calls.append((name, argument, identity))
        if self.on_call is not None:
            self.on_call(name)

    def search(self, query, identity, k=8):
        self._record("search", query, identity)
        if self.empty:
            return SearchResult(candidates=(), withheld=(), is_empty=True)
        candidates = tuple(
            Candidate(
                record_id=i,
                chunk_id=i * 10,
                title=t,
                url=f"https://kb/{i}",
                source_system="files",
                text=x,
                score=1.0 / (60 + i),
                rank=i,
            )
            for i, (t, x) in enumerate(self.documents, start=1)
        )
        return SearchResult(candidates=candidates, withheld=self.withheld, is_empty=False)

    def graph(self, record_id, identity, depth=1):
        self._record("graph", record_id, identity)
        return GraphResult(
            root_record_id=record_id,
            nodes=(
                GraphNode(
                    record_id=record_id + 1,
                    title="PROJ-2 Связанная задача",
                    url="",
                    source_system="jira",
                    depth=1,
                    link_type="blocks",
                    via_record_id=record_id,
                ),
            ),
        )

    def sql(self, query, identity):
        self._record("sql", query, identity)
        if self.sql_error is not None:
            raise self.sql_error
        return SqlResult(columns=("source_system", "records"), rows=(("files", 3), ("jira", 2)), truncated=False)

    def is_empty(self):
        return self.empty

    def names(self) -> list[str]:
        return [c[0] for c in self.calls]
