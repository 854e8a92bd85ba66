"""Синхронный SSE-стриминг ответа без очереди задач (seed: test_streaming.py, P1).

httpx reads the SSE stream of ``POST /api/chat`` from the real ASGI application through a
streaming in-process transport (chunks arrive as sent; closing the response is a client
disconnect). The websocket transport is covered by test_websocket.py.
"""

import time

import pytest

from achilles.llm import TextDelta, Usage
from conversations.models import Message
from knowledge.models import SourcePolicy
from tests.conversations.conftest import candidate, result
from tests.conversations.http import bearer, chat
from tests.llm_fake import Delay, answer, call_tool

pytestmark = [pytest.mark.integration, pytest.mark.p1, pytest.mark.django_db(transaction=True)]


def slow_answer(words: list[str], delay: float) -> list:
    items = []
    for word in words:
        items += [Delay(delay), TextDelta(word)]
    return items


def test_tokens_stream_incrementally(engine, user):
    """токены идут потоком: ответ приходит инкрементами по мере генерации, не одним блоком в конце.

    A turn without search_knowledge on offer (empty base): its text is released as generated.
    With search on offer round 1's text is held until its first whole sentence (it may sit beside a
    search call) and a grounded answer is released sentence by sentence — see the next tests."""
    engine.ks.empty = True
    engine.script(slow_answer(["Раз ", "два ", "три ", "четыре"], delay=0.15))

    status, headers, events = chat(bearer(user), {"content": "Привет"})

    assert status == 200
    assert headers["content-type"].startswith("text/event-stream")
    assert headers["x-accel-buffering"] == "no"
    tokens = [(data["text"], at) for name, data, at in events if name == "token"]
    assert [t for t, _ in tokens] == ["Раз ", "два ", "три ", "четыре"]
    # The first token was on the wire long before the model finished.
    assert tokens[-1][1] - tokens[0][1] >= 0.3
    done_at = next(at for name, _, at in events if name == "done")
    assert done_at - tokens[0][1] >= 0.3


def test_grounded_answer_streams_sentence_by_sentence(engine, user):
    """A grounded answer reaches the client a checked sentence at a time, each as soon as the next
    one has begun — not one block at the end."""
    engine.ks.default = result(
        candidate(1, "Отпуск составляет 28 дней."), candidate(2, "Заявка подаётся через портал HR.", rank=2)
    )
    engine.script(
        call_tool("search_knowledge", query="отпуск"),
        slow_answer(
            ["Отпуск ", "составляет ", "28 дней [1]. ", "Заявка ", "подаётся ", "через ", "портал HR [2]."], delay=0.15
        ),
    )

    status, _, events = chat(bearer(user), {"content": "Как оформить отпуск?"})

    assert status == 200
    tokens = [(data["text"], at) for name, data, at in events if name == "token"]
    assert [t for t, _ in tokens] == ["Отпуск составляет 28 дней [1].", " Заявка подаётся через портал HR [2]."]
    assert tokens[1][1] - tokens[0][1] >= 0.3  # the first sentence did not wait for the whole answer


def test_conversation_turn_streams_on_a_non_empty_base(engine, user):
    """issue 31: with search_knowledge on offer (a non-empty base) a turn the model answers without
    searching still streams: once a whole sentence is written with no tool call announced, the
    turn is a conversation turn and its text flows as generated, not in one block at the end.

    Failed before the fix: the four sentences arrived as one burst after the model finished."""
    words = ["Привет! ", "Я ", "помогу ", "с ", "вопросами. ", "Спросите ", "про ", "отпуск. ", "Или ", "про ", "VPN."]
    engine.script(slow_answer(words, delay=0.12))

    status, _, events = chat(bearer(user), {"content": "Привет"})

    assert status == 200
    tokens = [(data["text"], at) for name, data, at in events if name == "token"]
    assert "".join(t for t, _ in tokens) == "".join(words)
    assert len(tokens) >= 5  # the held first sentence, then delta by delta
    done_at = next(at for name, _, at in events if name == "done")
    assert done_at - tokens[0][1] >= 0.5  # the first text was on the wire long before the end
    assert engine.ks.searches == []
    message = Message.objects.get(pk=events[-1][1]["message_id"])
    assert message.content == "".join(words)


