"""Кэш-гейт на входе: hit минует retrieve, ключ несёт identity (seed: test_cache_gate.py)."""

import pytest

from knowledge.facade import Identity
from tests.conversations.conftest import candidate, result, search_then

pytestmark = [pytest.mark.unit]


def test_hit_skips_retrieve(memory_engine, alice):
    """hit минует embed + retrieve: точный повтор той же личности → из кэша, KS не вызывается."""
    memory_engine.ks.default = result(candidate(1, "Факт."))
    memory_engine.script(*search_then("факт", "Факт [1]."), *search_then("факт", "Факт [1]."))

    memory_engine.turn(alice, "Какой факт?")
    second = memory_engine.turn(alice, "Какой факт?")

    assert memory_engine.ks.queries == ["факт"]
    assert second.done.citations[0]["record_id"] == 1
    assert [t["cache_hit"] for t in memory_engine.store.traces] == [False, True]


def test_miss_goes_on_and_stores(memory_engine, alice):
    """miss → маршрут идёт дальше: обычный проход в retrieval, результат кладётся в кэш под своим ключом."""
    memory_engine.settings(cache_ttl_seconds=120)
    memory_engine.ks.default = result(candidate(1, "Факт."))
    memory_engine.script(*search_then("факт", "Факт [1]."))

    memory_engine.turn(alice, "Какой факт?")

    assert memory_engine.ks.queries == ["факт"]
    [(key, value)] = memory_engine.cache.entries.items()
    assert value.candidates[0].record_id == 1
    assert memory_engine.cache.ttls[key] == 120


def test_key_carries_identity(memory_engine, alice, bob):
    """ключ несёт identity: тот же запрос от другой identity → промах, чужая запись не переиспользуется."""
    memory_engine.ks.default = result(candidate(1, "Факт."))
    memory_engine.script(*search_then("факт", "Факт [1]."), *search_then("факт", "Факт [1]."))

    memory_engine.turn(alice, "Какой факт?")
    memory_engine.turn(bob, "Какой факт?")

    assert memory_engine.ks.queries == ["факт", "факт"]
    assert [i.user_id for i in memory_engine.ks.identities] == [1, 2]
    assert len(memory_engine.cache.entries) == 2
    from conversations.cache import cache_key

    a = Identity(principals=frozenset({"user:1", "everyone"}), user_id=1)
    b = Identity(principals=frozenset({"user:2", "everyone"}), user_id=2)
    assert cache_key("факт", a, 7) != cache_key("факт", b, 7)


def test_an_entry_from_before_a_knowledge_change_is_not_served(memory_engine, alice):
    """права не обходятся через общий кэш: после записи в KS (новое поколение) запись кэша не отдаётся."""
    memory_engine.ks.default = result(candidate(1, "Факт."))
    memory_engine.script(
        *search_then("факт", "Факт [1]."), *search_then("факт", "Факт [1]."), *search_then("факт", "Факт [1].")
    )

    memory_engine.turn(alice, "Какой факт?")
    memory_engine.ks.content_generation += 1  # a record re-ACLed, edited or deleted
    memory_engine.turn(alice, "Какой факт?")
    memory_engine.turn(alice, "Какой факт?")

    assert memory_engine.ks.queries == ["факт", "факт"]
    assert [t["cache_hit"] for t in memory_engine.store.traces] == [False, False, True]


def test_exact_not_semantic(memory_engine, alice):
    """точный, не семантический: ключ = самостоятельная формулировка; иной текст → промах."""
    memory_engine.ks.default = result(candidate(1, "Факт."))
    memory_engine.script(
        *search_then("отпуск сотрудника", "Факт [1]."),
        *search_then("отпуск сотрудников", "Факт [1]."),
        *search_then("отпуск сотрудника", "Факт [1]."),
    )

    memory_engine.turn(alice, "Какой у сотрудника отпуск?")  # raw messages differ…
    memory_engine.turn(alice, "Отпуск у сотрудников какой?")
    memory_engine.turn(alice, "А отпуск сотрудника?")  # …the standalone query decides

    assert memory_engine.ks.queries == ["отпуск сотрудника", "отпуск сотрудников"]
    assert [t["cache_hit"] for t in memory_engine.store.traces] == [False, False, True]
