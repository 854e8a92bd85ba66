"""The chat stream's own transport (aiohttp, issue 15: CPU per streamed token) keeps what the SDK
did for it: retries only when asked, on the SDK's statuses; a stream left early drops its upstream
connection (the provider stops generating); the connection pool closes with its event loop."""

from __future__ import annotations

import asyncio
import json
import re

import pytest

from achilles.llm import LLM_UNAVAILABLE, LLMError, Message, ModelSpec, TextDelta, Usage, get_chat_provider
from tests.achilles.llm_stub_server import StubLLMServer, StubReply

pytestmark = [pytest.mark.integration]

QUESTION = [Message("user", "Сколько дней отпуска?")]


def _drain(provider) -> list:
    async def go() -> list:
        return [event async for event in provider.stream(QUESTION)]

    return asyncio.run(go())


def _provider(base_url: str, **options: object):
    return get_chat_provider(ModelSpec("stub-chat", "openai", options={"base_url": base_url, "timeout": 5, **options}))


def test_with_max_retries_a_server_error_is_retried_and_the_answer_streams():
    with StubLLMServer(replies=[StubReply(status=503, error_message="busy"), StubReply(text="Да.")]) as stub:
        events = _drain(_provider(stub.base_url, max_retries=1))
        assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "Да."
        assert len(stub.requests) == 2


def test_a_client_error_is_not_retried_even_with_max_retries():
    with StubLLMServer(replies=[StubReply(status=400, error_message="bad request body")]) as stub:
        with pytest.raises(LLMError) as caught:
            _drain(_provider(stub.base_url, max_retries=2))
        assert caught.value.code == LLM_UNAVAILABLE
        assert caught.value.extra["provider_status"] == 400
        assert "bad request body" in str(caught.value.detail)
        assert len(stub.requests) == 1


def test_a_stream_left_early_drops_its_upstream_connection():
    """A client that goes away mid-answer must stop the provider's generation: the provider sees
    its connection close while it still has tokens to send."""

    async def go():
        gone = asyncio.Event()
        sent = 0

        async def handle(reader, writer):
            nonlocal sent
            head = await reader.readuntil(b"\r\n\r\n")
            await reader.readexactly(int(re.search(rb"(?i)content-length: *(\d+)", head).group(1)))
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
            try:
                for _ in range(500):
                    chunk = {"choices": [{"index": 0, "delta": {"content": "слово "}}]}
                    body = f"data: {json.dumps(chunk)}\n\n".encode()
                    writer.write(b"%x\r\n%s\r\n" % (len(body), body))
                    await writer.drain()
                    sent += 1
                    if reader.at_eof():
                        break
                    await asyncio.sleep(0.01)
            except ConnectionError:
                pass
            gone.set()
            writer.close()

        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        stream = _provider(f"http://127.0.0.1:{port}/v1").stream(QUESTION)
        async for event in stream:
            if isinstance(event, TextDelta):
                break
        await stream.aclose()
        await asyncio.wait_for(gone.wait(), 5)
        server.close()
        return sent

    assert asyncio.run(go()) < 100


def test_the_connection_pool_closes_and_is_forgotten_with_its_event_loop():
    """An agent run or a Celery task runs its own event loop: when it ends, its connections must
    close and nothing may keep the loop alive."""
    from achilles.llm import openai_provider

    with StubLLMServer(replies=[StubReply(text="Да.")]) as stub:
        provider = _provider(stub.base_url)

        async def go():
            events = [event async for event in provider.stream(QUESTION)]
            loop = asyncio.get_running_loop()
            return events, loop, [e.session for e in openai_provider._CLIENTS[loop].values()]

        events, loop, sessions = asyncio.run(go())
    assert isinstance(events[-1], Usage)
    assert sessions and all(session.closed for session in sessions)
    assert loop not in openai_provider._CLIENTS


# --- reading mid-sentence tokens in batches ------------------------------------------------------


def test_the_read_pace_holds_only_mid_sentence_tokens_after_the_first_sentence():
    from achilles.llm.openai_provider import _ReadPace

    pace = _ReadPace()
    holds = []
    for text in ["Каждому ", "сотруднику ", "положено [1]. ", "Заявление ", "подают", ",", " в ", "срок.", "", "Да"]:
        pace.after(text, 0.25)
        holds.append(pace.hold)
    # the first sentence is read as it comes; after it, words wait; an end or a non-text event does not
    assert holds == [0.0, 0.0, 0.0, 0.25, 0.25, 0.25, 0.25, 0.0, 0.0, 0.25]


def _sentence_server(words_after: int):
    """A provider that streams «Первое предложение. » and then ``words_after`` words, 20 ms apart."""

    async def handle(reader, writer):
        head = await reader.readuntil(b"\r\n\r\n")
        await reader.readexactly(int(re.search(rb"(?i)content-length: *(\d+)", head).group(1)))
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
        pieces = ["Первое ", "предложение [1]. "] + ["слово "] * words_after + ["конец."]
        for piece in pieces:
            chunk = {"choices": [{"index": 0, "delta": {"content": piece}}]}
            body = f"data: {json.dumps(chunk, ensure_ascii=False)}\n\n".encode()
            writer.write(b"%x\r\n%s\r\n" % (len(body), body))
            await writer.drain()
            await asyncio.sleep(0.02)
        body = b"data: [DONE]\n\n"
        writer.write(b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body))
        await writer.drain()
        writer.close()

    return handle


