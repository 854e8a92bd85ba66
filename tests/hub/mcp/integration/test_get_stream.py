"""``GET /mcp/``, the server's stream to the client, bounded (issue 10's probe: its headers came only
with the first ping ~15 s later, any number of them per token, the token never checked again).

In process, each body chunk as the app sends it (``StreamingASGITransport``); the knobs are made short."""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest

from tests.conversations.asgi_stream import StreamingASGITransport

pytestmark = pytest.mark.django_db(transaction=True)

GET_HEADERS = {"Accept": "text/event-stream"}


def streams(raw: str, conversation):
    """Run ``conversation(open_stream)`` on a fresh loop; ``open_stream()`` → (response, seconds to its head)."""
    from achilles.asgi import application
    from hub.mcp.http import mcp_http_app

    async def go():
        async with httpx.AsyncClient(
            transport=StreamingASGITransport(application), base_url="http://testserver", timeout=30
        ) as http:

            async def open_stream():
                started = time.monotonic()
                request = http.build_request("GET", "/mcp/", headers={**GET_HEADERS, "Authorization": f"Bearer {raw}"})
                response = await http.send(request, stream=True)
                return response, time.monotonic() - started

            try:
                return await conversation(open_stream)
            finally:
                await mcp_http_app.aclose()

    return asyncio.run(go())


async def read_to_end(response: httpx.Response, timeout: float) -> str:
    return (await asyncio.wait_for(response.aread(), timeout)).decode()


@pytest.fixture
def token(user):
    from achilles.services import api_token_create

    record, raw = api_token_create(user=user)
    return record, raw


def test_the_stream_s_head_and_first_bytes_leave_at_once(token):
    """Failed before the fix: daphne sends the head with the first body bytes, the SDK's first ping (15 s)."""

    async def conversation(open_stream):
        response, seconds = await open_stream()
        first = await asyncio.wait_for(response.aiter_bytes().__anext__(), 1.0)
        await response.aclose()
        return response.status_code, response.headers["content-type"], first, seconds

    status, content_type, first, seconds = streams(token[1], conversation)
    assert status == 200 and content_type.startswith("text/event-stream")
    assert first.startswith(b":") and seconds < 1.0


def test_a_revoked_token_ends_its_open_stream(token, user, monkeypatch):
    from achilles.services import api_token_revoke

    monkeypatch.setattr("hub.mcp.http.GET_STREAM_RECHECK_SECONDS", 0.2)

    async def conversation(open_stream):
        response, _ = await open_stream()
        await asyncio.to_thread(revoke)
        return await read_to_end(response, 5.0)

    def revoke():
        from django.db import connection

        try:
            api_token_revoke(user=user, token_id=token[0].pk)
        finally:
            connection.close()

    assert "token no longer valid" in streams(token[1], conversation)


def test_a_stream_ends_at_its_maximum_lifetime(token, monkeypatch):
    monkeypatch.setattr("hub.mcp.http.GET_STREAM_MAX_SECONDS", 0.5)

    async def conversation(open_stream):
        started = time.monotonic()
        response, _ = await open_stream()
        text = await read_to_end(response, 5.0)
        return text, time.monotonic() - started

    text, seconds = streams(token[1], conversation)
    assert "lifetime over" in text and seconds < 3


def test_a_token_holds_at_most_two_open_streams_and_the_next_is_refused_429(token):
    async def conversation(open_stream):
        first, _ = await open_stream()
        second, _ = await open_stream()
        third, _ = await open_stream()
        refused = (third.status_code, (await third.aread()).decode())
        await first.aclose()
        await asyncio.sleep(0.1)  # the first stream's handler ends
        fourth, _ = await open_stream()
        statuses = (first.status_code, second.status_code, fourth.status_code)
        await second.aclose()
        await fourth.aclose()
        return refused, statuses

    (status, body), statuses = streams(token[1], conversation)
    assert status == 429 and '"code": "too_many_streams"' in body
    assert statuses == (200, 200, 200)
