"""Граница беседы: новая vs продолжение по conversation_id (seed: test_session_boundary.py, P1)."""

import pytest
from django.test import Client

from conversations.models import Conversation, Message
from tests.llm_fake import answer

pytestmark = [pytest.mark.integration, pytest.mark.p1]


def test_with_id_continues_without_id_starts_new(engine, user):
    """со ссылкой — продолжение, без — новая: единственный признак границы, отдельной команды нет."""
    engine.script(answer("один"), answer("два"), answer("три"))
    first = engine.turn(user, "Первое")

    continued = engine.turn(user, "Второе", conversation_id=first.conversation_id)
    fresh = engine.turn(user, "Третье")

    assert continued.conversation_id == first.conversation_id
    assert fresh.conversation_id != first.conversation_id
    assert [m.content for m in engine.model.calls[1].messages[1:]] == ["Первое", "один", "Второе"]
    assert [m.content for m in engine.model.calls[2].messages[1:]] == ["Третье"]
    assert Message.objects.filter(conversation_id=first.conversation_id).count() == 4


def test_lazy_creation_new_chat_is_empty_on_server(engine, user, client_for):
    """ленивое создание: строка conversations рождается на первом сообщении; «новый чат» ничего не открывает."""
    client = client_for(user)
    assert client.post("/api/conversations", data={}, content_type="application/json").status_code in (404, 405)
    assert Conversation.objects.count() == 0
    engine.script(answer("ok"))

    outcome = engine.turn(user, "Привет")

    assert list(Conversation.objects.values_list("pk", flat=True)) == [__import__("uuid").UUID(outcome.conversation_id)]


def test_created_id_is_returned(engine, user):
    """возврат id созданной беседы: идентификатор новой беседы возвращается и годен для следующего хода."""
    engine.script(answer("ok"), answer("ok"))
    first = engine.turn(user, "Привет")

    conversation_id = first.done.conversation_id
    second = engine.turn(user, "Ещё", conversation_id=conversation_id)

    assert conversation_id == first.conversation_id == second.done.conversation_id
    assert Conversation.objects.get(pk=conversation_id).user == user


def test_thread_does_not_expire_from_idleness(engine, user):
    """тред устойчив — не истекает по простою: продолжаем по id, пока не удалили."""
    from django.db import connection

    engine.script(answer("ok"), answer("всё ещё здесь"))
    first = engine.turn(user, "Привет")
    with connection.cursor() as cursor:  # a year of silence
        cursor.execute("SET session_replication_role = replica")  # triggers off for this backdating
        cursor.execute(
            "UPDATE conversations SET updated_at = now() - interval '400 days', "
            "created_at = now() - interval '400 days'"
        )
        cursor.execute("SET session_replication_role = DEFAULT")

    later = engine.turn(user, "Ты тут?", conversation_id=first.conversation_id)

    assert later.error is None and later.text == "всё ещё здесь"
    assert Client().get(f"/api/conversations/{first.conversation_id}").status_code == 401  # only the login expires
