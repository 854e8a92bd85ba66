"""``manage.py hub_mcp``: the MCP server over stdio, driven by the SDK's stdio client (a real subprocess
joining the test database)."""

from __future__ import annotations

import asyncio
import subprocess
import sys

import pytest
from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import connection
from django.utils import timezone
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from hub.mcp.server import TOOL_NAMES
from tests.hub.mcp.conftest import issue_dict
from tests.hub.mcp.mcp_client import text_of
from tests.processes import child_env

pytestmark = pytest.mark.django_db(transaction=True)


def test_hub_mcp_over_stdio_lists_the_tools_and_acts_as_the_token_owner(token, mirror):
    from hub.models import Batch

    mirror(issue_dict("AURORA-1538", summary="Экспорт"), issue_dict("AURORA-1540"))
    params = StdioServerParameters(
        command=sys.executable,
        args=["manage.py", "hub_mcp"],
        cwd=str(settings.BASE_DIR),
        env=child_env(ACHILLES_TOKEN=token),
    )

    async def conversation():
        async with Client(params, read_timeout_seconds=60) as client:
            tools = [t.name for t in (await client.list_tools()).tools]
            card = await client.call_tool("issue", {"key": "AURORA-1538"})
            created = await client.call_tool(
                "batch_create",
                {
                    "title": "из терминала",
                    "commands": [{"type": "ensure_sprint", "key": "AURORA-1538", "sprint": "Спринт 2"}],
                },
            )
            missing = await client.call_tool("issue", {"key": "AURORA-404"})
            await sync_to_async(revoke)()  # the token is re-checked on every call
            revoked = await client.call_tool("issue", {"key": "AURORA-1538"})
            return tools, card, created, missing, revoked

    def revoke():
        from achilles.models import ApiToken

        try:
            ApiToken.objects.update(revoked_at=timezone.now())
        finally:
            connection.close()  # asgiref's shared thread would keep it past the test

    tools, card, created, missing, revoked = asyncio.run(conversation())

    assert tools == list(TOOL_NAMES)
    assert text_of(card).splitlines()[0] == "AURORA-1538 — Экспорт"
    batch = Batch.objects.get()
    assert text_of(created).splitlines()[0] == f"пакет #{batch.id} «из терминала» создан: 2 команды"
    assert batch.author == "claude" and batch.created_by.username == "olga"
    assert missing.is_error and text_of(missing) == "not_found: issue AURORA-404 is not in the mirror"
    assert revoked.is_error and text_of(revoked) == (
        "not_authenticated: Authentication credentials were not provided or are invalid."
    )


@pytest.mark.parametrize("token_value", ["ach_unknown"])
def test_hub_mcp_without_a_valid_token_refuses_to_start_and_keeps_stdout_clean(db, token_value):
    done = subprocess.run(
        [sys.executable, "manage.py", "hub_mcp"],
        cwd=settings.BASE_DIR,
        input="",
        env=child_env(ACHILLES_TOKEN=token_value),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    assert done.stdout == ""
    assert "ACHILLES_TOKEN" in done.stderr


def test_hub_mcp_stdout_carries_only_the_protocol(token):
    """Every line on stdout is a JSON-RPC message: start-up, Django and the embedded services log to stderr."""
    import json

    messages = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "1"},
            },
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
    ]
    proc = subprocess.Popen(
        [sys.executable, "manage.py", "hub_mcp"],
        cwd=settings.BASE_DIR,
        text=True,
        env=child_env(ACHILLES_TOKEN=token),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    try:
        proc.stdin.write("".join(json.dumps(m) + "\n" for m in messages))
        proc.stdin.flush()
        answers = []
        while len(answers) < 2:  # the two answers; a stray line before them fails json.loads
            line = proc.stdout.readline()
            assert line, "hub_mcp closed stdout early"
            answers.append(json.loads(line))
        proc.stdin.close()  # EOF ends the server; nothing more may follow on stdout
        rest = proc.stdout.read()
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()

    assert [a.get("id") for a in answers] == [1, 2]
    assert len(answers[1]["result"]["tools"]) == len(TOOL_NAMES)
    assert rest.strip() == ""
