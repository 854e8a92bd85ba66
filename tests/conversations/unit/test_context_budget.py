"""Общий бюджет окна: история, контекст, резерв под ответ (seed: test_context_budget.py)."""

import pytest

from achilles.errors import ValidationFailed
from achilles.llm import Message, estimate_input_tokens
from conversations.packing import PackedSource, fit_history, pack_context
from tests.conversations.conftest import candidate, cite_every_source, result

pytestmark = [pytest.mark.unit]

WORDS = "слово " * 40  # ≈ 60 tokens by the local estimate


def test_history_dropped_oldest_first(memory_engine, alice):
    """история усекается с конца: старые реплики отбрасываются по токенам от начала; текущая — целиком."""
    system = Message("system", "правила")
    history = [Message("user" if i % 2 == 0 else "assistant", f"реплика {i} " + WORDS) for i in range(10)]
    current = Message("user", "текущий вопрос " + WORDS * 3)

    fit = fit_history(window=1000, reserve=300, system=system, history=history, current=current)

    assert 0 < len(fit.kept) < len(history)
    assert list(fit.kept) == history[-len(fit.kept) :]  # the newest survive, the oldest go first
    with pytest.raises(ValidationFailed):  # a message that cannot fit whole is refused, never cut
        fit_history(window=200, reserve=100, system=system, history=[], current=current)

    # Through the engine: round 1 carries the newest history and the whole current message.
    memory_engine.store.models["fake-chat"] = memory_engine.store.models["fake-chat"].__class__(
        "fake-chat", "scripted", context_window=1500
    )
    memory_engine.settings(answer_reserve_tokens=200)
    from tests.llm_fake import answer

    memory_engine.script(*[answer(f"ответ {i} " + WORDS) for i in range(6)])
    conversation_id = None
    for i in range(6):
        conversation_id = memory_engine.turn(
            alice, f"вопрос {i} " + WORDS, conversation_id=conversation_id
        ).conversation_id
    last = memory_engine.calls[-1].messages
    assert last[-1].content == ("вопрос 5 " + WORDS).strip()  # whole, never cut
    assert "вопрос 0" not in " ".join(m.content for m in last)
    assert last[-2].content.startswith("ответ 4")  # the newest history is kept


def test_augment_fills_what_history_left(memory_engine, alice):
    """augment в остаток истории: фрагменты от важного к менее важному под остаток; отсечённые не идут."""
    sources = [
        PackedSource(
            marker=0, record_id=i, chunk_id=i, title=f"t{i}", url="", source_system="files", text=WORDS, rank=i
        )
        for i in range(1, 11)
    ]
    roomy, _ = pack_context(sources, available=800)
    tight, cut = pack_context(sources, available=300)

    assert len(tight) < len(roomy)
    assert [s.record_id for s in tight] == list(range(1, len(tight) + 1))  # most relevant first
    assert [s.record_id for s in cut] == list(range(len(tight) + 1, 11))

    # Through the engine: a long history leaves less room, so fewer sources are packed.
    def turn_packing(history_words: int) -> int:
        memory_engine.ks.default = result(*[candidate(i, f"Факт {i}. " + WORDS) for i in range(1, 9)])
        from tests.llm_fake import answer, call_tool

        memory_engine.script(
            answer("x " * history_words), call_tool("search_knowledge", query=f"q{history_words}"), cite_every_source
        )
        conversation_id = memory_engine.turn(alice, "привет").conversation_id
        memory_engine.turn(alice, "Какие факты?", conversation_id=conversation_id)
        return len(memory_engine.store.traces[-1]["packed"])

    memory_engine.store.models["fake-chat"] = memory_engine.store.models["fake-chat"].__class__(
        "fake-chat", "scripted", context_window=1200
    )
    memory_engine.settings(answer_reserve_tokens=200)
    assert turn_packing(history_words=5) > turn_packing(history_words=300)


def test_answer_reserve_protected(memory_engine, alice):
    """резерв под ответ защищён: ни история, ни контекст не съедают место под генерацию."""
    window, reserve = 1500, 400
    memory_engine.store.models["fake-chat"] = memory_engine.store.models["fake-chat"].__class__(
        "fake-chat", "scripted", context_window=window
    )
    memory_engine.settings(answer_reserve_tokens=reserve)
    memory_engine.ks.default = result(*[candidate(i, f"Факт {i}. " + WORDS * 2) for i in range(1, 30)])
    from tests.llm_fake import call_tool

    rounds = []
    for i in range(5):
        rounds += [call_tool("search_knowledge", query=f"факт {i}"), cite_every_source]
    memory_engine.script(*rounds)
    conversation_id = None
    for i in range(5):
        conversation_id = memory_engine.turn(
            alice, f"вопрос {i} " + WORDS, conversation_id=conversation_id
        ).conversation_id

    for call in memory_engine.calls:
        assert call.max_tokens == reserve
        assert estimate_input_tokens(call.messages, call.tools) <= window - reserve
