"""What a turn talks to: the Knowledge Store client, the candidate cache, the web search, the chat
provider and the turn store (the database; memory in unit tests). Tests and benchmarks swap them
with ``set_engine_deps``."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from asgiref.sync import sync_to_async
from django.db import InterfaceError, OperationalError

from achilles.llm import ChatProvider, ModelSpec, get_chat_provider
from conversations import services
from conversations.cache import CandidateCache, RedisCandidateCache, cache_gate
from conversations.citations import CitationOut
from conversations.dbconn import db_step
from conversations.grounding import WithheldHint
from conversations.knowledge_client import FacadeKnowledgeClient, KnowledgeClient
from conversations.support import MeaningSignal, meaning_signal
from conversations.trace import TraceDraft
from conversations.websearch import SearxngWebSearch, WebSearchProvider
from knowledge.facade import Identity, SearchResult, source_labels

logger = logging.getLogger(__name__)

# How long a turn keeps trying to store its answer while the database is away (a restart).
FINALIZE_RETRY_SECONDS = 30.0


def default_web_search(settings: services.TurnSettings) -> WebSearchProvider | None:
    return SearxngWebSearch(settings.web_search_url) if settings.web_search_url else None


@dataclass(frozen=True)
class Finalized:
    id: int
    tokens_used: int
    # the label people read for each cited source system («Файлы», an admin's own): the done event's
    source_labels: Mapping[str, str] = field(default_factory=dict)


class TurnStore(Protocol):
    """Where a turn starts and ends: the database in production, memory in unit tests. Plain (sync)
    methods: ``EngineDeps`` runs them in the turn's worker thread, merged with the steps beside them."""

    def start(
        self,
        *,
        user,
        content: str,
        conversation_id,
        identity: Identity | None,
        regenerate_of: int | None = None,
        edit_of: int | None = None,
    ) -> tuple[services.TurnStart, Identity]: ...

    def finalize(
        self,
        *,
        conversation_id: str,
        content: str,
        model_name: str,
        tokens_used: int,
        state: str,
        citations: Sequence[CitationOut],
        tokens_split: tuple[int, int] | None,
        trace: TraceDraft | None,
        withheld_hint: WithheldHint | None,
        question_id: int | None,
    ) -> Finalized: ...

    def contacts(self, user_ids: set[int]) -> dict: ...

    def abandon(self, start: services.TurnStart) -> None:
        """The turn ends without an answer row (the database is away): its thread must not wait
        for one. Needs no database."""
        ...


class DatabaseTurnStore:
    """The ORM behind ``conversations.services``; the session identity is read with the start."""

    def start(self, *, user, content, conversation_id, identity, regenerate_of=None, edit_of=None):
        identity = identity if identity is not None else Identity.for_user(user)
        start = services.turn_start(
            user=user, content=content, conversation_id=conversation_id, regenerate_of=regenerate_of, edit_of=edit_of
        )
        return start, identity

    def finalize(self, **fields) -> Finalized:
        message = services.message_finalize(**fields)
        systems = sorted({c.source_system for c in fields.get("citations") or ()})
        return Finalized(
            id=message.pk,
            tokens_used=message.tokens_used or 0,
            source_labels=source_labels(systems) if systems else {},
        )

    def contacts(self, user_ids: set[int]) -> dict:
        return services.contacts_for(user_ids)

    def abandon(self, start: services.TurnStart) -> None:
        services.turn_abandon(start=start)


