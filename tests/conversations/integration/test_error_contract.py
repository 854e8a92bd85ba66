"""One error contract (issue 11, item 1): the same domain error leaves REST, SSE and the websocket
with the same ``{"detail", "code"}`` body, because all three render through ``achilles.errors``."""

import uuid

import pytest
from django.test import Client

from tests.conversations.integration.test_websocket import first_frame, session_headers

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def _rest(user, path):
    client = Client()
    client.force_login(user)
    return client.get(path)


def _sse(user, body):
    client = Client()
    client.force_login(user)
    return client.post("/api/chat", data=body, content_type="application/json")


def test_a_foreign_conversation_is_the_same_404_body_on_every_transport(engine, user, user_factory):
    other = user_factory(username="mallory")
    turn = engine.turn(other, "Сколько дней отпуска?")
    foreign = turn.done.payload()["conversation_id"] if turn.done else None
    for conversation_id in filter(None, (foreign, str(uuid.uuid4()))):
        rest = _rest(user, f"/api/conversations/{conversation_id}")
        sse = _sse(user, {"content": "А ещё?", "conversation_id": conversation_id})
        ws = first_frame(session_headers(user), {"content": "А ещё?", "conversation_id": conversation_id})

        assert rest.status_code == sse.status_code == 404
        expected = {"detail": "Беседа не найдена.", "code": "not_found"}
        assert rest.json() == expected
        assert sse.json() == expected
        assert ws == {"event": "error", **expected}


def test_a_field_error_is_the_same_body_on_sse_and_the_websocket(engine, user):
    sse = _sse(user, {"content": "   "})
    ws = first_frame(session_headers(user), {"content": "   "})
    expected = {
        "detail": [{"loc": ["body", "content"], "msg": "content must not be empty", "type": "value_error"}],
        "code": "validation_error",
    }
    assert sse.status_code == 422 and sse.json() == expected
    assert ws == {"event": "error", **expected}


def test_a_schema_error_is_the_same_body_on_sse_and_the_websocket(engine, user):
    sse = _sse(user, {"content": "x", "trigger": "now"})
    ws = first_frame(session_headers(user), {"content": "x", "trigger": "now"})
    assert sse.status_code == 422
    assert sse.json()["code"] == "validation_error" and sse.json()["detail"][0]["loc"] == ["body", "trigger"]
    assert ws == {"event": "error", **sse.json()}
