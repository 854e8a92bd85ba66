"""Query Engine fixtures: a fake chat model with a controllable search decision, a stubbed
Knowledge Store client that records the identity it got, a fake candidate cache keyed by
query + identity, and conversation/history factories."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import pytest
from asgiref.sync import async_to_sync

from achilles.llm import ToolCalls, Usage
from achilles.llm.context import parse_context
from knowledge.facade import Candidate, Identity, SearchResult, Withheld
from tests.llm_fake import ScriptedChatProvider, answer, call_tool, call_tools, tool_call

# --- Knowledge Store stub ------------------------------------------------------------------------


def candidate(
    record_id: int,
    text: str = "",
    *,
    rank: int | None = None,
    chunk_id: int | None = None,
    title: str | None = None,
    url: str | None = None,
    source_system: str = "files",
    score: float | None = None,
) -> Candidate:
    rank = rank if rank is not None else record_id
    return Candidate(
        record_id=record_id,
        chunk_id=chunk_id if chunk_id is not None else record_id * 100,
        title=title if title is not None else f"Документ {record_id}",
        url=url if url is not None else f"https://kb.example/{record_id}",
        source_system=source_system,
        text=text or f"Текст документа {record_id}.",
        score=score if score is not None else round(1 / (60 + rank), 6),
        rank=rank,
    )


def result(*candidates: Candidate, withheld: tuple[Withheld, ...] = ()) -> SearchResult:
    return SearchResult(candidates=tuple(candidates), withheld=tuple(withheld), is_empty=False)


EMPTY = SearchResult(candidates=(), withheld=(), is_empty=False)


@dataclass
class StubKnowledge:
    """Returns the configured result; records every identity and query it was given."""

    results: dict[str, SearchResult] = field(default_factory=dict)
    default: SearchResult = EMPTY
    empty: bool = False
    content_generation: int = 0  # what generation() answers; bump it to stand for a KS write
    closed_records: set[int] = field(default_factory=set)  # records the caller may no longer see
    searches: list[tuple[str, Identity, int]] = field(default_factory=list)
    accesses: list[tuple[int, Identity, str, str | None]] = field(default_factory=list)
    embedder: tuple[str, object] | None = None  # what default_embedder() answers: (provider kind, provider)

    def is_empty(self) -> bool:
        return self.empty

    def search(self, query: str, identity: Identity, k: int) -> SearchResult:
        self.searches.append((query, identity, k))
        return self.results.get(query, self.default)

    def generation(self) -> int:
        return self.content_generation

    def visible_records(self, record_ids: list[int], identity: Identity) -> frozenset[int]:
        return frozenset(i for i in record_ids if i not in self.closed_records)

    def register_access(self, record_id: int, identity: Identity, kind: str, message_id: str | None) -> None:
        self.accesses.append((record_id, identity, kind, message_id))

    def default_embedder(self):
        return self.embedder

    @property
    def identities(self) -> list[Identity]:
        return [identity for _, identity, _ in self.searches]

    @property
    def queries(self) -> list[str]:
        return [query for query, _, _ in self.searches]


@dataclass
class FakeCandidateCache:
    """In-memory candidate cache; the key is built by the engine (query + identity)."""

    entries: dict[str, SearchResult] = field(default_factory=dict)
    ttls: dict[str, int] = field(default_factory=dict)

    def get(self, key: str) -> SearchResult | None:
        return self.entries.get(key)

    def set(self, key: str, value: SearchResult, ttl: int) -> None:
        self.entries[key] = value
        self.ttls[key] = ttl


@dataclass
class StubWebSearch:
    results: list = field(default_factory=list)
    queries: list[str] = field(default_factory=list)

    async def search(self, query: str, limit: int):
        self.queries.append(query)
        return list(self.results)[:limit]


@pytest.fixture
def hops(monkeypatch):
    """The name of every function a ``sync_to_async`` call ran, in order (a turn's thread hops)."""
    from asgiref.sync import SyncToAsync

    calls: list[str] = []
    original = SyncToAsync.__call__

    async def counting(self, *args, **kwargs):
        calls.append(getattr(self.func, "__name__", repr(self.func)))
        return await original(self, *args, **kwargs)

    monkeypatch.setattr(SyncToAsync, "__call__", counting)
    return calls


@pytest.fixture
def stub_ks() -> StubKnowledge:
    return StubKnowledge()


@pytest.fixture
def fake_cache() -> FakeCandidateCache:
    return FakeCandidateCache()


# --- fake chat model -------------------------------------------------------------------------------


def search_then(query: str, reply) -> list:
    """Two rounds: the model calls search_knowledge(query), then answers ``reply`` (text or callable)."""
    return [call_tool("search_knowledge", query=query), reply if callable(reply) else answer(reply)]


def cite_every_source(call) -> list:
    """A round-2 reply built only from the packed context it received: first sentence of each source + [N]."""
    tool_text = "\n\n".join(m.content for m in call.messages if m.role == "tool")
    sentences = [f"{s.text.split('.')[0].strip()}. [{s.marker}]" for s in parse_context(tool_text) if s.marker]
    return answer(" ".join(sentences) or "пусто", chunk=5)


__all__ = ["ToolCalls", "Usage", "call_tools", "tool_call", "answer", "call_tool"]


@pytest.fixture
def chat_model(db, model_factory):
    """The default chat model on the allow-list, backed by a ScriptedChatProvider: set ``.rounds``."""
    from achilles.llm import register_provider, unregister_provider

    holder = {"provider": ScriptedChatProvider([])}
    register_provider("scripted", lambda spec: holder["provider"])
    row = model_factory(name="fake-chat", provider="scripted", is_default=True, context_window=8192)

    class Handle:
        model = row

        @property
        def provider(self) -> ScriptedChatProvider:
            return holder["provider"]

        def script(self, *rounds) -> ScriptedChatProvider:
            holder["provider"] = ScriptedChatProvider(list(rounds))
            return holder["provider"]

        @property
        def calls(self):
            return holder["provider"].calls

    yield Handle()
    unregister_provider("scripted")


@pytest.fixture
def engine(stub_ks, fake_cache, chat_model):
    """Every turn in the test runs on the stub KS, the fake cache and the scripted model."""
    from conversations import pipeline

    web = StubWebSearch()
    deps = pipeline.EngineDeps(knowledge=stub_ks, cache=fake_cache, web_search=lambda settings: web)
    pipeline.set_engine_deps(deps)

    class Engine:
        ks = stub_ks
        cache = fake_cache
        model = chat_model
        web_search = web

        def script(self, *rounds):
            return chat_model.script(*rounds)

        def turn(self, user, content, conversation_id=None, identity=None, **rewrite):
            return run_turn(user, content, conversation_id=conversation_id, identity=identity, **rewrite)

    yield Engine()
    pipeline.set_engine_deps(None)


@dataclass
class TurnOutcome:
    events: list
    conversation_id: str | None

    @property
    def tokens(self) -> list[str]:
        return [e.text for e in self.events if e.name == "token"]

    @property
    def text(self) -> str:
        return "".join(self.tokens)

    @property
    def done(self):
        return next((e for e in self.events if e.name == "done"), None)

    @property
    def error(self):
        return next((e for e in self.events if e.name == "error"), None)


def run_turn(user, content, *, conversation_id=None, identity=None, **rewrite) -> TurnOutcome:
    """One turn to its end; ``rewrite``: ``regenerate_of`` or ``edit_of`` (a new version in the thread)."""
    from conversations.pipeline import prepare_turn

    async def go():
        turn = await prepare_turn(
            admit=lambda: user, content=content, conversation_id=conversation_id, identity=identity, **rewrite
        )
        return TurnOutcome(events=[e async for e in turn.events()], conversation_id=turn.conversation_id)

    return async_to_sync(go)()


# --- conversation / history factories --------------------------------------------------------------

_counter = itertools.count(1)


@pytest.fixture
def conversation_factory(db):
    """``conversation_factory(user, [("user", "…"), ("assistant", "…")], title=…)`` → Conversation."""
    from conversations.models import Conversation, Message

    def make(user, history=(), *, title=None, selected_model=None):
        conversation = Conversation.objects.create(
            user=user, title=title or f"Беседа {next(_counter)}", selected_model=selected_model
        )
        for role, content in history:
            Message.objects.create(
                conversation=conversation,
                role=role,
                content=content,
                model="fake-chat" if role == "assistant" else None,
                tokens_used=10 if role == "assistant" else None,
            )
        return conversation

    return make


# --- an in-memory turn store: the whole pipeline in unit tests, no database ------------------------


@dataclass
class FakeUser:
    id: int
    username: str = "alice"
    is_authenticated: bool = True

    @property
    def pk(self) -> int:
        return self.id


@dataclass
class MemoryTurnStore:
    """Conversations, messages, traces and citations in dicts; mirrors ``DatabaseTurnStore``."""

    settings: object = None
    context_window: int = 8192
    conversations: dict = field(default_factory=dict)
    messages: list = field(default_factory=list)
    users: dict = field(default_factory=dict)  # id → Contact, for withheld-hint contacts
    models: dict = field(default_factory=dict)  # the allow-list: name → ModelSpec
    default_model: str | None = "fake-chat"
    abandoned: list = field(default_factory=list)  # the questions whose turn ended with no answer row
    _ids: object = field(default_factory=lambda: itertools.count(1))

    def __post_init__(self):
        from achilles.llm import ModelSpec
        from conversations.services import TurnSettings

        self.models = self.models or {
            "fake-chat": ModelSpec("fake-chat", "scripted", context_window=self.context_window)
        }

        if self.settings is None:
            self.settings = TurnSettings(
                platform_prompt="",
                web_search_enabled=False,
                web_search_url="",
                answer_reserve_tokens=512,
                retrieval_top_k=8,
                cache_ttl_seconds=300,
            )

    def start(self, *, user, content, conversation_id, identity=None, regenerate_of=None, edit_of=None):
        assert regenerate_of is None and edit_of is None, "versions of a thread are the database store's"
        identity = identity or Identity(
            principals=frozenset({f"user:{user.id}", "everyone", "public"}), user_id=user.id
        )
        return self._start(user=user, content=content, conversation_id=conversation_id), identity

    def _start(self, *, user, content, conversation_id):
        import uuid

        from achilles.errors import NotFound
        from achilles.llm import Message as LLMMessage
        from conversations.rules import effective_model
        from conversations.services import TurnStart

        if conversation_id is None:
            conversation_id, created = str(uuid.uuid4()), True
            self.conversations[conversation_id] = {"user_id": user.id, "selected_model": None}
        else:
            conversation_id, created = str(conversation_id), False
            owner = self.conversations.get(conversation_id)
            if owner is None or owner["user_id"] != user.id:
                raise NotFound("conversation not found")
        history = tuple(LLMMessage(m["role"], m["content"]) for m in self.thread(conversation_id) if m["content"])
        message_id = next(self._ids)
        self.messages.append(
            {
                "id": message_id,
                "conversation_id": conversation_id,
                "role": "user",
                "content": content.strip(),
                "state": "complete",
            }
        )
        selected = self.conversations[conversation_id]["selected_model"]
        model = effective_model(selected, self.models.get(self.default_model))
        return TurnStart(
            conversation_id=conversation_id,
            created=created,
            user_message_id=message_id,
            history=history,
            model=model,
            settings=self.settings,
        )

    def select_model(self, conversation_id, name):
        from conversations.rules import resolve_selected_model

        self.conversations[str(conversation_id)]["selected_model"] = resolve_selected_model(name, self.models)

    def finalize(self, **fields):
        from conversations.pipeline import Finalized

        message_id = next(self._ids)
        self.messages.append({"id": message_id, "role": "assistant", **fields})
        return Finalized(id=message_id, tokens_used=fields["tokens_used"])

    def contacts(self, user_ids):
        return {i: self.users[i] for i in user_ids if i in self.users}

    def abandon(self, start):
        self.abandoned.append(start.user_message_id)

    def thread(self, conversation_id) -> list[dict]:
        return [m for m in self.messages if m["conversation_id"] == conversation_id]

    @property
    def assistant(self) -> list[dict]:
        return [m for m in self.messages if m["role"] == "assistant"]

    @property
    def traces(self) -> list[dict]:
        return [m["trace"].columns() for m in self.assistant if m.get("trace") is not None]


@pytest.fixture
def memory_engine(stub_ks, fake_cache):
    """The real pipeline over the stub KS, the fake cache, a scripted model and a memory store."""
    from conversations import pipeline

    store = MemoryTurnStore()
    web = StubWebSearch()
    holder = {"provider": ScriptedChatProvider([])}
    deps = pipeline.EngineDeps(
        knowledge=stub_ks,
        cache=fake_cache,
        store=store,
        web_search=lambda settings: web,
        chat_provider=lambda spec: holder["provider"],
    )

    class MemoryEngine:
        ks = stub_ks
        cache = fake_cache
        web_search = web

        def __init__(self):
            self.store = store
            self.deps = deps

        def script(self, *rounds) -> ScriptedChatProvider:
            holder["provider"] = ScriptedChatProvider(list(rounds))
            return holder["provider"]

        @property
        def calls(self):
            return holder["provider"].calls

        def settings(self, **changes):
            from dataclasses import replace

            store.settings = replace(store.settings, **changes)

        def turn(self, user, content, conversation_id=None, identity=None) -> TurnOutcome:
            async def go():
                turn = await pipeline.prepare_turn(
                    admit=lambda: user, content=content, conversation_id=conversation_id, identity=identity, deps=deps
                )
                return TurnOutcome(events=[e async for e in turn.events()], conversation_id=turn.conversation_id)

            return async_to_sync(go)()

    return MemoryEngine()


@pytest.fixture
def alice() -> FakeUser:
    return FakeUser(id=1, username="alice")


@pytest.fixture
def bob() -> FakeUser:
    return FakeUser(id=2, username="bob")