def test_synchronous_without_a_queue(engine, user, monkeypatch):
    """синхронно, без очереди: проход в рамках запроса, никакой постановки задачи в брокер."""
    from celery.app.task import Task

    def no_queue(*args, **kwargs):
        raise AssertionError("the chat turn must not enqueue a task")

    monkeypatch.setattr(Task, "apply_async", no_queue)
    engine.script(answer("Готово."))

    status, _, events = chat(bearer(user), {"content": "Привет"})

    assert status == 200
    done = events[-1][1]
    # The answer is stored by the time the stream ends: nothing "arrives later".
    assert Message.objects.get(pk=done["message_id"]).content == "Готово."


def test_citations_at_the_tail(engine, user):
    """цитаты в хвосте потока: источники — завершающим событием после тела, привязаны к тому же сообщению."""
    engine.ks.default = result(candidate(7, "Отпуск 28 дней.", title="Политика отпусков", source_system="confluence:1"))
    SourcePolicy.objects.create(source_system="confluence:1", display_label="Вики отдела кадров")
    engine.script(call_tool("search_knowledge", query="отпуск"), answer("Отпуск 28 дней [1]."))

    status, _, events = chat(bearer(user), {"content": "Сколько дней отпуска?"})

    names = [name for name, _, _ in events]
    assert names[-1] == "done" and set(names[:-1]) == {"token"}
    done = events[-1][1]
    assert done["citations"][0]["record_id"] == 7
    assert done["citations"][0]["title"] == "Политика отпусков"
    assert {"record_id", "title", "url", "source_system", "chunk_text", "rank"} <= set(done["citations"][0])
    # the source as people know it (an admin's label), its internal key beside it
    assert done["citations"][0]["source_label"] == "Вики отдела кадров"
    assert done["citations"][0]["source_system"] == "confluence:1"
    message = Message.objects.get(pk=done["message_id"])
    assert message.role == "assistant"
    assert list(message.citations.values_list("record_id", flat=True)) == [7]
    assert str(message.conversation_id) == done["conversation_id"]


def test_connection_drop(engine, user):
    """обрыв соединения: клиент отвалился посреди потока → генерация прекращается, сообщение не зависает."""
    words = [f"слово{i} " for i in range(20)]
    engine.ks.empty = True  # a turn whose text is released as generated (no search on offer)
    provider = engine.script(slow_answer(words, delay=0.1))

    status, _, events = chat(bearer(user), {"content": "Расскажи длинно"}, stop_after_tokens=2)

    assert status == 200
    assert [name for name, _, _ in events].count("done") == 0
    message = Message.objects.get(role="assistant")
    assert message.state == "interrupted"
    assert message.content.startswith("слово0 слово1 ")
    assert len(message.content.split()) < 20  # generation stopped: not all 20 words were produced
    assert message.tokens_used > 0
    time.sleep(0.3)
    assert Message.objects.get(pk=message.pk).content == message.content  # nothing appended afterwards
    assert len(provider.calls) == 1


def test_tokens_used_at_finalize(engine, user):
    """tokens_used при финализации: на assistant-сообщении — весь оборот (вход + выход), только assistant."""
    engine.ks.default = result(candidate(1, "Факт."))
    engine.script(
        [*call_tool("search_knowledge", query="факт"), Usage(100, 20)],
        [*answer("Факт [1]."), Usage(300, 40)],
    )

    status, _, events = chat(bearer(user), {"content": "Какой факт?"})

    done = events[-1][1]
    assert done["tokens_used"] == 460
    assert done["model"] == "fake-chat"
    assistant = Message.objects.get(pk=done["message_id"])
    assert assistant.tokens_used == 460
    assert Message.objects.get(role="user").tokens_used is None


def test_model_failure_mid_stream_is_an_error_event(engine, user):
    from tests.llm_fake import fail

    engine.ks.empty = True  # a turn whose text is released as generated (no search on offer)
    engine.script([TextDelta("Начинаю "), TextDelta("ответ "), fail(detail="upstream went away")])

    status, _, events = chat(bearer(user), {"content": "Привет"})

    assert status == 200
    name, error, _ = events[-1]
    assert name == "error" and error["code"] == "llm_unavailable"
    message = Message.objects.get(pk=error["message_id"])
    assert (message.state, message.content) == ("failed", "Начинаю ответ ")


