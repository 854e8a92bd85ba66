"""The API's texts for people (an error's ``detail``, a status text) in the reader's language: the
one chosen on the settings page (``users.language``), for a session and a token alike; Russian by
default. The ``code`` beside the text never changes."""

from __future__ import annotations

import pytest

from hub.permissions import hub_group_ensure
from tests.achilles.factories import UserFactory

pytestmark = [pytest.mark.api, pytest.mark.django_db]


def _person(username: str, language: str):
    user = UserFactory(username=username, language=language)
    user.groups.add(hub_group_ensure())
    return user


# (method, path, body, code, Russian detail, English detail): the same failing request for both
CASES = [
    ("get", "/api/agents/999999", None, "agent_not_found", "Агент не найден.", "Agent not found."),
    (
        "post",
        "/api/hub/commands/999999/cancel",
        None,
        "not_found",
        "Команда 999999 не найдена.",
        "Command 999999 not found.",
    ),
    (
        "post",
        "/api/conversations/00000000-0000-0000-0000-000000000000/shares",
        {"username": "nobody"},
        "not_found",
        "Беседа не найдена.",
        "Conversation not found.",
    ),
    (
        "get",
        "/api/knowledge/documents/999999",
        None,
        "document_not_found",
        "Документ не найден.",
        "Document not found.",
    ),
]


@pytest.mark.parametrize(("method", "path", "body", "code", "russian", "english"), CASES, ids=lambda v: str(v)[:30])
@pytest.mark.parametrize("session", [False, True], ids=["token", "session"])
def test_the_same_failing_request_answers_each_reader_in_their_language(
    asgi_client, method, path, body, code, russian, english, session
):
    # given: a reader who chose English and one who kept Russian
    answers = {}
    for language in ("en", "ru"):
        client = asgi_client(_person(f"reader-{language}", language), session=session)
        # when: each makes the same failing request
        response = getattr(client, method)(path, **({"json": body} if body is not None else {}))
        answers[language] = (response.status_code, response.json())
    # then: the same status and code, the text in each one's language
    assert answers["ru"][0] == answers["en"][0] >= 400
    assert answers["ru"][1] == {"detail": russian, "code": code}
    assert answers["en"][1] == {"detail": english, "code": code}


def test_an_english_readers_share_with_themselves_is_refused_in_english(asgi_client, conversation_factory=None):
    from conversations.models import Conversation

    reader = _person("reader-en", "en")
    thread = Conversation.objects.create(user=reader, title="Mine")
    response = asgi_client(reader).post(f"/api/conversations/{thread.pk}/shares", json={"username": "reader-en"})
    assert response.status_code == 422
    assert response.json()["code"] == "share_with_owner"
    assert response.json()["detail"][0]["msg"] == "This conversation is yours."
