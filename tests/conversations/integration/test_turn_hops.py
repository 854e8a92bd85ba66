"""How many thread hops a chat turn costs with the production dependencies (issue 15: CPU per turn).

Each ``sync_to_async`` call wakes the worker thread and then the event loop (≈ 0.3–0.5 ms of CPU on
this machine besides the work). With the database store, the facade and Redis behind the engine, a
grounding turn's adjacent sync steps run as one hop each: the start with the «store empty?» read,
the cache gate with the search, the finalize with the access signals. Before, the same turn made
eight hops (start, is_empty, generation, cache get, search, cache set, finalize, register_access);
these tests failed then. The real Knowledge Store and Redis answer here; only the model is scripted.
"""

import pytest
from asgiref.sync import SyncToAsync

from conversations.models import RetrievalTrace
from knowledge import facade
from knowledge.models import AccessSignal
from knowledge.search.embedding import forget_search_embedding_config
from tests.conversations.conftest import answer, cite_every_source, run_turn, search_then

pytestmark = [pytest.mark.integration]


@pytest.fixture
def hops(monkeypatch):
    """The name of every function a ``sync_to_async`` call ran, in order."""
    calls: list[str] = []
    original = SyncToAsync.__call__

    async def counting(self, *args, **kwargs):
        calls.append(getattr(self.func, "__name__", repr(self.func)))
        return await original(self, *args, **kwargs)

    monkeypatch.setattr(SyncToAsync, "__call__", counting)
    return calls


@pytest.fixture
def hash_embedder(db, model_factory):
    model_factory(name="hash-384", provider="hash", kind="embedding", is_default=True, options={"dim": 384})
    forget_search_embedding_config()
    yield
    forget_search_embedding_config()


def test_a_grounding_turn_is_three_hops_and_keeps_cache_and_access_signal(hash_embedder, chat_model, user, hops):
    record_id = facade.upsert_record(
        source_system="wiki",
        external_id="leave",
        title="Отпуск",
        text="Ежегодный отпуск составляет 28 календарных дней.",
        acl=["everyone"],
    )
    chat_model.script(
        *search_then("отпуск дни", cite_every_source),
        *search_then("отпуск дни", cite_every_source),
    )

    first = run_turn(user, "Сколько дней отпуска?")
    assert hops == ["_start_reading_knowledge", "cache_gate_in_thread", "_finalize"], hops
    hops.clear()
    second = run_turn(user, "Сколько дней отпуска?", conversation_id=first.conversation_id)
    assert hops == ["_start_reading_knowledge", "cache_gate_in_thread", "_finalize"], hops

    for outcome in (first, second):
        assert outcome.done is not None, outcome.events
        assert [c["record_id"] for c in outcome.done.payload()["citations"]] == [record_id]
        assert "28 календарных дней" in outcome.text
    # the second identical search came from the candidate cache (Redis), not the store
    assert list(RetrievalTrace.objects.order_by("pk").values_list("cache_hit", flat=True)) == [False, True]
    # the cited record earned one access signal per answer, sent in the finalize's step
    signals = AccessSignal.objects.filter(record_id=record_id, kind="answer")
    assert sorted(signals.values_list("message_id", flat=True)) == sorted(
        str(o.done.payload()["message_id"]) for o in (first, second)
    )
    assert set(signals.values_list("principal", flat=True)) == {f"user:{user.pk}"}


def test_an_empty_store_is_read_with_the_start_and_offers_no_search(hash_embedder, chat_model, user, hops):
    chat_model.script(answer("Привет! Чем помочь?"))

    outcome = run_turn(user, "Привет")

    assert outcome.done is not None and outcome.text == "Привет! Чем помочь?"
    assert hops == ["_start_reading_knowledge", "_finalize"], hops
    assert [t.name for t in chat_model.calls[0].tools] == []
