"""What a turn talks to: the Knowledge Store client, the candidate cache, the web search, the chat
provider and the turn store (the database; memory in unit tests). Tests and benchmarks swap them
with ``set_engine_deps``."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from django.db import InterfaceError, OperationalError

from achilles.llm import ChatProvider, ModelSpec, get_chat_provider
from conversations import services
from conversations.cache import CandidateCache, RedisCandidateCache
from conversations.citations import CitationOut
from conversations.dbconn import db_step
from conversations.grounding import WithheldHint
from conversations.knowledge_client import FacadeKnowledgeClient, KnowledgeClient
from conversations.trace import TraceDraft
from conversations.websearch import SearxngWebSearch, WebSearchProvider
from knowledge.facade import Identity

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

    async def finalize(self, **fields) -> Finalized:
        # The answer row is what unlocks the thread (one turn at a time): a database restart
        # mid-turn must not lose it, so the write is retried until the database is back or
        # FINALIZE_RETRY_SECONDS have passed (the transaction is atomic: a retry never doubles it).
        deadline = time.monotonic() + FINALIZE_RETRY_SECONDS
        pause = 0.2
        while True:
            try:
                return await db_step(_finalize)(**fields)
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


def _finalize(**fields) -> Finalized:
    message = services.message_finalize(**fields)
    return Finalized(id=message.pk, tokens_used=message.tokens_used or 0)


@dataclass
class EngineDeps:
    """What a turn talks to; tests swap in a stub KS, a fake cache and a scripted model."""

    knowledge: KnowledgeClient = field(default_factory=FacadeKnowledgeClient)
    store: TurnStore = field(default_factory=DatabaseTurnStore)
    cache: CandidateCache = field(default_factory=RedisCandidateCache)
    web_search: Callable[[services.TurnSettings], WebSearchProvider | None] = default_web_search
    chat_provider: Callable[[ModelSpec], ChatProvider] = get_chat_provider


_override: EngineDeps | None = None


def engine_deps() -> EngineDeps:
    return _override if _override is not None else EngineDeps()


def set_engine_deps(deps: EngineDeps | None) -> None:
    """Tests and benchmarks: replace the dependencies of every new turn (None → defaults)."""
    global _override
    _override = deps
