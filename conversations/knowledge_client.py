"""The Query Engine's only door to the Knowledge Store: ``knowledge.facade``, made awaitable.

Tests replace it with a stub that records the identity it received.
"""

from __future__ import annotations

from typing import Protocol

from conversations.dbconn import db_step
from knowledge import facade
from knowledge.facade import AccessKind, Identity, SearchResult


class KnowledgeClient(Protocol):
    async def is_empty(self) -> bool: ...

    async def search(self, query: str, identity: Identity, k: int) -> SearchResult: ...

    async def generation(self) -> int: ...

    async def visible_records(self, record_ids: list[int], identity: Identity) -> frozenset[int]: ...

    async def register_access(
        self, record_id: int, identity: Identity, kind: AccessKind, message_id: str | None
    ) -> None: ...


class FacadeKnowledgeClient:
    async def is_empty(self) -> bool:
        return await db_step(facade.is_empty)()

    async def search(self, query: str, identity: Identity, k: int) -> SearchResult:
        return await db_step(facade.search)(query, identity, k)

    async def generation(self) -> int:
        return await db_step(facade.generation)()

    async def visible_records(self, record_ids: list[int], identity: Identity) -> frozenset[int]:
        return await db_step(facade.visible_records)(record_ids, identity)

    async def register_access(
        self, record_id: int, identity: Identity, kind: AccessKind, message_id: str | None
    ) -> None:
        await db_step(facade.register_access)(record_id, identity, kind, message_id)
