"""«Обращение» — по ответу или клику, не на сыром retrieve (seed: test_access_signal.py)."""

import inspect

import pytest

from conversations import pipeline
from conversations.citations import CitationOut, answer_access_records
from tests.conversations.conftest import candidate, result, search_then

pytestmark = [pytest.mark.unit]


def test_cited_entity_gives_a_signal(memory_engine, alice):
    """сущность в ответе → сигнал: упакована и процитирована → засчитывается ровно один раз на ответ."""
    memory_engine.ks.default = result(
        candidate(1, "Факт А.", chunk_id=11), candidate(1, "Факт Б.", chunk_id=12, rank=2)
    )
    memory_engine.script(*search_then("факты", "Факт А [1]. Факт Б [2]. Ещё раз А [1]."))

    outcome = memory_engine.turn(alice, "Какие факты?")

    assert [(r, kind, m) for r, _, kind, m in memory_engine.ks.accesses] == [
        (1, "answer", str(outcome.done.message_id))
    ]


def test_click_on_a_source_gives_a_signal():
    """клик по источнику → сигнал: отдельное обращение по той записи.

    The click path itself (POST /api/messages/{id}/citations/{record_id}/click → register_access
    kind=click) runs over HTTP in test_api_conversations.py::test_citation_click_registers_access.
    """
    from conversations import api

    source = inspect.getsource(api.citations_click)
    assert '"click"' in source and "register_access" in source


def test_raw_retrieve_does_not_count(memory_engine, alice):
    """сырой retrieve не считается: кандидат вернулся, но в ответ не вошёл → сигнала нет."""
    memory_engine.ks.default = result(
        candidate(1, "Нужное."), candidate(2, "Лишнее.", rank=2), candidate(3, "Тоже.", rank=3)
    )
    memory_engine.script(*search_then("нужное", "Нужное [1]."))

    memory_engine.turn(alice, "Что нужно?")

    assert [r for r, *_ in memory_engine.ks.accesses] == [1]


def test_signal_is_only_an_input_for_ks_decay():
    """сигнал — вход для KS-decay: обращение лишь регистрируется; trust_score — забота KS."""
    citations = [
        CitationOut(5, 1, "t", "u", "files", "x", 1, (1,)),
        CitationOut(5, 2, "t", "u", "files", "y", 2, (2,)),
        CitationOut(None, None, "web", "https://w", "web", "z", 3, (3,)),
    ]

    assert answer_access_records(citations) == [5]  # once per record; web results are not KS records
    source = inspect.getsource(pipeline)
    assert "trust_score" not in source  # QE never touches trust scoring
    assert "register_access" in source
