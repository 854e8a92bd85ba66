"""The official MCP conformance suite (``@modelcontextprotocol/conformance``, Node ≥ 22) against the
hub's MCP server as daphne serves it, through a header-adding proxy (the suite sends no credentials).

The suite's server scenarios mostly call its own fixture tools, resources and prompts
(``test_simple_text``, ``test://static-text``, ``test_simple_prompt`` …) that a real server does not
have; those are listed in ``NOT_APPLICABLE`` with the reason. Every other scenario must pass.

Runs where the suite is installed: ``make mcp-conformance-deps`` (``.ci/run`` does it) puts it and a
Node 22 under ``var/mcp-conformance``; ``MCP_CONFORMANCE_BIN`` may name another ``node_modules/.bin``.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from tests.hub.mcp.conformance.proxy import HeaderProxy
from tests.processes import start_daphne, stop

pytestmark = [pytest.mark.django_db(transaction=True)]

_INSTALLED = Path(__file__).resolve().parents[4] / "var" / "mcp-conformance" / "node_modules" / ".bin"
BIN = os.environ.get("MCP_CONFORMANCE_BIN") or (str(_INSTALLED) if (_INSTALLED / "conformance").exists() else "")

# Scenarios that exercise the suite's own fixture server (its tools/resources/prompts by name) or
# features the hub does not offer; the reason for each.
NOT_APPLICABLE = {
    "logging-set-level": "the hub declares no logging capability (-32601, as the spec allows)",
    "completion-complete": "the hub declares no completions capability (-32601)",
    "tools-call-simple-text": "calls the suite's fixture tool test_simple_text (-32602 Unknown tool)",
    "tools-call-image": "calls the suite's fixture tool test_image_content",
    "tools-call-audio": "calls the suite's fixture tool test_audio_content",
    "tools-call-embedded-resource": "calls the suite's fixture tool test_embedded_resource",
    "tools-call-mixed-content": "calls the suite's fixture tool test_multiple_content_types",
    "tools-call-with-logging": "calls the suite's fixture tool test_tool_with_logging",
    "tools-call-error": "calls the suite's fixture tool test_error_handling",
    "tools-call-with-progress": "calls the suite's fixture tool test_tool_with_progress",
    "tools-call-sampling": "calls the suite's fixture tool test_sampling (the hub never samples)",
    "tools-call-elicitation": "calls the suite's fixture tool test_elicitation (the hub never elicits)",
    "elicitation-sep1034-defaults": "calls the suite's fixture elicitation tool",
    "elicitation-sep1330-enums": "calls the suite's fixture elicitation tool",
    "resources-read-text": "reads the suite's fixture resource test://static-text (the hub has none)",
    "resources-read-binary": "reads the suite's fixture resource test://static-binary",
    "resources-templates-read": "reads the suite's fixture resource template",
    "resources-subscribe": "resources/subscribe: the hub offers no subscriptions (subscribe: false, -32601)",
    "resources-unsubscribe": "resources/unsubscribe: as above",
    "prompts-get-simple": "gets the suite's fixture prompt test_simple_prompt (the hub has none)",
    "prompts-get-with-args": "gets the suite's fixture prompt test_prompt_with_arguments",
    "prompts-get-embedded-resource": "gets the suite's fixture prompt test_prompt_with_embedded_resource",
    "prompts-get-with-image": "gets the suite's fixture prompt test_prompt_with_image",
}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def hub_mcp(tmp_path, user):
    from achilles.services import api_token_create
    from hub.permissions import hub_group_ensure

    user.groups.add(hub_group_ensure())
    _, raw = api_token_create(user=user)
    port = _free_port()
    proc = start_daphne(tmp_path / "daphne.log", port)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            httpx.get(url + "/healthz", timeout=2)
            break
        except httpx.HTTPError:
            time.sleep(0.2)
    proxy = HeaderProxy(url, raw)
    try:
        yield proxy.url
    finally:
        proxy.close()
        stop(proc)


@pytest.mark.skipif(
    not BIN and not os.environ.get("CI"), reason="the npm suite is not installed (make mcp-conformance-deps)"
)
def test_every_applicable_conformance_scenario_passes(hub_mcp, tmp_path):
    out = tmp_path / "results"
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
    proc = subprocess.run(
        [str(Path(BIN) / "conformance"), "server", "--url", hub_mcp, "--suite", "active", "-o", str(out)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    results: dict[str, list[dict]] = {}
    for checks in out.rglob("checks.json"):  # results/server-<scenario>-<timestamp>/checks.json
        scenario = re.sub(r"^server-|-\d{4}-\d{2}-\d{2}T[\dZ-]+$", "", checks.parent.name)
        results[scenario] = json.loads(checks.read_text())
    assert results, proc.stdout[-3000:] + proc.stderr[-3000:]
    failed = {
        name: [c.get("name") or c.get("id") for c in checks if c.get("status") == "FAILURE"]
        for name, checks in results.items()
        if name not in NOT_APPLICABLE
    }
    failed = {k: v for k, v in failed.items() if v}
    assert failed == {}, proc.stdout[-4000:]
    # the applicable ones all ran (initialize, ping, tools/list, resources/list, prompts/list, the GET
    # streams, DNS rebinding), and a scenario the suite adds later is not silently ignored
    assert {"server-initialize", "ping", "tools-list", "dns-rebinding-protection"} <= set(results) - set(NOT_APPLICABLE)