@dataclass
class EngineDeps:
    """What a turn talks to; tests swap in a stub KS, a fake cache, a memory store and a scripted
    model — and the turn takes the same steps over them as over the production classes."""

    knowledge: KnowledgeClient = field(default_factory=FacadeKnowledgeClient)
    store: TurnStore = field(default_factory=DatabaseTurnStore)
    cache: CandidateCache = field(default_factory=RedisCandidateCache)
    web_search: Callable[[services.TurnSettings], WebSearchProvider | None] = default_web_search
    chat_provider: Callable[[ModelSpec], ChatProvider] = get_chat_provider

    # -- a turn's steps: each one thread hop (``db_step``) --
    # Each ``sync_to_async`` call wakes the worker thread and then the event loop (≈ 0.3–0.5 ms of
    # CPU here besides the work). The store, the KS client and the cache are sync code behind that
    # one thread, so adjacent calls of them run as one hop (and on one pooled connection): the start
    # with the «store empty?» read, the cache gate with its generation read and the search, the
    # finalize with the access signals. Doubles take the very same hops.

    async def start(
        self,
        *,
        admit: Callable[[], Any],
        content: str,
        conversation_id,
        identity: Identity | None,
        rewrite: dict[str, int] | None = None,
    ) -> tuple[services.TurnStart, Identity, bool | None]:
        """(start, identity, knowledge empty — None: the read failed, the stream asks again).
        ``admit`` returns who asks, or raises, first thing in the same step. ``rewrite``:
        ``regenerate_of`` or ``edit_of`` (``services.turn_start``)."""
        return await db_step(self._start_reading_knowledge)(
            admit=admit, content=content, conversation_id=conversation_id, identity=identity, rewrite=rewrite
        )

    def _start_reading_knowledge(self, *, admit, content, conversation_id, identity, rewrite=None):
        user = admit()
        start, identity = self.store.start(
            user=user, content=content, conversation_id=conversation_id, identity=identity, **(rewrite or {})
        )
        try:
            knowledge_empty: bool | None = self.knowledge.is_empty()
        except Exception:  # the turn has started: the stream reads it again and reports the failure
            logger.warning("is_empty failed at the turn start; read again by the stream", exc_info=True)
            knowledge_empty = None
        return start, identity, knowledge_empty

    async def is_empty(self) -> bool:
        return await db_step(self.knowledge.is_empty)()

    async def search(
        self, *, query: str, identity: Identity, k: int, ttl: int
    ) -> tuple[SearchResult, bool, MeaningSignal | None]:
        """The cache gate around the KS search: (result, cache hit, the support check's embedder
        signal for this turn — read in the same step, ``meaning_signal``)."""
        return await db_step(self._cache_gate)(query=query, identity=identity, k=k, ttl=ttl)

    def _cache_gate(
        self, *, query: str, identity: Identity, k: int, ttl: int
    ) -> tuple[SearchResult, bool, MeaningSignal | None]:
        knowledge = self.knowledge
        found, hit = cache_gate(
            query=query,
            identity=identity,
            cache=self.cache,
            ttl=ttl,
            search=lambda q, i: knowledge.search(q, i, k),
            generation=knowledge.generation,
        )
        # The default embedder, when it has a measured floor (``conversations.support.MEANING_FLOORS``).
        embedder = knowledge.default_embedder()
        return found, hit, meaning_signal(*embedder) if embedder is not None else None

    async def contacts(self, user_ids: set[int]) -> dict:
        return await db_step(self.store.contacts)(user_ids)

    async def abandon(self, start: services.TurnStart) -> None:
        await sync_to_async(self.store.abandon)(start)

    async def finalize(self, *, after: Callable[[int], None] | None = None, **fields) -> Finalized:
        """Store the answer. ``after`` (sync, given the answer's id) runs in the same step once the
        answer is stored and must not raise (a retry would store the answer twice)."""
        # The answer row is what unlocks the thread (one turn at a time): a database restart
        # mid-turn must not lose it, so the write is retried until the database is back or
        # FINALIZE_RETRY_SECONDS have passed (the transaction is atomic: a retry never doubles it).
        deadline = time.monotonic() + FINALIZE_RETRY_SECONDS
        pause = 0.2
        while True:
            try:
                return await db_step(self._finalize)(after=after, **fields)
            except (OperationalError, InterfaceError):
                if time.monotonic() + pause > deadline:
                    raise
                logger.warning("storing a chat answer failed (database away?); retrying in %.1fs", pause)
                await asyncio.sleep(pause)
                pause = min(pause * 2, 2.0)

    def _finalize(self, *, after: Callable[[int], None] | None = None, **fields) -> Finalized:
        finalized = self.store.finalize(**fields)
        if after is not None:
            after(finalized.id)
        return finalized


_override: EngineDeps | None = None


def engine_deps() -> EngineDeps:
    return _override if _override is not None else EngineDeps()


def set_engine_deps(deps: EngineDeps | None) -> None:
    """Tests and benchmarks: replace the dependencies of every new turn (None → defaults)."""
    global _override
    _override = deps
