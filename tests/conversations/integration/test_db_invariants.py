"""The Query Engine's invariants held by PostgreSQL itself (companions of the unit cases that
name a database guarantee: test_route «ровно один снимок», test_feedback, test_model_selection)."""

import pytest
from django.db import IntegrityError, connection, transaction

from conversations.models import Citation, Conversation, Message, RetrievalTrace
from conversations.services import conversation_update, message_feedback_set

pytestmark = [pytest.mark.integration]


@pytest.fixture
def thread(conversation_factory, user):
    return conversation_factory(user, [("user", "Вопрос"), ("assistant", "Ответ")])


def _assistant(thread):
    return thread.messages.get(role="assistant")


def _trace(message):
    return RetrievalTrace(message=message, standalone_query="q", identity={"principals": ["everyone"]})


def test_second_trace_for_a_message_is_rejected_by_unique(thread):
    message = _assistant(thread)
    _trace(message).save()
    # raw SQL: the database, not the ORM, says no
    with pytest.raises(IntegrityError), transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO retrieval_trace (message_id, standalone_query, identity, candidates, packed, "
            "withheld, web_results, cache_hit, timings, ungrounded_sentences) VALUES "
            "(%s, 'q2', '{}', '[]', '[]', '[]', '[]', false, '{}', '[]')",
            [message.pk],
        )
    assert RetrievalTrace.objects.filter(message=message).count() == 1


@pytest.mark.parametrize("value", [0, 2, -2, 5])
def test_feedback_check_rejected_by_the_database(thread, value):
    message = _assistant(thread)
    with pytest.raises(IntegrityError), transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("UPDATE messages SET feedback = %s WHERE id = %s", [value, message.pk])


def test_feedback_on_user_message_rejected_by_the_database(thread):
    question = thread.messages.get(role="user")
    with pytest.raises(IntegrityError), transaction.atomic():
        Message.objects.filter(pk=question.pk).update(feedback=1)


def test_feedback_update_in_place_moves_updated_at_only(thread, user):
    message = _assistant(thread)
    with connection.cursor() as cursor:  # rated a day after it was written
        cursor.execute("SET session_replication_role = replica")  # triggers off for this backdating
        cursor.execute("UPDATE messages SET updated_at = now() - interval '1 day' WHERE id = %s", [message.pk])
        cursor.execute("SET session_replication_role = DEFAULT")
    before = Message.objects.get(pk=message.pk)
    count = Message.objects.count()

    message_feedback_set(user=user, message_id=message.pk, value=1)
    message_feedback_set(user=user, message_id=message.pk, value=-1)

    after = Message.objects.get(pk=message.pk)
    assert Message.objects.count() == count
    assert (after.feedback, after.content, after.role) == (-1, before.content, before.role)
    assert after.updated_at > before.updated_at  # moved by the trigger
    with connection.cursor() as cursor:
        cursor.execute("SELECT tgname FROM pg_trigger WHERE tgname = 'messages_bump_updated_at'")
        assert cursor.fetchone()


def test_role_and_state_checks(thread):
    with pytest.raises(IntegrityError), transaction.atomic():
        Message.objects.create(conversation=thread, role="system", content="x")
    with pytest.raises(IntegrityError), transaction.atomic():
        Message.objects.create(conversation=thread, role="assistant", content="x", state="half-written")
    with pytest.raises(IntegrityError), transaction.atomic():
        Message.objects.create(conversation=thread, role="user", content="x", tokens_used=5)


def test_deleting_the_user_cascades_in_the_database(thread, user):
    message = _assistant(thread)
    _trace(message).save()
    Citation.objects.create(message=message, record_id=1, title="t", source_system="files", rank=1)
    with connection.cursor() as cursor:  # one DELETE; the database cascades the rest
        cursor.execute("DELETE FROM api_tokens WHERE user_id = %s", [user.pk])
        cursor.execute("DELETE FROM users WHERE id = %s", [user.pk])
    assert not Conversation.objects.exists() and not Message.objects.exists()
    assert not RetrievalTrace.objects.exists() and not Citation.objects.exists()


def test_model_switch_moves_updated_at_and_removed_model_sets_null(thread, user, model_factory):
    big = model_factory(name="big-chat", provider="builtin")
    with connection.cursor() as cursor:
        cursor.execute("SET session_replication_role = replica")
        cursor.execute("UPDATE conversations SET updated_at = now() - interval '1 day'")
        cursor.execute("SET session_replication_role = DEFAULT")
    before = Conversation.objects.get(pk=thread.pk).updated_at

    conversation_update(user=user, conversation_id=thread.pk, fields={"selected_model": "big-chat"})

    switched = Conversation.objects.get(pk=thread.pk)
    assert switched.selected_model_id == big.pk and switched.updated_at > before
    assert _assistant(thread).model == "fake-chat"  # past answers keep their fact
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM agent_models WHERE id = %s", [big.pk])
    assert Conversation.objects.get(pk=thread.pk).selected_model_id is None
