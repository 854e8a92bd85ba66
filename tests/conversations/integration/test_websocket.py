"""The websocket transport ``/ws/chat/`` (QE-15): the same events as JSON frames, session auth,
disconnect → the message finalized ``interrupted``."""

import asyncio
import json

import pytest
from asgiref.sync import async_to_sync
from channels.testing import WebsocketCommunicator
from django.db import connection
from django.test import Client

from achilles.llm import TextDelta
from conversations.models import Message
from tests.conversations.conftest import candidate, result
from tests.llm_fake import Delay, answer, call_tool

pytestmark = [pytest.mark.integration, pytest.mark.p1, pytest.mark.django_db(transaction=True)]


def session_headers(user) -> list:
    client = Client()
    client.force_login(user)
    return [
        (b"cookie", f"sessionid={client.cookies['sessionid'].value}".encode()),
        (b"host", b"testserver"),
        (b"origin", b"http://testserver"),
    ]


def communicator(headers):
    from achilles.asgi import application

    return WebsocketCommunicator(application, "/ws/chat/", headers=headers)


def first_frame(headers, message: dict) -> dict:
    """Connect, send one message, return the first frame the server answers with."""

    async def go():
        ws = communicator(headers)
        connected, _ = await ws.connect()
        assert connected
        await ws.send_to(text_data=json.dumps(message))
        frame = json.loads(await ws.receive_from(timeout=5))
        await ws.disconnect()
        return frame

    return async_to_sync(go)()


async def _frames_until_done(ws, timeout=5):
    frames = []
    while True:
        frame = json.loads(await ws.receive_from(timeout=timeout))
        frames.append(frame)
        if frame["event"] in ("done", "error"):
            return frames


def test_websocket_streams_tokens_then_done(engine, user):
    engine.ks.default = result(candidate(3, "Отпуск 28 дней. Заявка через портал HR."))
    engine.script(
        call_tool("search_knowledge", query="отпуск"),
        answer("Отпуск 28 дней [1]. Заявка через портал HR [1].", chunk=4),
    )
    headers = session_headers(user)

    async def go():
        ws = communicator(headers)
        connected, _ = await ws.connect()
        assert connected
        await ws.send_to(text_data=json.dumps({"content": "Сколько отпуска?"}))
        frames = await _frames_until_done(ws)
        # Continue the same thread over the same socket.
        engine.script(answer("Пожалуйста!"))
        await ws.send_to(text_data=json.dumps({"content": "Спасибо", "conversation_id": frames[-1]["conversation_id"]}))
        more = await _frames_until_done(ws)
        await ws.disconnect()
        return frames, more

    frames, more = async_to_sync(go)()

    # A grounded answer: one frame per checked sentence.
    assert [f["text"] for f in frames[:-1]] == ["Отпуск 28 дней [1].", " Заявка через портал HR [1]."]
    done = frames[-1]
    assert done["event"] == "done" and done["citations"][0]["record_id"] == 3
    assert done["citations"][0]["source_label"] == "Файлы"  # «files» is what the store calls it
    assert Message.objects.get(pk=done["message_id"]).content == "Отпуск 28 дней [1]. Заявка через портал HR [1]."
    assert more[-1]["conversation_id"] == done["conversation_id"]


def test_websocket_without_session_is_accepted_then_closed_4401(engine):
    """Failed before the fix: the socket was closed before it was accepted, which daphne turns into
    an HTTP 403 of the handshake; a browser sees only 1006, never the 4401 the page signs in on."""

    async def go():
        ws = communicator([(b"host", b"testserver"), (b"origin", b"http://testserver")])
        connected, _ = await ws.connect()
        frame = json.loads(await ws.receive_from(timeout=5))
        closed = await ws.receive_output(timeout=5)
        await ws.disconnect()
        return connected, frame, closed

    connected, frame, closed = async_to_sync(go)()
    assert connected is True
    assert (frame["event"], frame["code"]) == ("error", "not_authenticated")
    assert closed == {"type": "websocket.close", "code": 4401}


def test_websocket_bad_frame_and_foreign_thread(engine, user, user_factory, conversation_factory):
    foreign = conversation_factory(user_factory(username="other"), [("user", "q")])
    headers = session_headers(user)

    async def go():
        ws = communicator(headers)
        await ws.connect()
        await ws.send_to(text_data="not json")
        bad = json.loads(await ws.receive_from())
        await ws.send_to(text_data=json.dumps({"content": "x", "conversation_id": str(foreign.pk)}))
        missing = json.loads(await ws.receive_from())
        await ws.disconnect()
        return bad, missing

    bad, missing = async_to_sync(go)()
    assert (bad["event"], bad["code"]) == ("error", "validation_error")
    assert (missing["event"], missing["code"]) == ("error", "not_found")


