"""Every chat stream ends (issue 10, finding 5): SSE and websocket turns always end with ``done`` or
``error``, the answer row is written in every failure path it can be, and no failed turn leaves
its thread locked (409 ``turn_in_progress``). The database-restart path is in tests/faults."""

import asyncio
import json
import threading
from datetime import timedelta

import httpx
import pytest
from asgiref.sync import async_to_sync
from django.db import OperationalError, connection
from django.utils import timezone

from achilles.llm import TextDelta
from conversations.models import Conversation, Message
from tests.conversations.asgi_stream import StreamingASGITransport, parse_sse
from tests.conversations.http import bearer, chat
from tests.conversations.integration.test_websocket import communicator, session_headers
from tests.llm_fake import Delay, answer

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def in_other_thread(fn) -> None:
    """Run ``fn`` on its own connection and commit, as another request would (blocks the caller)."""
    errors = []

    def target():
        try:
            fn()
        except Exception as exc:  # pragma: no cover - surfaced below
            errors.append(exc)
        finally:
            connection.close()

    worker = threading.Thread(target=target)
    worker.start()
    worker.join()
    if errors:
        raise errors[0]


def deleting_the_thread_then(user, text: str):
    """A model round that, once started, has the user's threads deleted by another request."""

    def round_(call):
        in_other_thread(lambda: Conversation.objects.filter(user=user).delete())
        return [Delay(0.05), *answer(text)]

    return round_


def sse_events(headers, body, *, timeout: float = 20.0) -> list[tuple[str, dict]]:
    """POST /api/chat and read the stream to its end, failing (not hanging) if it never ends."""
    from achilles.asgi import application

    async def go():
        transport = StreamingASGITransport(application)
        async with (
            httpx.AsyncClient(transport=transport, base_url="http://testserver") as client,
            client.stream("POST", "/api/chat", json=body, headers=headers) as response,
        ):
            assert response.status_code == 200
            raw = b"".join([chunk async for chunk in response.aiter_bytes()]).decode()
        return parse_sse(raw)

    async def bounded():
        try:
            return await asyncio.wait_for(go(), timeout)
        except TimeoutError:
            pytest.fail("the SSE stream never ended (no done/error event)")

    return async_to_sync(bounded)()


def test_a_thread_deleted_mid_stream_ends_with_an_error_event(engine, user):
    """Failed before the fix: storing the answer hit the deleted thread's foreign key, the failed
    row's write failed the same way, and the generator raised — no ``done``, no ``error``."""
    engine.script(deleting_the_thread_then(user, "Ответ, которому некуда лечь."))

    outcome = engine.turn(user, "Вопрос")

    assert outcome.done is None
    assert outcome.error is not None and outcome.events[-1] is outcome.error
    assert outcome.error.code == "conversation_deleted"
    assert outcome.error.message_id is None
    assert not Message.objects.exists()  # the question went with its thread; nothing half-written


def test_a_thread_deleted_mid_stream_ends_the_sse_stream_with_error(engine, user):
    """Failed before the fix: the SSE client waited for its own timeout (the stream never ended)."""
    engine.script(deleting_the_thread_then(user, "Ответ."))

    events = sse_events(bearer(user), {"content": "Вопрос"})

    assert [name for name, _ in events][-1] == "error"
    assert events[-1][1]["code"] == "conversation_deleted"


def test_a_thread_deleted_mid_stream_ends_the_websocket_turn_with_an_error_frame(engine, user):
    """Failed before the fix: the turn crashed and the frame said only ``internal_error``."""
    engine.script(deleting_the_thread_then(user, "Ответ."))
    headers = session_headers(user)

    async def go():
        ws = communicator(headers)
        connected, _ = await ws.connect()
        assert connected
        await ws.send_to(text_data=json.dumps({"content": "Вопрос"}))
        frames = []
        while not frames or frames[-1]["event"] not in ("done", "error"):
            frames.append(json.loads(await ws.receive_from(timeout=10)))
        await ws.disconnect()
        return frames

    frames = async_to_sync(go)()

    assert frames[-1]["event"] == "error" and frames[-1]["code"] == "conversation_deleted"


def test_a_delete_waits_for_an_answer_being_stored_and_takes_it_along(engine, user, conversation_factory):
    """The finalize locks the thread's row: a delete after it cascades the answer, never orphans it."""
    engine.script(answer("Готово."))

    outcome = engine.turn(user, "Вопрос")
    Conversation.objects.filter(pk=outcome.conversation_id).delete()

    assert outcome.done is not None
    assert not Message.objects.exists()


def test_the_database_failing_while_storing_the_answer_is_retried_until_it_answers(engine, user, monkeypatch):
    """Failed before the fix: the first OperationalError of the finalize crashed the stream (no
    ``done``/``error``) and left the question without an answer row, locking the thread."""
    from conversations import services

    real = services.message_finalize
    failures = {"left": 3}

    def flaky(**fields):
        if failures["left"]:
            failures["left"] -= 1
            raise OperationalError("server closed the connection unexpectedly")
        return real(**fields)

    monkeypatch.setattr(services, "message_finalize", flaky)
    engine.script(answer("Дошло."))

    outcome = engine.turn(user, "Вопрос")

    assert outcome.done is not None and failures["left"] == 0
    assert Message.objects.get(pk=outcome.done.message_id).content == "Дошло."


