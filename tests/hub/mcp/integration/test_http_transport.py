"""Streamable HTTP at /mcp/ (HUB-16): our 401 shape, the tool list, the caller's identity, no lifespan."""

from __future__ import annotations

import asyncio
import json

import httpx2
import pytest

from hub.mcp.server import TOOL_NAMES
from tests.hub.mcp.mcp_client import over_http, text_of

pytestmark = pytest.mark.django_db(transaction=True)

INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
}
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def _post(headers: dict, body: dict = INIT, host: str = "testserver"):
    from achilles.asgi import application
    from hub.mcp.http import mcp_http_app

    async def go():
        async with httpx2.AsyncClient(
            transport=httpx2.ASGITransport(app=application), base_url=f"http://{host}"
        ) as http:
            try:
                return await http.post("/mcp/", json=body, headers={**MCP_HEADERS, **headers})
            finally:
                await mcp_http_app.aclose()

    return asyncio.run(go())


@pytest.mark.parametrize("authorization", [None, "Bearer ach_not-a-real-token", "Basic Zm9vOmJhcg=="])
def test_missing_or_bad_token_is_our_json_401(authorization):
    response = _post({"Authorization": authorization} if authorization else {})
    assert response.status_code == 401
    assert response.json() == {
        "detail": "Authentication credentials were not provided or are invalid.",
        "code": "not_authenticated",
    }
    assert response.headers["www-authenticate"].startswith("Bearer")


def test_revoked_token_is_refused(user):
    from achilles.services import api_token_create, api_token_revoke

    token, raw = api_token_create(user=user)
    api_token_revoke(user=user, token_id=token.pk)
    assert _post({"Authorization": f"Bearer {raw}"}).status_code == 401


def test_initialize_answers_json_without_a_session(user):
    from achilles.services import api_token_create

    _, raw = api_token_create(user=user)
    response = _post({"Authorization": f"Bearer {raw}"})
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("application/json")
    assert "mcp-session-id" not in response.headers  # stateless: any web process serves the next call
    assert json.loads(response.text)["result"]["serverInfo"]["name"] == "achilles-hub"


def test_host_outside_allowed_hosts_is_refused(user):
    from achilles.services import api_token_create

    _, raw = api_token_create(user=user)
    response = _post({"Authorization": f"Bearer {raw}"}, host="evil.example")
    assert response.status_code == 400
    assert response.json() == {"detail": "Invalid Host header.", "code": "bad_request"}


def test_lists_the_fourteen_seed_tools_and_knowledge_search(user):
    from achilles.services import api_token_create

    _, raw = api_token_create(user=user)

    async def conversation(client):
        return (await client.list_tools()).tools

    tools = over_http(raw, conversation)
    assert [t.name for t in tools] == list(TOOL_NAMES)
    read_only = {t.name for t in tools if t.annotations and t.annotations.read_only_hint}
    assert read_only == {
        "issues",
        "issue",
        "batch_status",
        "batch_wait",
        "batches",
        "agent_status",
        "sync_log",
        "settings_get",
        "knowledge_search",
    }


def test_knowledge_search_answers_under_the_callers_identity(user):
    from achilles.services import api_token_create

    _, raw = api_token_create(user=user)

    async def conversation(client):
        return await client.call_tool("knowledge_search", {"query": "отпуск"})

    result = over_http(raw, conversation)
    assert not result.is_error, text_of(result)
    assert text_of(result) == "база знаний пуста"


def test_a_foreign_origin_is_refused_by_the_transport_security(user):
    """DNS-rebinding protection: the SDK's check with origins derived from ALLOWED_HOSTS."""
    from achilles.services import api_token_create

    _, raw = api_token_create(user=user)
    assert _post({"Authorization": f"Bearer {raw}", "Origin": "http://evil.example"}).status_code == 403
    assert _post({"Authorization": f"Bearer {raw}", "Origin": "http://localhost:8000"}).status_code == 200


def test_concurrent_first_requests_start_one_session_manager_and_both_are_served(user):
    """No ASGI lifespan under daphne: the first requests of a fresh event loop enter the SDK's session
    manager lazily; two arriving together must not start it twice (it can run only once)."""
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    from achilles.asgi import application
    from achilles.services import api_token_create
    from hub.mcp.http import mcp_http_app

    _, raw = api_token_create(user=user)

    async def one_client():
        http = httpx2.AsyncClient(
            transport=httpx2.ASGITransport(app=application),
            base_url="http://testserver",
            headers={"Authorization": f"Bearer {raw}"},
        )
        async with http, Client(streamable_http_client("http://testserver/mcp/", http_client=http)) as client:
            return len((await client.list_tools()).tools)

    async def go():
        try:
            first, second = await asyncio.gather(one_client(), one_client())
            return first, second, len(mcp_http_app._runners)
        finally:
            await mcp_http_app.aclose()

    assert asyncio.run(go()) == (len(TOOL_NAMES), len(TOOL_NAMES), 1)


def test_a_crash_before_any_answer_is_the_json_500_not_a_page(user, monkeypatch):
    """Failed before the fix: an exception out of the SDK's manager left daphne to send its HTML 500."""
    from achilles.services import api_token_create
    from hub.mcp.http import McpHttpApp

    async def broken(self):
        raise RuntimeError("the MCP session manager could not start")

    monkeypatch.setattr(McpHttpApp, "_manager", broken)
    _, raw = api_token_create(user=user)

    response = _post({"Authorization": f"Bearer {raw}"})

    assert response.status_code == 500 and response.headers["content-type"] == "application/json"
    assert response.json()["code"] == "internal_error"