def _stream_counting_reads(monkeypatch, coalesce_ms: int) -> tuple[list, list]:
    """The events of a 20-word answer streamed with ``stream_coalesce_ms``, and the body's reads."""
    from achilles.llm import openai_provider

    reads = []
    paced = openai_provider._paced_reads

    async def counted(response, pace):
        async for chunk in paced(response, pace):
            reads.append(chunk)
            yield chunk

    monkeypatch.setattr(openai_provider, "_paced_reads", counted)

    async def go():
        server = await asyncio.start_server(_sentence_server(20), "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        provider = _provider(f"http://127.0.0.1:{port}/v1", stream_coalesce_ms=coalesce_ms)
        events = [event async for event in provider.stream(QUESTION)]
        server.close()
        return events

    return asyncio.run(go()), reads


@pytest.mark.parametrize(("coalesce_ms", "most_reads"), [(300, 6), (0, None)])
def test_mid_sentence_tokens_after_the_first_sentence_come_in_few_reads(monkeypatch, coalesce_ms, most_reads):
    events, reads = _stream_counting_reads(monkeypatch, coalesce_ms)
    text = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert text == "Первое предложение [1]. " + "слово " * 20 + "конец."
    if most_reads is not None:
        # 20 words over 400 ms: without the pause they are ~20 reads; with it a few batches
        assert len(reads) <= most_reads + 3  # + the first sentence's own reads
    else:
        assert len(reads) >= 10  # every token its own read (a loaded machine may merge a few)


def test_tokens_that_arrive_in_one_read_go_on_as_one_delta(monkeypatch):
    """What one read of the body brings is handed on as one TextDelta: the layers above (the turn,
    the support check) then work per read, not per token. The text is the same."""
    # given mid-sentence tokens read in batches; when the answer streams
    events, reads = _stream_counting_reads(monkeypatch, 300)
    deltas = [e.text for e in events if isinstance(e, TextDelta)]
    # then the same text, in no more deltas than reads: far fewer than the 22 tokens
    assert "".join(deltas) == "Первое предложение [1]. " + "слово " * 20 + "конец."
    assert len(deltas) <= len(reads)
    assert len(deltas) <= 6 + 3


def test_a_proxy_from_the_environment_carries_the_stream(monkeypatch):
    """As the SDK's httpx did (trust_env): HTTP(S)_PROXY is honoured, NO_PROXY too."""

    async def go():
        request_lines = []

        async def proxy(reader, writer):
            head = await reader.readuntil(b"\r\n\r\n")
            request_lines.append(head.split(b"\r\n", 1)[0].decode())
            await reader.readexactly(int(re.search(rb"(?i)content-length: *(\d+)", head).group(1)))
            body = b'data: {"choices": [{"index": 0, "delta": {"content": "via proxy"}}]}\n\ndata: [DONE]\n\n'
            writer.write(
                b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: %d\r\n\r\n%s"
                % (len(body), body)
            )
            await writer.drain()
            writer.close()

        server = await asyncio.start_server(proxy, "127.0.0.1", 0)
        monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}")
        monkeypatch.delenv("NO_PROXY", raising=False)
        monkeypatch.delenv("no_proxy", raising=False)
        provider = _provider("http://llm.example.test/v1")
        events = [event async for event in provider.stream(QUESTION)]
        server.close()
        return request_lines, events

    request_lines, events = asyncio.run(go())
    assert request_lines == ["POST http://llm.example.test/v1/chat/completions HTTP/1.1"]
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["via proxy"]


def test_a_connection_lost_mid_answer_is_unavailable_with_the_text_so_far():
    """Also while the reads are paused between batches."""

    async def go():
        async def handle(reader, writer):
            head = await reader.readuntil(b"\r\n\r\n")
            await reader.readexactly(int(re.search(rb"(?i)content-length: *(\d+)", head).group(1)))
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
            for piece in ["Первое ", "предложение. ", "слово ", "слово "]:
                chunk = {"choices": [{"index": 0, "delta": {"content": piece}}]}
                body = f"data: {json.dumps(chunk, ensure_ascii=False)}\n\n".encode()
                writer.write(b"%x\r\n%s\r\n" % (len(body), body))
                await writer.drain()
                await asyncio.sleep(0.02)
            writer.transport.abort()

        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        texts = []
        with pytest.raises(LLMError) as caught:
            async for event in _provider(f"http://127.0.0.1:{port}/v1").stream(QUESTION):
                if isinstance(event, TextDelta):
                    texts.append(event.text)
        server.close()
        return caught.value, texts

    error, texts = asyncio.run(go())
    assert error.code == LLM_UNAVAILABLE
    assert "".join(texts) == "Первое предложение. слово слово "
