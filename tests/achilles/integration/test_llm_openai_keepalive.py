"""The OpenAI provider keeps its upstream connection between calls (issue 15: CPU per turn).

An OpenAI-compatible server on HTTP/1.1 (keep-alive, chunked) counts the connections it gets.
"""

from __future__ import annotations

import asyncio
import json
import re

import pytest

from achilles.llm import Message, ModelSpec, TextDelta, get_chat_provider

pytestmark = [pytest.mark.integration]


def _event(data: str) -> bytes:
    body = f"data: {data}\n\n".encode()
    return b"%x\r\n%s\r\n" % (len(body), body)


def test_consecutive_calls_reuse_one_connection():
    """Failed before the fix: the stream stopped reading at ``[DONE]``, so the response was closed
    before its body ended and every call (two per grounding turn) opened a new connection — a TCP
    and, with a real provider, a TLS handshake of CPU each time."""

    async def go():
        connections = 0

        async def handle(reader, writer):
            nonlocal connections
            connections += 1
            try:
                while True:
                    head = await reader.readuntil(b"\r\n\r\n")
                    await reader.readexactly(int(re.search(rb"(?i)content-length: *(\d+)", head).group(1)))
                    writer.write(
                        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
                    )
                    chunk = {
                        "id": "c",
                        "object": "chat.completion.chunk",
                        "created": 0,
                        "model": "m",
                        "choices": [{"index": 0, "delta": {"content": "Да."}, "finish_reason": "stop"}],
                    }
                    writer.write(_event(json.dumps(chunk)) + _event("[DONE]") + b"0\r\n\r\n")
                    await writer.drain()
            except (asyncio.IncompleteReadError, ConnectionError):
                pass
            finally:
                writer.close()

        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        provider = get_chat_provider(
            ModelSpec("keepalive", "openai", options={"base_url": f"http://127.0.0.1:{port}/v1", "timeout": 5})
        )
        texts = []
        for _ in range(3):
            events = [e async for e in provider.stream([Message("user", "Да?")])]
            texts.append("".join(e.text for e in events if isinstance(e, TextDelta)))
        server.close()
        return connections, texts

    connections, texts = asyncio.run(go())

    assert texts == ["Да."] * 3
    assert connections == 1
