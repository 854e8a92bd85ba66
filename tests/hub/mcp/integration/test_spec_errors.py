"""MCP to the letter of the spec (issue 25): unknown prompts, resources and tools are JSON-RPC -32602;
invalid tool arguments are the platform's ``validation_error (field): …``; ``serverInfo.version`` is the
product version; bounded arguments carry their bounds in the tool schema."""

from __future__ import annotations

import pytest
from mcp import MCPError

from achilles import __version__
from tests.hub.mcp.mcp_client import over_http, text_of

pytestmark = pytest.mark.django_db(transaction=True)


def test_unknown_names_are_invalid_params_and_bad_arguments_are_validation_errors(token):
    async def conversation(client):
        codes = {}
        for what, call in {
            "prompt": lambda: client.get_prompt("nope"),
            "resource": lambda: client.read_resource("achilles://nope"),
            "tool": lambda: client.call_tool("nope", {}),
        }.items():
            try:
                await call()
                codes[what] = None
            except MCPError as exc:
                codes[what] = exc.error.code
        bad = await client.call_tool("batch_status", {"id": "not-a-number"})
        missing = await client.call_tool("issue", {})
        tools = {t.name: t for t in (await client.list_tools()).tools}
        return codes, bad, missing, tools, client.server_info

    codes, bad, missing, tools, init = over_http(token, conversation)
    assert codes == {"prompt": -32602, "resource": -32602, "tool": -32602}
    assert bad.is_error and text_of(bad).startswith("validation_error (id): "), text_of(bad)
    assert "validation error for" not in text_of(bad)
    assert missing.is_error and text_of(missing).startswith("validation_error (key): "), text_of(missing)
    assert init.version == __version__ != ""
    wait = tools["batch_wait"].input_schema["properties"]["timeout_minutes"]
    assert (wait["exclusiveMinimum"], wait["maximum"]) == (0, 60)
