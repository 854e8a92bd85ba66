"""``make run`` serves /mcp/ through daphne (HUB-16): the platform started the way scripts/run.sh does
(demo data, then daphne as in supervisord.conf), a real MCP client over the network.

daphne runs no ASGI lifespan: the first request enters the SDK's session manager, so this test is also
the proof that the lazy start works. A pending ``batch_wait`` holds no thread and does not stall the
event loop: other calls are answered meanwhile.
"""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
import time

import httpx
import pytest
from django.conf import settings
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from hub.mcp.server import TOOL_NAMES
from tests.hub.mcp.mcp_client import WAIT_READ_TIMEOUT, text_of
from tests.processes import STARTUP_SECONDS, child_env, start_daphne, stop

pytestmark = pytest.mark.django_db(transaction=True)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def platform(tmp_path):
    """scripts/run.sh: `manage.py demo_data`, then the web program of supervisord.conf (daphne)."""
    subprocess.run(
        [sys.executable, "manage.py", "demo_data"],
        cwd=settings.BASE_DIR,
        env=child_env(),
        check=True,
        capture_output=True,
        timeout=300,
    )
    port = _free_port()
    log = tmp_path / "daphne.log"
    proc = start_daphne(log, port)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + STARTUP_SECONDS
    while time.monotonic() < deadline:
        try:
            httpx.get(url + "/healthz", timeout=1)
            break
        except httpx.HTTPError:
            if proc.poll() is not None:
                break
            time.sleep(0.2)
    else:
        proc.kill()
        pytest.fail("daphne did not start: " + log.read_text()[-2000:])
    try:
        yield url
    finally:
        stop(proc)


def test_make_run_serves_mcp_through_daphne(platform, hub_user, token):
    import httpx2

    from hub.models import Batch
    from hub.services import batch_create

    batch = batch_create(
        user=hub_user, title="ждём", commands=[{"type": "ensure_sprint", "key": "AURORA-9002", "sprint": "Спринт 2"}]
    )
    assert Batch.objects.filter(pk=batch.id).exists()

    async def conversation():
        http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=WAIT_READ_TIMEOUT)
        async with http, Client(streamable_http_client(f"{platform}/mcp/", http_client=http)) as client:
            tools = [t.name for t in (await client.list_tools()).tools]
            card = await client.call_tool("issue", {"key": "AURORA-9001"})
            # A 3-second batch_wait in flight; meanwhile another call is answered at once.
            wait = asyncio.create_task(client.call_tool("batch_wait", {"id": batch.id, "timeout_minutes": 0.05}))
            await asyncio.sleep(0.5)
            started = time.monotonic()
            status = await client.call_tool("agent_status", {})
            meanwhile = time.monotonic() - started
            waited = await wait
            return tools, card, status, meanwhile, waited

    tools, card, status, meanwhile, waited = asyncio.run(conversation())

    assert tools == list(TOOL_NAMES) and len(tools) == 15
    assert not card.is_error, text_of(card)
    lines = text_of(card).splitlines()
    assert lines[0].startswith("AURORA-9001 — ")
    assert "комментарии (7):" in lines and "  ещё 2" in lines
    assert not status.is_error and meanwhile < 1.5
    assert "ожидание истекло, пакет ещё не завершён" in text_of(waited)

    anonymous = httpx.post(
        f"{platform}/mcp/",
        json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
        headers={"Accept": "application/json, text/event-stream"},
    )
    assert anonymous.status_code == 401 and anonymous.json()["code"] == "not_authenticated"

    # GET /mcp/ (the server's own stream): daphne sends its head with the first body bytes, which
    # used to be the SDK's first ping, 15 s later; now a first comment goes out at once.
    started = time.monotonic()
    get_headers = {"Accept": "text/event-stream", "Authorization": f"Bearer {token}"}
    with httpx.stream("GET", f"{platform}/mcp/", headers=get_headers, timeout=5) as stream:
        head_seconds = time.monotonic() - started
        assert stream.status_code == 200 and stream.headers["content-type"].startswith("text/event-stream")
    assert head_seconds < 1.0
