"""Перенос контекста между сообщениями сессии (seed: test_multi_turn.py, P1)."""

import pytest

from conversations import pipeline
from conversations.models import RetrievalTrace
from tests.conversations.conftest import candidate, cite_every_source, result, search_then
from tests.llm_fake import ScriptedChatProvider, answer, call_tool

pytestmark = [pytest.mark.integration, pytest.mark.p1]


def test_history_drives_the_query(engine, user):
    """история ведёт формулировку запроса: follow-up → самостоятельный запрос с учётом предыдущего."""
    engine.ks.default = result(candidate(1, "Руководитель отдела продаж — Иванов. Иванов в отпуске с 1 по 14 июля."))

    def standalone_from_history(call):
        # The model sees the earlier turn and substitutes the subject for «у него».
        history = " ".join(m.content for m in call.messages if m.role in ("user", "assistant"))
        assert "Иванов" in history
        return call_tool("search_knowledge", query="отпуск Иванова")

    engine.script(
        *search_then("кто руководитель отдела продаж", "Руководитель — Иванов [1]."),
        standalone_from_history,
        cite_every_source,
    )
    first = engine.turn(user, "Кто руководит отделом продаж?")

    engine.turn(user, "а когда у него отпуск?", conversation_id=first.conversation_id)

    assert engine.ks.queries == ["кто руководитель отдела продаж", "отпуск Иванова"]


def test_context_within_session_bounds(engine, user):
    """контекст в границах сессии: одна сессия видит общую историю; другая сессия того же пользователя изолирована."""
    engine.script(answer("Запомнил: проект «Гермес»."), answer("ok"), answer("ok"))
    first = engine.turn(user, "Мой проект — «Гермес».")

    engine.turn(user, "Какой у меня проект?", conversation_id=first.conversation_id)
    engine.turn(user, "Какой у меня проект?")  # a new conversation

    same_thread, other_thread = engine.model.calls[1], engine.model.calls[2]
    assert "«Гермес»" in " ".join(m.content for m in same_thread.messages)
    assert "Гермес" not in " ".join(m.content for m in other_thread.messages)


def test_grounding_message_own_retrieve(engine, user):
    """grounding-сообщение — свой retrieve: факты — свежим retrieval на каждом grounding-ходе; разговорные ходы поиск не трогают."""
    engine.ks.results["отпуск"] = result(candidate(1, "Отпуск 28 дней."))
    engine.ks.results["больничный"] = result(candidate(2, "Больничный оформляется в HR."))
    engine.script(
        call_tool("search_knowledge", query="отпуск"),
        cite_every_source,
        answer("Пожалуйста!"),
        call_tool("search_knowledge", query="больничный"),
        cite_every_source,
    )
    first = engine.turn(user, "Сколько отпуска?")
    engine.turn(user, "Спасибо!", conversation_id=first.conversation_id)

    third = engine.turn(user, "А больничный?", conversation_id=first.conversation_id)

    assert engine.ks.queries == ["отпуск", "больничный"]
    assert RetrievalTrace.objects.count() == 2
    round_two = engine.model.calls[4].messages
    tool = round_two[-1].content
    assert "Больничный" in tool and "Отпуск 28 дней." not in tool  # the earlier context is not re-used
    assert [c["record_id"] for c in third.done.citations] == [2]


def test_session_survives_restart(engine, user):
    """сессия переживает рестарт: история на стороне QE — доступна после переподключения."""
    engine.script(answer("Записал: дедлайн 15 мая."))
    first = engine.turn(user, "Запиши: дедлайн 15 мая.")

    # "Restart": fresh engine dependencies and a fresh model instance; only the database remains.
    restarted = ScriptedChatProvider([answer("Дедлайн 15 мая.")])
    pipeline.set_engine_deps(
        pipeline.EngineDeps(knowledge=engine.ks, cache=engine.cache, chat_provider=lambda spec: restarted)
    )
    engine.turn(user, "Какой дедлайн?", conversation_id=first.conversation_id)

    history = [(m.role, m.content) for m in restarted.calls[0].messages[1:]]
    assert history == [
        ("user", "Запиши: дедлайн 15 мая."),
        ("assistant", "Записал: дедлайн 15 мая."),
        ("user", "Какой дедлайн?"),
    ]
