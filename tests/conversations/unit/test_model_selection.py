"""Липкий выбор модели: намерение на сессии ≠ факт на сообщении (seed: test_model_selection.py).

DB companions (the PATCH path, updated_at moved by the trigger) are in
test_api_conversations.py::test_patch_selected_model_validated_and_sticky.
"""

import pytest

from achilles.errors import ValidationFailed
from achilles.llm import ModelSpec
from conversations.rules import effective_model, resolve_selected_model
from tests.llm_fake import answer

pytestmark = [pytest.mark.unit]


def test_validated_against_admin_allow_list(memory_engine, alice):
    """валидация по allow-list Admin: модель вне списка отбивается, в строку сессии не пишется."""
    memory_engine.script(answer("ok"))
    conversation_id = memory_engine.turn(alice, "Привет").conversation_id

    with pytest.raises(ValidationFailed) as refused:
        memory_engine.store.select_model(conversation_id, "gpt-unlisted")

    assert refused.value.status == 422 and refused.value.code == "unknown_model"  # the allow-list's one vocabulary
    assert memory_engine.store.conversations[conversation_id]["selected_model"] is None
    with pytest.raises(ValidationFailed):
        resolve_selected_model("embedder", {"fake-chat": object()})


def test_null_means_default_model(memory_engine, alice):
    """NULL → модель по умолчанию: пустой selected_model → беседа идёт на модели по умолчанию."""
    memory_engine.script(answer("ok"))

    memory_engine.turn(alice, "Привет")

    assert memory_engine.store.assistant[0]["model_name"] == "fake-chat"
    default = ModelSpec("default", "scripted")
    assert effective_model(None, default) is default
    assert resolve_selected_model(None, {}) is None


def test_intent_is_not_fact(memory_engine, alice):
    """намерение ≠ факт: selected_model — «чем дальше»; messages.model — чем реально сгенерён ответ."""
    memory_engine.script(answer("ok"))

    conversation_id = memory_engine.turn(alice, "Привет").conversation_id

    assert memory_engine.store.conversations[conversation_id]["selected_model"] is None  # intent: "the default"
    assert memory_engine.store.assistant[0]["model_name"] == "fake-chat"  # fact: a concrete model


def test_sticky_edits_the_session_not_the_past(memory_engine, alice):
    """липкость — правит сессию, не прошлое: смена действует на следующие ответы; прошлые не меняются."""
    memory_engine.store.models["big-chat"] = ModelSpec("big-chat", "scripted", context_window=32000)
    memory_engine.script(answer("первый"), answer("второй"))
    conversation_id = memory_engine.turn(alice, "Раз").conversation_id

    memory_engine.store.select_model(conversation_id, "big-chat")
    memory_engine.turn(alice, "Два", conversation_id=conversation_id)

    first, second = memory_engine.store.assistant
    assert (first["model_name"], second["model_name"]) == ("fake-chat", "big-chat")
    assert memory_engine.store.conversations[conversation_id]["selected_model"].name == "big-chat"
