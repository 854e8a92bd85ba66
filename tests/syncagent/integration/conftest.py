"""The platform for the sync-agent end-to-end tests: the hub as ``make run`` serves it (daphne on the
test database), the Jira emulator process, and a sync-agent token; short poll interval and lease.

One daphne serves every test of a module (starting it took 5-20 s a test on the shared machine);
each test still gets its own data (``transactional_db``: flushed afterwards, once daphne is idle), a
fresh hub boot marker (as if the hub had just started), its own Jira emulator and its own sync agent.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.syncagent.harness import Emulator, free_port, stop, wait_port

POLL_SECONDS = 1
LEASE_SECONDS = 10


@dataclass
class Platform:
    hub_url: str
    sync_token: str
    person_token: str
    emulator: Emulator
    staff: object
    person: object
    tmp: Path

    hub: HubServer | None = None

    def hub_down(self) -> None:
        self.hub.down()

    def hub_up(self) -> None:
        self.hub.up()

    def mcp(self, tool: str, arguments: dict) -> str:
        from tests.hub.mcp.mcp_client import over_url, text_of

        async def conversation(client):
            return await client.call_tool(tool, arguments)

        result = over_url(f"{self.hub_url}/mcp/", self.person_token, conversation)
        text = text_of(result)
        assert not result.is_error, text
        return text

    def batch_create(self, title: str, commands: list[dict]) -> int:
        text = self.mcp("batch_create", {"title": title, "commands": commands})
        return int(re.search(r"пакет #(\d+)", text).group(1))

    def batch_wait(self, batch_id: int, minutes: float = 1) -> str:
        return self.mcp("batch_wait", {"id": batch_id, "timeout_minutes": minutes})


class HubServer:
    """The module's daphne on the test database, on one port for its whole life (a test may stop it
    and start it again: the sync agent must find the hub where it was)."""

    def __init__(self, directory: Path):
        self.dir = directory
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc = None
        self.starts = 0

    def up(self) -> None:
        from tests.processes import start_daphne

        self.starts += 1
        self.proc = start_daphne(self.dir / f"daphne-{self.starts}.log", self.port)
        wait_port(self.port, timeout=60)

    def down(self) -> None:
        if self.proc is not None:
            stop(self.proc)
        self.proc = None

    def ensure(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            self.up()


@pytest.fixture(scope="module")
def _hub_server(django_db_setup, tmp_path_factory):
    server = HubServer(tmp_path_factory.mktemp("hub"))
    yield server
    server.down()


@pytest.fixture
def platform(transactional_db, tmp_path, _hub_server):
    from achilles.services import api_token_create
    from hub.models import HubState
    from hub.notify import hub_boot_mark
    from hub.permissions import hub_group_ensure
    from hub.protocol import sync_agent_create
    from hub.services import settings_set
    from tests.achilles.factories import UserFactory
    from tests.processes import wait_database_idle

    HubState.objects.get_or_create(pk=1)  # a migration's row; an earlier transactional test's flush emptied it
    staff = UserFactory(username="hubadmin", is_staff=True)
    staff.groups.add(hub_group_ensure())
    person = UserFactory(username="olga")
    person.groups.add(hub_group_ensure())
    _, person_token = api_token_create(user=person)
    settings_set(user=staff, key="poll_interval_seconds", value=POLL_SECONDS)
    settings_set(user=staff, key="lease_seconds", value=LEASE_SECONDS)
    _agent, sync_token = sync_agent_create(name="onprem-test")

    _hub_server.ensure()
    hub_boot_mark()  # the marker a hub start leaves (this test's cache namespace started empty)
    emulator = Emulator(tmp_path / "emulator.log")
    try:
        yield Platform(
            hub_url=_hub_server.url,
            sync_token=sync_token,
            person_token=person_token,
            emulator=emulator,
            staff=staff,
            person=person,
            tmp=tmp_path,
            hub=_hub_server,
        )
    finally:
        emulator.stop()
    _hub_server.ensure()  # a test that stopped the hub and failed before starting it again
    wait_database_idle()
