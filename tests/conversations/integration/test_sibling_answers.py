"""Regenerate and edit replace the answer in place and keep the earlier versions as siblings (issue 26)."""

import pytest
from django.db import IntegrityError, transaction

from conversations.models import Conversation, Message
from tests.llm_fake import answer

pytestmark = [pytest.mark.integration, pytest.mark.p1]


def _thread(user, conversation_id):
    from conversations import selectors

    conversation = Conversation.objects.get(pk=conversation_id)
    branch = selectors.conversation_branch(conversation=conversation)
    contents = dict(Message.objects.filter(id__in=branch.ids).values_list("id", "content"))
    return branch, [contents[i] for i in branch.ids]


def test_regenerate_adds_a_sibling_answer_to_the_same_question(engine, user):
    engine.script(answer("Первый ответ."), answer("Второй ответ."))
    first = engine.turn(user, "Привет")
    old_answer = first.done.message_id

    again = engine.turn(user, "", conversation_id=first.conversation_id, regenerate_of=old_answer)

    assert again.done is not None, again.events
    branch, contents = _thread(user, first.conversation_id)
    assert contents == ["Привет", "Второй ответ."]  # in place: one question, the new answer
    assert branch.siblings[branch.leaf] == (old_answer, again.done.message_id)
    assert Message.objects.filter(conversation_id=first.conversation_id, role="user").count() == 1
    # the model was asked the stored question again, with nothing of the first answer
    second_call = engine.model.calls[1]
    assert [m.content for m in second_call.messages if m.role in ("user", "assistant")] == ["Привет"]


def test_edit_asks_a_new_version_of_the_question_beside_the_old_one(engine, user):
    engine.script(answer("Ответ один."), answer("Ответ два."), answer("Ответ на правку."))
    first = engine.turn(user, "Вопрос один")
    second = engine.turn(user, "Вопрос два", conversation_id=first.conversation_id)
    question_two = Message.objects.get(conversation_id=first.conversation_id, content="Вопрос два")

    edited = engine.turn(user, "Вопрос два, иначе", conversation_id=first.conversation_id, edit_of=question_two.pk)

    branch, contents = _thread(user, first.conversation_id)
    assert contents == ["Вопрос один", "Ответ один.", "Вопрос два, иначе", "Ответ на правку."]
    assert branch.position(branch.ids[2]) == (2, 2)
    assert second.done.message_id not in branch.ids  # the old version's answer stays on its branch
    # the history of the edited question is the path above it, not the old version
    third_call = engine.model.calls[2]
    said = [m.content for m in third_call.messages if m.role in ("user", "assistant")]
    assert said == ["Вопрос один", "Ответ один.", "Вопрос два, иначе"]
    assert edited.done is not None


def test_flipping_to_an_older_answer_and_asking_on_continues_that_branch(engine, user):
    from conversations import services

    engine.script(answer("Старый."), answer("Новый."), answer("Дальше."))
    first = engine.turn(user, "Привет")
    engine.turn(user, "", conversation_id=first.conversation_id, regenerate_of=first.done.message_id)

    services.message_choose(user=user, message_id=first.done.message_id)
    engine.turn(user, "И что дальше?", conversation_id=first.conversation_id)

    _, contents = _thread(user, first.conversation_id)
    assert contents == ["Привет", "Старый.", "И что дальше?", "Дальше."]
    said = [m.content for m in engine.model.calls[2].messages if m.role in ("user", "assistant")]
    assert said == ["Привет", "Старый.", "И что дальше?"]


def test_a_foreign_or_wrong_kind_of_message_cannot_be_regenerated_or_edited(engine, user, user_factory):
    from achilles.errors import NotFound

    engine.script(answer("Ответ."))
    first = engine.turn(user, "Вопрос")
    question = Message.objects.get(conversation_id=first.conversation_id, role="user")
    other = user_factory(username="other-sibling")

    with pytest.raises(NotFound):  # a question is not an answer to regenerate
        engine.turn(user, "", conversation_id=first.conversation_id, regenerate_of=question.pk)
    with pytest.raises(NotFound):  # an answer is not a question to edit
        engine.turn(user, "x", conversation_id=first.conversation_id, edit_of=first.done.message_id)
    with pytest.raises(NotFound):  # someone else's thread
        engine.turn(other, "", conversation_id=first.conversation_id, regenerate_of=first.done.message_id)


def test_the_database_refuses_a_parent_of_the_same_role_or_another_thread(user, conversation_factory):
    thread = conversation_factory(user, [("user", "q"), ("assistant", "a")])
    other = conversation_factory(user, [("user", "q2")])
    question = thread.messages.get(role="user")
    foreign = other.messages.get()

    with pytest.raises(IntegrityError), transaction.atomic():  # two questions in a row
        Message.objects.create(conversation=thread, role="user", content="x", parent=question)
    with pytest.raises(IntegrityError), transaction.atomic():  # a parent in another thread
        Message.objects.create(conversation=thread, role="assistant", content="x", parent=foreign)
    with pytest.raises(IntegrityError), transaction.atomic():  # itself
        Message.objects.filter(pk=question.pk).update(parent=question.pk)
