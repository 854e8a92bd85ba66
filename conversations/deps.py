"""What a turn talks to: the Knowledge Store client, the candidate cache, the web search, the chat
provider and the turn store (the database; memory in unit tests). Tests and benchmarks swap them
with ``set_engine_deps``."""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from django.db import InterfaceError, OperationalError

from achilles.llm import ChatProvider, ModelSpec, get_chat_provider
from conversations import services
from conversations.cache import CandidateCache, RedisCandidateCache, cache_gate, cache_gate_in_thread
from conversations.citations import CitationOut
from conversations.dbconn import db_step
from conversations.grounding import WithheldHint
from conversations.knowledge_client import FacadeKnowledgeClient, KnowledgeClient
from conversations.trace import TraceDraft
from conversations.websearch import SearxngWebSearch, WebSearchProvider
from knowledge import facade
from knowledge.facade import Identity, SearchResult

logger = logging.getLogger(__name__)

# How long a turn keeps trying to store its answer while the database is away (a restart).
FINALIZE_RETRY_SECONDS = 30.0


def default_web_search(settings: services.TurnSettings) -> WebSearchProvider | None:
    return SearxngWebSearch(settings.web_search_url) if settings.web_search_url else None


@dataclass(frozen=True)
class Finalized:
    id: int
    tokens_used: int


class TurnStore(Protocol):
    """Where a turn starts and ends: the database in production, memory in unit tests."""

    async def start(
        self, *, user, content: str, conversation_id, identity: Identity | None
    ) -> tuple[services.TurnStart, Identity]: ...

    async def finalize(
        self,
        *,
        conversation_id: str,
        content: str,
        model_name: str,
        tokens_used: int,
        state: str,
        citations: Sequence[CitationOut],
        trace: TraceDraft | None,
        withheld_hint: WithheldHint | None,
    ) -> Finalized: ...

    async def contacts(self, user_ids: set[int]) -> dict: ...


class DatabaseTurnStore:
    """Every step gives its connection back when done (see ``conversations.dbconn``); that also
    covers a finalize from a cancelled stream, after the request's own clean-up has run."""

    async def start(self, *, user, content, conversation_id, identity):
        return await db_step(_start)(user=user, content=content, conversation_id=conversation_id, identity=identity)

    async def finalize(self, *, after: Callable[[int], None] | None = None, **fields) -> Finalized:
        """``after`` (sync, given the answer's id) runs in the same step once the answer is stored
        and must not raise (a retry would store the answer twice)."""
        # The answer row is what unlocks the thread (one turn at a time): a database restart
        # mid-turn must not lose it, so the write is retried until the database is back or
        # FINALIZE_RETRY_SECONDS have passed (the transaction is atomic: a retry never doubles it).
        deadline = time.monotonic() + FINALIZE_RETRY_SECONDS
        pause = 0.2
        while True:
            try:
                return await db_step(_finalize)(after=after, **fields)
            except (OperationalError, InterfaceError):
                if time.monotonic() + pause > deadline:
                    raise
                logger.warning("storing a chat answer failed (database away?); retrying in %.1fs", pause)
                await asyncio.sleep(pause)
                pause = min(pause * 2, 2.0)

    async def contacts(self, user_ids: set[int]) -> dict:
        return await db_step(services.contacts_for)(user_ids)


def _start(*, user, content, conversation_id, identity):
    # One step (one thread hop, one pooled connection) for the session identity and the start.
    identity = identity if identity is not None else Identity.for_user(user)
    return services.turn_start(user=user, content=content, conversation_id=conversation_id), identity


def _finalize(*, after: Callable[[int], None] | None = None, **fields) -> Finalized:
    message = services.message_finalize(**fields)
    if after is not None:
        after(message.pk)
    return Finalized(id=message.pk, tokens_used=message.tokens_used or 0)


