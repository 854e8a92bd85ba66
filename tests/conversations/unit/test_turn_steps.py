"""A turn's steps over the doubles (memory store, stub KS, fake cache): the same merged thread hops
as production (``conversations.deps.EngineDeps``), with the same guarantees — the cache generation
read before the search, access signals after the answer is stored and never raising, the finalize
retried while the database is away. The hop tests failed before the doubles went through
``EngineDeps``' steps: they took an async path of their own, with no hop at all."""

import pytest
from django.db import OperationalError

from conversations import deps as engine_deps
from tests.conversations.conftest import answer, candidate, result, search_then

pytestmark = [pytest.mark.unit]

HOPS = ["_start_reading_knowledge", "_cache_gate", "_finalize"]


def test_a_grounding_turn_over_the_doubles_is_three_hops(memory_engine, alice, hops):
    memory_engine.ks.default = result(candidate(1, "Факт."))
    memory_engine.script(*search_then("факт", "Факт [1]."), *search_then("факт", "Факт [1]."))

    first = memory_engine.turn(alice, "Какой факт?")
    assert hops == HOPS, hops
    hops.clear()
    second = memory_engine.turn(alice, "Какой факт?", conversation_id=first.conversation_id)
    assert hops == HOPS, hops

    assert memory_engine.ks.queries == ["факт"]
    assert [t["cache_hit"] for t in memory_engine.store.traces] == [False, True]
    assert [(r, m) for r, _, _, m in memory_engine.ks.accesses] == [
        (1, str(first.done.message_id)),
        (1, str(second.done.message_id)),
    ]


def test_a_conversational_turn_is_two_hops(memory_engine, alice, hops):
    memory_engine.script(answer("Привет!"))

    outcome = memory_engine.turn(alice, "Привет")

    assert outcome.done is not None
    assert hops == ["_start_reading_knowledge", "_finalize"], hops


def test_the_generation_is_read_before_the_search(memory_engine, alice):
    """A write between the two leaves a newer result under the older generation, never the reverse."""
    calls = []
    ks = memory_engine.ks
    search, generation = ks.search, ks.generation
    ks.search = lambda *a: calls.append("search") or search(*a)
    ks.generation = lambda: calls.append("generation") or generation()
    ks.default = result(candidate(1, "Факт."))
    memory_engine.script(*search_then("факт", "Факт [1]."))

    memory_engine.turn(alice, "Какой факт?")

    assert calls == ["generation", "search"]


def test_access_signals_follow_the_stored_answer_and_never_raise(memory_engine, alice):
    store, seen = memory_engine.store, []

    def register_access(record_id, identity, kind, message_id):
        seen.append([m["id"] for m in store.assistant])  # what was stored when the signal went
        raise RuntimeError("access log down")

    memory_engine.ks.register_access = register_access
    memory_engine.ks.default = result(candidate(1, "Факт А."), candidate(2, "Факт Б.", rank=2))
    memory_engine.script(*search_then("факт", "Факт А [1]. Факт Б [2]."))

    outcome = memory_engine.turn(alice, "Какой факт?")

    assert outcome.done is not None and outcome.error is None
    assert seen == [[outcome.done.message_id], [outcome.done.message_id]]  # both tried, after the write
    assert len(store.assistant) == 1  # a failed signal never retries (and doubles) the answer


def test_the_finalize_is_retried_while_the_database_is_away(memory_engine, alice, monkeypatch, hops):
    store = memory_engine.store
    finalize, failures = store.finalize, {"left": 2}

    def flaky(**fields):
        if failures["left"]:
            failures["left"] -= 1
            raise OperationalError("server closed the connection unexpectedly")
        return finalize(**fields)

    monkeypatch.setattr(store, "finalize", flaky)
    monkeypatch.setattr(engine_deps, "FINALIZE_RETRY_SECONDS", 5.0)
    memory_engine.script(answer("Дошло."))

    outcome = memory_engine.turn(alice, "Вопрос")

    assert outcome.done is not None and failures["left"] == 0
    assert [m["content"] for m in store.assistant] == ["Дошло."]
    assert hops == ["_start_reading_knowledge", "_finalize", "_finalize", "_finalize"], hops


def test_an_is_empty_failing_at_the_start_is_read_again_by_the_stream(memory_engine, alice, hops):
    ks = memory_engine.ks
    is_empty, failures = ks.is_empty, {"left": 1}

    def flaky():
        if failures["left"]:
            failures["left"] -= 1
            raise OperationalError("connection reset")
        return is_empty()

    ks.is_empty = flaky
    memory_engine.script(answer("Привет!"))

    outcome = memory_engine.turn(alice, "Привет")

    assert outcome.done is not None and failures["left"] == 0
    assert hops == ["_start_reading_knowledge", "flaky", "_finalize"], hops  # flaky: the KS's is_empty, read again


def test_a_database_away_past_the_retries_ends_with_database_unavailable_and_frees_the_thread(
    memory_engine, alice, monkeypatch
):
    """Failed before the fix: the stream ended ``internal_error`` and nothing said the turn was over,
    so its thread answered 409 ``turn_in_progress`` for the whole answer window (~4.5 min)."""
    import psycopg

    # given: the database stays away for longer than the finalize's retry window
    store = memory_engine.store

    def away(**fields):
        raise OperationalError("connection failed") from psycopg.OperationalError("connection failed")

    monkeypatch.setattr(store, "finalize", away)
    monkeypatch.setattr(engine_deps, "FINALIZE_RETRY_SECONDS", 0.0)
    memory_engine.script(answer("Некуда записать."))

    # when
    outcome = memory_engine.turn(alice, "Вопрос")

    # then: the error event names the code and the thread, and the turn said it is over
    assert outcome.error is not None
    payload = outcome.error.payload()
    assert payload["code"] == "database_unavailable"
    assert payload["conversation_id"] == outcome.conversation_id and payload["message_id"] is None
    question = next(m for m in store.messages if m["role"] == "user")
    assert store.abandoned == [question["id"]]