def test_websocket_disconnect_finalizes_interrupted(engine, user):
    items = []
    for i in range(30):
        items += [Delay(0.05), TextDelta(f"w{i} ")]
    engine.ks.empty = True  # a turn whose text is released as generated (no search on offer)
    provider = engine.script(items)
    headers = session_headers(user)

    async def go():
        ws = communicator(headers)
        await ws.connect()
        await ws.send_to(text_data=json.dumps({"content": "Длинный ответ, пожалуйста"}))
        first = [json.loads(await ws.receive_from()) for _ in range(3)]
        await ws.disconnect()
        await asyncio.sleep(0.2)
        return first

    first = async_to_sync(go)()

    assert [f["event"] for f in first] == ["token"] * 3
    message = Message.objects.get(role="assistant")
    assert message.state == "interrupted"
    assert message.content.startswith("w0 w1 w2 ")
    assert len(message.content.split()) < 30
    assert len(provider.calls) == 1


@pytest.mark.parametrize("revoke", ["deactivated", "signed_out", "password_changed"])
def test_an_open_socket_loses_its_rights_with_the_session(engine, user, revoke):
    """Rights are read per turn, not once per socket: a deactivation, a sign-out elsewhere or a password
    change ends what an already open websocket may ask."""
    from django.contrib.sessions.models import Session

    engine.ks.default = result(candidate(3, "Отпуск 28 дней."))
    engine.script(call_tool("search_knowledge", query="отпуск"), answer("Отпуск 28 дней [1]."))
    headers = session_headers(user)

    def take_rights_away():
        try:
            if revoke == "deactivated":
                type(user).objects.filter(pk=user.pk).update(is_active=False)
            elif revoke == "signed_out":
                Session.objects.all().delete()
            else:
                user.set_password("a-new-secret-123")
                user.save()
        finally:
            connection.close()  # this thread's connection back to the pool: a thread's end does not return it

    async def go():
        ws = communicator(headers)
        connected, _ = await ws.connect()
        assert connected
        await ws.send_to(text_data=json.dumps({"content": "Сколько отпуска?"}))
        first = await _frames_until_done(ws)
        await asyncio.to_thread(take_rights_away)
        await ws.send_to(text_data=json.dumps({"content": "А ещё?"}))
        second = json.loads(await ws.receive_from(timeout=5))
        closed = await ws.receive_output(timeout=5)
        return first, second, closed

    first, second, closed = async_to_sync(go)()

    assert first[-1]["event"] == "done"
    assert second == {"event": "error", "detail": "Your session has ended; sign in again.", "code": "not_authenticated"}
    assert closed == {"type": "websocket.close", "code": 4401}
    assert len(engine.ks.searches) == 1  # the second question never reached the knowledge store


def test_a_turn_that_cannot_start_answers_with_an_error_frame_not_silence(engine, user, monkeypatch):
    import conversations.consumers as consumers

    def database_away(session_key):
        raise ConnectionError("database unavailable")

    headers = session_headers(user)
    monkeypatch.setattr(consumers, "session_user", database_away)

    assert first_frame(headers, {"content": "Сколько отпуска?"}) == {
        "event": "error",
        "detail": "Internal error; it has been logged.",
        "code": "internal_error",
    }


def test_a_nul_character_in_a_websocket_message_is_a_validation_error(engine, user):
    frame = first_frame(session_headers(user), {"content": "при\x00вет"})
    assert frame["event"] == "error" and frame["code"] == "validation_error"
    assert "NUL" in str(frame["detail"])
    assert engine.model.calls == []


def test_websocket_turn_errors_speak_the_users_language_as_rest_and_sse_do(engine, user):
    """The chosen language first, else the browser's ``Accept-Language``, else Russian."""
    missing = {"content": "Сколько отпуска?", "conversation_id": "00000000-0000-0000-0000-000000000000"}
    headers = session_headers(user)
    assert first_frame(headers, missing) == {"event": "error", "detail": "Беседа не найдена.", "code": "not_found"}
    english_browser = [*headers, (b"accept-language", b"en-US,en;q=0.9")]
    assert first_frame(english_browser, missing)["detail"] == "Conversation not found."
    user.language = "ru"
    user.save(update_fields=["language"])
    assert first_frame(english_browser, missing)["detail"] == "Беседа не найдена."  # the chosen one wins
    user.language = "en"
    user.save(update_fields=["language"])
    assert first_frame(headers, missing)["detail"] == "Conversation not found."
    assert engine.model.calls == []