def test_a_client_gone_while_the_turn_starts_leaves_no_unanswered_message(engine, user, monkeypatch):
    """The user's message is stored by the start step; a client that leaves during it (before any
    byte of the answer) still gets its turn closed: an empty ``interrupted`` reply, no model call."""
    import asyncio
    import json

    from achilles.asgi import application
    from conversations import services

    engine.script(answer("не должно понадобиться"))
    original = services.turn_start

    import threading

    starting = threading.Event()

    def slow_start(**kwargs):
        starting.set()
        time.sleep(0.4)  # the client leaves while this runs
        return original(**kwargs)

    monkeypatch.setattr(services, "turn_start", slow_start)
    headers = [(k.lower().encode(), v.encode()) for k, v in bearer(user).items()]
    headers.append((b"content-type", b"application/json"))
    body = json.dumps({"content": "Сколько дней отпуска?"}).encode()

    async def go():
        sent = []
        calls = 0

        async def receive():
            nonlocal calls
            calls += 1
            if calls == 1:
                return {"type": "http.request", "body": body, "more_body": False}
            await asyncio.to_thread(starting.wait, 10)  # leave once the start step is under way
            return {"type": "http.disconnect"}

        async def send(message):
            sent.append(message)

        scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": "POST",
            "headers": headers,
            "scheme": "http",
            "path": "/api/chat",
            "raw_path": b"/api/chat",
            "query_string": b"",
            "server": ("testserver", 80),
            "client": ("127.0.0.1", 50000),
            "root_path": "",
        }
        await application(scope, receive, send)
        return sent

    sent = asyncio.run(go())

    assert not any(m.get("body") for m in sent if m["type"] == "http.response.body")  # the client got nothing
    question = Message.objects.get(role="user")
    reply = Message.objects.get(role="assistant")
    assert reply.conversation_id == question.conversation_id and reply.id > question.id
    assert (reply.state, reply.content) == ("interrupted", "")
    assert engine.model.calls == []


def test_a_stream_closed_before_its_first_byte_closes_the_turn(engine, user):
    """Django closes the response whatever happened; a stream that never started (its client left
    between the start and the first byte) has its turn finalized ``interrupted`` on close."""
    import asyncio

    from asgiref.sync import sync_to_async
    from django.test import AsyncRequestFactory

    from conversations.views import chat_sse

    engine.script(answer("не должно понадобиться"))
    request = AsyncRequestFactory().post(
        "/api/chat", data={"content": "Сколько дней отпуска?"}, content_type="application/json", headers=bearer(user)
    )

    async def go():
        response = await chat_sse(request)
        await sync_to_async(response.close)()  # as Django's ASGI handler does, here without streaming
        return response

    response = asyncio.run(go())

    assert response.status_code == 200
    reply = Message.objects.get(role="assistant")
    assert (reply.state, reply.content) == ("interrupted", "")
    assert engine.model.calls == []


def test_a_finished_stream_is_not_finalized_twice_on_close(engine, user):
    engine.script(answer("Двадцать восемь дней."))
    status, _, events = chat(bearer(user), {"content": "Сколько дней отпуска?"})
    assert status == 200 and events[-1][0] == "done"
    assert Message.objects.filter(role="assistant").count() == 1
    assert Message.objects.get(role="assistant").state == "complete"


def test_one_turn_at_a_time_per_conversation(engine, user, conversation_factory):
    """A question whose reply row is not written yet means its answer is being streamed (another tab,
    another socket): a second turn into that thread is a 409 and stores nothing; once the question is
    older than the answer window (a process killed mid-turn), the thread is usable again."""
    from datetime import timedelta

    from django.utils import timezone

    thread = conversation_factory(user, [("user", "Первый вопрос, ответ ещё пишется")])
    engine.script(answer("Теперь можно."))

    status, _, body = chat(bearer(user), {"content": "Второй вопрос", "conversation_id": str(thread.pk)})
    assert status == 409 and body["code"] == "turn_in_progress"
    assert Message.objects.filter(conversation=thread).count() == 1
    assert engine.model.calls == []

    Message.objects.filter(conversation=thread).update(created_at=timezone.now() - timedelta(minutes=10))
    status, _, events = chat(bearer(user), {"content": "Второй вопрос", "conversation_id": str(thread.pk)})
    assert status == 200 and events[-1][0] == "done"