def _start_reading_knowledge(*, user, content, conversation_id, identity):
    start, identity = _start(user=user, content=content, conversation_id=conversation_id, identity=identity)
    try:
        knowledge_empty: bool | None = facade.is_empty()
    except Exception:  # the turn has started: the stream reads it again and reports the failure
        logger.warning("is_empty failed at the turn start; read again by the stream", exc_info=True)
        knowledge_empty = None
    return start, identity, knowledge_empty


def _register_accesses(record_ids: Sequence[int], identity: Identity, message_id: int) -> None:
    for record_id in record_ids:
        try:
            facade.register_access(record_id, identity, "answer", str(message_id))
        except Exception:
            logger.exception("access signal for record %s failed", record_id)


@dataclass
class EngineDeps:
    """What a turn talks to; tests swap in a stub KS, a fake cache and a scripted model."""

    knowledge: KnowledgeClient = field(default_factory=FacadeKnowledgeClient)
    store: TurnStore = field(default_factory=DatabaseTurnStore)
    cache: CandidateCache = field(default_factory=RedisCandidateCache)
    web_search: Callable[[services.TurnSettings], WebSearchProvider | None] = default_web_search
    chat_provider: Callable[[ModelSpec], ChatProvider] = get_chat_provider

    # -- a turn's steps, in as few thread hops as the dependencies allow --
    # Each ``sync_to_async`` call wakes the worker thread and then the event loop (≈ 0.3–0.5 ms of
    # CPU here besides the work). The database store, the facade and Redis are all sync code behind
    # that one thread, so adjacent steps of them run as one hop (and on one pooled connection).
    # Doubles (memory store, stub KS, fake cache) keep their own async calls, step by step.

    @property
    def in_one_thread(self) -> bool:
        return isinstance(self.store, DatabaseTurnStore) and isinstance(self.knowledge, FacadeKnowledgeClient)

    async def start(
        self, *, user, content: str, conversation_id, identity: Identity | None
    ) -> tuple[services.TurnStart, Identity, bool | None]:
        """(start, identity, knowledge empty — None: not read yet, the stream asks the KS client)."""
        if self.in_one_thread:
            return await db_step(_start_reading_knowledge)(
                user=user, content=content, conversation_id=conversation_id, identity=identity
            )
        start, identity = await self.store.start(
            user=user, content=content, conversation_id=conversation_id, identity=identity
        )
        return start, identity, None

    async def search(self, *, query: str, identity: Identity, k: int, ttl: int) -> tuple[SearchResult, bool]:
        """The cache gate around the KS search: (result, cache hit)."""
        if self.in_one_thread and isinstance(self.cache, RedisCandidateCache):
            return await db_step(cache_gate_in_thread)(
                query=query,
                identity=identity,
                ttl=ttl,
                search=lambda q, i: facade.search(q, i, k),
                generation=facade.generation,
            )

        async def search(q: str, i: Identity) -> SearchResult:
            return await self.knowledge.search(q, i, k)

        # Read before the search: a write in between leaves a newer result under an older number.
        generation = await self.knowledge.generation()
        return await cache_gate(
            query=query, identity=identity, cache=self.cache, ttl=ttl, search=search, generation=generation
        )

    async def finalize(
        self, *, access_records: Sequence[int] = (), identity: Identity | None = None, **fields
    ) -> tuple[Finalized, bool]:
        """(the stored answer, whether ``access_records`` were signalled with it). With the
        production store the access signals run in the finalize's own step, after the write."""
        if access_records and identity is not None and self.in_one_thread:
            store = self.store
            assert isinstance(store, DatabaseTurnStore)
            signal = functools.partial(_register_accesses, tuple(access_records), identity)
            return await store.finalize(after=signal, **fields), True
        return await self.store.finalize(**fields), False


_override: EngineDeps | None = None


def engine_deps() -> EngineDeps:
    return _override if _override is not None else EngineDeps()


def set_engine_deps(deps: EngineDeps | None) -> None:
    """Tests and benchmarks: replace the dependencies of every new turn (None → defaults)."""
    global _override
    _override = deps
