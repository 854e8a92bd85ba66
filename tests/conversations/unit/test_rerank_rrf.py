"""RRF-слияние из KS даёт стабильный порядок (seed: test_rerank_rrf.py)."""

import random

import pytest

from conversations.ranking import order_and_cut, rrf_order
from tests.conversations.conftest import EMPTY, candidate, result, search_then

pytestmark = [pytest.mark.unit]


def test_rrf_v1_keeps_ks_order():
    """RRF v1 — порядок из KS: QE не переоценивает заново, опирается на RRF-ранг."""
    # Text overlap with the query would reorder these; v1 must not.
    ks = [
        candidate(3, "совсем не про отпуск", rank=1),
        candidate(1, "отпуск отпуск отпуск", rank=2),
        candidate(2, "отпуск", rank=3),
    ]

    kept, cut = order_and_cut(ks, limit=10)

    assert [c.record_id for c in kept] == [3, 1, 2]
    assert cut == []


def test_deterministic_order_with_stable_ties():
    """детерминированность: те же кандидаты → тот же порядок бит-в-бит; тай-брейк стабилен."""
    tied = [candidate(r, rank=1, score=0.5, chunk_id=c) for r, c in [(5, 2), (5, 1), (2, 9), (9, 1)]]
    orders = set()
    for seed in range(20):
        shuffled = tied[:]
        random.Random(seed).shuffle(shuffled)
        orders.add(tuple((c.record_id, c.chunk_id) for c in rrf_order(shuffled)))

    assert orders == {((2, 9), (5, 1), (5, 2), (9, 1))}


def test_top_k_cut(memory_engine, alice):
    """усечение top-K: после слияния список режется до бюджета упаковки; отсечённые в augment не попадают."""
    memory_engine.settings(retrieval_top_k=2)
    memory_engine.ks.default = result(*[candidate(i, f"Факт номер {i}.") for i in range(1, 6)])
    memory_engine.script(*search_then("факты", "Факт номер 1 [1]. Факт номер 4 [4]."))

    outcome = memory_engine.turn(alice, "Какие факты?")

    context = memory_engine.calls[1].messages[-1].content
    assert "Факт номер 1." in context and "Факт номер 2." in context
    assert "Факт номер 3." not in context and "Факт номер 5." not in context
    # [4] pointed at a cut candidate: not citable.
    assert [c["record_id"] for c in outcome.done.citations] == [1]
    assert [p["record_id"] for p in memory_engine.store.traces[0]["packed"]] == [1, 2]


def test_empty_input_is_an_empty_list(memory_engine, alice):
    """пустой вход: retrieval ничего не вернул → пустой список, не ошибка — ведёт к «не нашёл»."""
    assert order_and_cut([], limit=8) == ([], [])
    memory_engine.ks.default = EMPTY
    memory_engine.script(*search_then("ничего", "не должно быть вызвано"))

    outcome = memory_engine.turn(alice, "Что-то несуществующее?")

    assert outcome.error is None
    assert "не нашёл" in outcome.text
    assert len(memory_engine.calls) == 1  # the engine answered, not the model
