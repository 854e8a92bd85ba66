"""How many thread hops a chat turn costs (issue 15: CPU per turn), production dependencies or doubles.

Each ``sync_to_async`` call wakes the worker thread and then the event loop (≈ 0.3–0.5 ms of CPU on
this machine besides the work). With the database store, the facade and Redis behind the engine, a
grounding turn's adjacent sync steps run as one hop each: the start with the «store empty?» read,
the cache gate with the search, the finalize with the access signals. Before, the same turn made
eight hops (start, is_empty, generation, cache get, search, cache set, finalize, register_access);
these tests failed then. The real Knowledge Store and Redis answer here; only the model is scripted.
"""

import pytest

from conversations.models import RetrievalTrace
from knowledge import facade
from knowledge.models import AccessSignal
from knowledge.search.embedding import forget_search_embedding_config
from tests.conversations.conftest import answer, candidate, cite_every_source, result, run_turn, search_then

pytestmark = [pytest.mark.integration]


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
    assert hops == ["_start_reading_knowledge", "_cache_gate", "_finalize"], hops
    hops.clear()
    second = run_turn(user, "Сколько дней отпуска?", conversation_id=first.conversation_id)
    assert hops == ["_start_reading_knowledge", "_cache_gate", "_finalize"], hops

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


def test_the_doubles_take_the_same_hops_over_the_database_store(engine, user, hops):
    """The stub KS and the fake cache behind the database store: the very steps production takes.
    Failed before: with any double the turn took a path of its own that production never ran (the
    stub's and the cache's calls awaited one by one on the event loop; hops: ``_start``, ``_finalize``)."""
    engine.ks.default = result(candidate(1, "Отпуск 28 дней."))
    engine.script(*search_then("отпуск", cite_every_source), *search_then("отпуск", cite_every_source))

    first = engine.turn(user, "Сколько дней отпуска?")
    assert hops == ["_start_reading_knowledge", "_cache_gate", "_finalize"], hops
    hops.clear()
    second = engine.turn(user, "Сколько дней отпуска?", conversation_id=first.conversation_id)
    assert hops == ["_start_reading_knowledge", "_cache_gate", "_finalize"], hops

    assert engine.ks.queries == ["отпуск"]  # the second came from the cache
    assert list(RetrievalTrace.objects.order_by("pk").values_list("cache_hit", flat=True)) == [False, True]
    assert [(r, m) for r, _, _, m in engine.ks.accesses] == [
        (1, str(first.done.message_id)),
        (1, str(second.done.message_id)),
    ]


@pytest.mark.django_db(transaction=True)
def test_the_sse_view_checks_the_credentials_in_the_start_step(engine, user, hops):
    """``POST /api/chat`` end to end: Django's request-started signal and the response's close are
    Django's own hops; the view adds none for the credentials. Failed before: the Bearer token was
    checked in a hop of its own (``_authenticate``) before the start's."""
    from tests.conversations.http import bearer, chat

    engine.ks.default = result(candidate(1, "Отпуск 28 дней."))
    engine.script(*search_then("отпуск", cite_every_source))
    headers = bearer(user)
    hops.clear()

    status, _, events = chat(headers, {"content": "Сколько дней отпуска?"})

    assert status == 200 and events[-1][0] == "done", events
    assert hops == ["sync_send", "_start_reading_knowledge", "_cache_gate", "_finalize", "close"], hops
