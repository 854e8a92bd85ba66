"""The Query Engine's only door to the Knowledge Store: ``knowledge.facade``.

Plain (sync) methods: a turn calls them in its worker thread, merged with the steps beside them
(``conversations.deps.EngineDeps``); the API's sync views call them directly. Tests replace it with
a stub that records the identity it received.
"""

from __future__ import annotations

from typing import Protocol

from achilles.llm import EmbeddingProvider
from knowledge import facade
from knowledge.facade import AccessKind, Identity, SearchResult


class KnowledgeClient(Protocol):
    def is_empty(self) -> bool: ...

    def search(self, query: str, identity: Identity, k: int) -> SearchResult: ...

    def generation(self) -> int: ...

    def visible_records(self, record_ids: list[int], identity: Identity) -> frozenset[int]: ...

    def register_access(self, record_id: int, identity: Identity, kind: AccessKind, message_id: str | None) -> None: ...

    def default_embedder(self) -> tuple[str, EmbeddingProvider] | None: ...


class FacadeKnowledgeClient:
    def is_empty(self) -> bool:
        return facade.is_empty()

    def search(self, query: str, identity: Identity, k: int) -> SearchResult:
        return facade.search(query, identity, k)

    def generation(self) -> int:
        return facade.generation()

    def visible_records(self, record_ids: list[int], identity: Identity) -> frozenset[int]:
        return facade.visible_records(record_ids, identity)

    def register_access(self, record_id: int, identity: Identity, kind: AccessKind, message_id: str | None) -> None:
        facade.register_access(record_id, identity, kind, message_id)

    def default_embedder(self) -> tuple[str, EmbeddingProvider] | None:
        return facade.default_embedder()
