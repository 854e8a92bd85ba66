"""Races with a delete answer 404/409, never 500 (issue 10, finding 9): two requests on their own
threads and database sessions, released together, many rounds."""

from __future__ import annotations

import json
import threading

import pytest
from django.db import connection
from django.test import Client

from tests.achilles.factories import AllowedModelFactory, UserFactory

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

ROUNDS = 15


def race(*calls) -> list[int]:
    """Run ``calls`` (each → an HTTP response) at once on their own threads; their status codes."""
    barrier = threading.Barrier(len(calls))
    statuses: list[int] = [0] * len(calls)
    errors: list[BaseException] = []

    def run(index, call):
        try:
            barrier.wait()
            statuses[index] = call().status_code
        except BaseException as exc:  # a raised 500 in the test client
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(i, c)) for i, c in enumerate(calls)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors
    return statuses


@pytest.fixture
def owner():
    user = UserFactory(username="racer")
    client = Client(raise_request_exception=False)
    client.force_login(user)
    return user, client


def test_patch_racing_delete_of_an_agent_is_404_never_500(owner):
    """Failed before the fix: the update re-read a row the delete had removed (DoesNotExist → 500)."""
    user, client = owner
    AllowedModelFactory(name="race-chat", is_default=True)
    for i in range(ROUNDS):
        agent_id = client.post("/api/agents", {"name": f"гонка {i}"}, content_type="application/json").json()["id"]
        statuses = race(
            lambda agent_id=agent_id: client.patch(
                f"/api/agents/{agent_id}", {"name": "новое имя", "enabled": False}, content_type="application/json"
            ),
            lambda agent_id=agent_id: client.delete(f"/api/agents/{agent_id}"),
        )
        assert statuses[0] in (200, 404) and statuses[1] in (204, 404), statuses
    from agents.models import Agent

    assert not Agent.objects.exists()  # whoever won, the delete stands: no update brought an agent back


def test_patch_racing_delete_of_a_conversation_is_404_never_500(owner, conversation_factory):
    """Failed before the fix: ``save(update_fields=…)`` on a deleted row raised (500)."""
    user, client = owner
    for _ in range(ROUNDS):
        conversation = conversation_factory(user, [("user", "Вопрос"), ("assistant", "Ответ")])
        path = f"/api/conversations/{conversation.pk}"
        statuses = race(
            lambda path=path: client.patch(path, {"title": "Новое"}, content_type="application/json"),
            lambda path=path: client.delete(path),
        )
        assert statuses[0] in (200, 404) and statuses[1] in (204, 404), statuses


def test_feedback_racing_the_conversation_delete_is_404_never_500(owner, conversation_factory):
    """Failed before the fix: the feedback re-read the message the delete had cascaded (500)."""
    from conversations.models import Message

    user, client = owner
    for _ in range(ROUNDS):
        conversation = conversation_factory(user, [("user", "Вопрос"), ("assistant", "Ответ")])
        answer_id = Message.objects.get(conversation=conversation, role="assistant").pk
        path = f"/api/conversations/{conversation.pk}"
        statuses = race(
            lambda answer_id=answer_id: client.put(
                f"/api/messages/{answer_id}/feedback", {"value": 1}, content_type="application/json"
            ),
            lambda path=path: client.delete(path),
        )
        assert statuses[0] in (200, 404) and statuses[1] in (204, 404), statuses


def test_chat_into_a_conversation_being_deleted_is_404_never_500(owner, conversation_factory, engine):
    """Failed before the fix: the turn's locked re-read found the thread gone (DoesNotExist → 500)."""
    from tests.llm_fake import answer

    user, client = owner
    engine.script(*[answer("Ответ.") for _ in range(ROUNDS)])
    for _ in range(ROUNDS):
        conversation = conversation_factory(user, [("user", "Вопрос"), ("assistant", "Ответ")])
        body = json.dumps({"content": "Ещё", "conversation_id": str(conversation.pk)})
        path = f"/api/conversations/{conversation.pk}"
        statuses = race(
            lambda body=body: client.post("/api/chat", body, content_type="application/json"),
            lambda path=path: client.delete(path),
        )
        assert statuses[0] in (200, 404) and statuses[1] in (204, 404), statuses
