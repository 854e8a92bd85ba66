"""The turn's own statements (issue 15: CPU per turn): the new thread's start — the default chat
model, the thread and the question in one statement — and the finalize. They must read and write
exactly what the ORM path did, with every table and column name taken from the models."""

import pytest

from achilles.errors import ServiceUnavailable
from achilles.models import AllowedModel
from conversations import services
from conversations.models import Citation, Conversation, Message, RetrievalTrace

pytestmark = [pytest.mark.integration]


def test_the_start_reads_the_default_model_as_the_orm_does(chat_model, user):
    chat_model.model.options = {"base_url": "http://model.example/v1", "timeout": 7}
    chat_model.model.save()

    start = services.turn_start(user=user, content="  Сколько дней отпуска?  ", conversation_id=None)

    orm = AllowedModel.objects.get(kind="chat", is_default=True)
    assert start.model == orm.spec()  # options (a JSON column) parsed as the ORM parses them
    assert start.created and start.history == ()
    thread = Conversation.objects.get(pk=start.conversation_id)
    assert thread.user_id == user.pk and thread.title == "Сколько дней отпуска?"
    question = Message.objects.get(pk=start.user_message_id)
    assert (question.conversation_id, question.role, question.content, question.state) == (
        thread.pk,
        "user",
        "Сколько дней отпуска?",
        "complete",
    )


def test_no_default_chat_model_writes_nothing(db, model_factory, user):
    # An embedding default does not count: only a chat model generates.
    model_factory(name="embedder", provider="hash", kind="embedding", is_default=True)
    model_factory(name="not-default", provider="scripted", is_default=False)

    with pytest.raises(ServiceUnavailable) as refused:
        services.turn_start(user=user, content="Привет", conversation_id=None)

    assert refused.value.status == 503 and refused.value.code == "no_default_model"
    assert not Conversation.objects.exists() and not Message.objects.exists()


def test_the_statement_follows_the_models_names():
    sql, fields = services._thread_start_sql()
    for meta in (AllowedModel._meta, Conversation._meta, Message._meta):
        assert f'"{meta.db_table}"' in sql
    assert [f.attname for f in fields] == [f.attname for f in AllowedModel._meta.concrete_fields]


def test_the_finalize_statement_follows_the_models_names():
    parts = services._finalize_sql()
    sql = parts.answer + parts.citations + parts.trace + parts.returning
    for model in (Conversation, Message, Citation, RetrievalTrace):
        assert f'"{model._meta.db_table}"' in sql
    # every column of the trace but its key, message and stamps is written, JSON ones as JSON
    written = {name for name, _ in parts.trace_fields}
    expected = {f.name for f in RetrievalTrace._meta.concrete_fields} - {"id", "message", "created_at", "updated_at"}
    assert written == expected
    assert dict(parts.trace_fields)["candidates"] is True and dict(parts.trace_fields)["cache_hit"] is False
    assert set(parts.citation_keys) == set(services._CITATION_FIELDS)
