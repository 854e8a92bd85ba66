"""HTTP helpers for the Query Engine tests: Bearer headers and an SSE chat call over ASGI."""

from __future__ import annotations

import time

import httpx
from asgiref.sync import async_to_sync

from tests.conversations.asgi_stream import StreamingASGITransport, parse_sse


def bearer(user) -> dict:
    from achilles.services import api_token_create

    _, raw = api_token_create(user=user)
    return {"Authorization": f"Bearer {raw}"}


def chat(headers, body, *, stop_after_tokens: int | None = None):
    """POST /api/chat → (status, response headers, [(event, data, arrival_seconds)] or the JSON error)."""
    from achilles.asgi import application

    async def go():
        transport = StreamingASGITransport(application)
        async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as client:
            started = time.monotonic()
            events = []
            async with client.stream("POST", "/api/chat", json=body, headers=headers) as response:
                if response.status_code != 200:
                    await response.aread()
                    return response.status_code, response.headers, response.json()
                buffer = ""
                async for text in response.aiter_text():
                    buffer += text
                    while "\n\n" in buffer:
                        block, buffer = buffer.split("\n\n", 1)
                        for name, data in parse_sse(block + "\n\n"):
                            events.append((name, data, time.monotonic() - started))
                    tokens = [e for e in events if e[0] == "token"]
                    if stop_after_tokens is not None and len(tokens) >= stop_after_tokens:
                        break  # leaving the block closes the response: the client is gone
            for task in transport.tasks:
                await task
            return response.status_code, response.headers, events

    return async_to_sync(go)()