def test_the_database_away_past_the_retries_still_ends_the_stream_with_error(engine, user, monkeypatch):
    """Failed before the fix: the stream raised instead of ending with an error event."""
    from conversations import deps, services

    def away(**fields):
        raise OperationalError("connection refused")

    monkeypatch.setattr(services, "message_finalize", away)
    monkeypatch.setattr(deps, "FINALIZE_RETRY_SECONDS", 0.5)
    engine.script(answer("Не сохранится."))

    events = sse_events(bearer(user), {"content": "Вопрос"})

    assert events[-1][0] == "error" and events[-1][1]["code"] == "internal_error"
    assert events[-1][1]["message_id"] is None


def test_a_model_failure_stores_a_failed_row_and_the_thread_takes_the_next_turn(engine, user):
    from tests.llm_fake import fail

    engine.script([TextDelta("Начинаю "), fail()], answer("Второй ответ."))

    first = engine.turn(user, "Первый")
    second = engine.turn(user, "Второй", conversation_id=first.conversation_id)

    assert first.error is not None and Message.objects.get(pk=first.error.message_id).state == "failed"
    assert second.done is not None


def test_a_question_whose_turn_died_is_closed_with_a_failed_answer_by_the_next_turn(engine, user, conversation_factory):
    """Failed before the fix: once its window had passed the question stayed without an answer row
    forever (a process killed mid-turn writes none); now the next turn closes it ``failed``."""
    conversation = conversation_factory(user, [("user", "Вопрос, чей процесс убит")])
    Message.objects.filter(conversation=conversation).update(created_at=timezone.now() - timedelta(hours=1))
    engine.script(answer("Новый ответ."))

    outcome = engine.turn(user, "Новый вопрос", conversation_id=conversation.pk)

    assert outcome.done is not None
    rows = list(Message.objects.filter(conversation=conversation).order_by("id").values_list("role", "state"))
    assert rows == [("user", "complete"), ("assistant", "failed"), ("user", "complete"), ("assistant", "complete")]


def test_a_question_still_in_its_window_keeps_the_thread_busy(engine, user, conversation_factory):
    conversation = conversation_factory(user, [("user", "Вопрос, на который отвечают сейчас")])

    status, _, body = chat(bearer(user), {"content": "Ещё", "conversation_id": str(conversation.pk)})

    assert (status, body["code"]) == (409, "turn_in_progress")


def test_a_question_whose_turn_ended_unanswered_frees_its_thread_at_once(engine, user, conversation_factory):
    """Failed before the fix: a turn that could not store its answer (the database away past its
    retries) left the thread answering 409 ``turn_in_progress`` for the whole answer window (~4.5 min).
    The turn now says it is over (``turn_abandon``, in Redis) and the next turn closes the question."""
    from conversations.services import TurnStart, conversation_model, turn_abandon, turn_settings

    # given: a question in its window whose turn said it ended without an answer row
    conversation = conversation_factory(user, [("user", "Вопрос, чей ответ не записался")])
    question = Message.objects.get(conversation=conversation)
    model = conversation_model(conversation).spec()
    turn_abandon(
        start=TurnStart(str(conversation.pk), False, question.pk, (), model, turn_settings()),
    )
    engine.script(answer("Новый ответ."))

    # when
    outcome = engine.turn(user, "Новый вопрос", conversation_id=conversation.pk)

    # then
    assert outcome.done is not None
    rows = list(Message.objects.filter(conversation=conversation).order_by("id").values_list("role", "state"))
    assert rows == [("user", "complete"), ("assistant", "failed"), ("user", "complete"), ("assistant", "complete")]


def test_the_sweep_gives_a_question_whose_turn_died_its_failed_answer(engine, user, conversation_factory):
    """Failed before the fix: a question left by a killed web process stayed without an answer row
    until someone wrote into that thread again (the fault suite's "no message without an answer")."""
    from django.conf import settings

    from conversations.services import unanswered_questions_close

    dead = conversation_factory(user, [("user", "Вопрос, чей процесс убит")])
    Message.objects.filter(conversation=dead).update(created_at=timezone.now() - timedelta(hours=1))
    live = conversation_factory(user, [("user", "Вопрос, на который отвечают сейчас")])
    answered = conversation_factory(user, [("user", "Вопрос"), ("assistant", "Ответ")])
    Message.objects.filter(conversation=answered).update(created_at=timezone.now() - timedelta(hours=1))

    assert unanswered_questions_close() == 1
    assert unanswered_questions_close() == 0  # idempotent

    assert list(Message.objects.filter(conversation=dead).values_list("role", "state", "content")) == [
        ("user", "complete", "Вопрос, чей процесс убит"),
        ("assistant", "failed", ""),
    ]
    assert Message.objects.filter(conversation=live).count() == 1
    assert Message.objects.filter(conversation=answered).count() == 2
    assert (
        settings.PLATFORM_PERIODIC_JOBS["conversations.close_unanswered"]["task"]
        == "conversations.tasks.unanswered_questions_close_task"
    )
