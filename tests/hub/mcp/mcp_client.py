"""Driving the hub's MCP server the way a chat client does: the SDK's own ``Client``.

``over_http`` speaks streamable HTTP to the platform's ASGI application in process (the same
``achilles.asgi.application`` daphne serves, ``/mcp/`` router included); ``over_url`` to a live server.
Tests are synchronous and run each conversation on a fresh event loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

T = TypeVar("T")

# A batch_wait may hold the response for up to 60 minutes: the client's read timeout must exceed it.
WAIT_READ_TIMEOUT = httpx2.Timeout(30.0, read=61 * 60.0)


def text_of(result) -> str:
    return "\n".join(block.text for block in result.content if getattr(block, "type", "") == "text")


def over_http(token: str | None, conversation: Callable[[Client], Awaitable[T]], *, host: str = "testserver") -> T:
    """Run ``conversation(client)`` against the in-process ASGI app with ``token`` as the Bearer."""
    from achilles.asgi import application
    from hub.mcp.http import mcp_http_app

    async def go():
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        http = httpx2.AsyncClient(
            transport=httpx2.ASGITransport(app=application),
            base_url=f"http://{host}",
            headers=headers,
            timeout=WAIT_READ_TIMEOUT,
        )
        try:
            async with http, Client(streamable_http_client(f"http://{host}/mcp/", http_client=http)) as client:
                return await conversation(client)
        finally:
            await mcp_http_app.aclose()

    return asyncio.run(go())


def over_url(url: str, token: str, conversation: Callable[[Client], Awaitable[T]]) -> T:
    async def go():
        http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=WAIT_READ_TIMEOUT)
        async with http, Client(streamable_http_client(url, http_client=http)) as client:
            return await conversation(client)

    return asyncio.run(go())


def call(token: str, tool: str, arguments: dict[str, Any] | None = None):
    """One tool call over HTTP → the SDK's ``CallToolResult``."""

    async def conversation(client: Client):
        return await client.call_tool(tool, arguments or {})

    return over_http(token, conversation)


def call_text(token: str, tool: str, arguments: dict[str, Any] | None = None) -> str:
    result = call(token, tool, arguments)
    assert not result.is_error, text_of(result)
    return text_of(result)
