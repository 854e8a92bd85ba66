"""The platform for the sync-agent end-to-end tests: the hub as ``make run`` serves it (daphne on the
test database), the Jira emulator process, and a sync-agent token; short poll interval and lease."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.hub.syncagent.harness import Emulator, free_port, stop, wait_port

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
    daphne: object = None
    port: int = 0

    def hub_down(self) -> None:
        stop(self.daphne)

    def hub_up(self) -> None:
        from tests.processes import start_daphne

        self.daphne = start_daphne(self.tmp / "daphne-2.log", self.port)
        wait_port(self.port, timeout=60)

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


@pytest.fixture
def platform(transactional_db, tmp_path):
    from achilles.services import api_token_create
    from hub.models import HubState
    from hub.permissions import hub_group_ensure
    from hub.protocol import sync_agent_create
    from hub.services import settings_set
    from tests.achilles.factories import UserFactory
    from tests.processes import start_daphne

    HubState.objects.get_or_create(pk=1)  # a migration's row; an earlier transactional test's flush emptied it
    staff = UserFactory(username="hubadmin", is_staff=True)
    staff.groups.add(hub_group_ensure())
    person = UserFactory(username="olga")
    person.groups.add(hub_group_ensure())
    _, person_token = api_token_create(user=person)
    settings_set(user=staff, key="poll_interval_seconds", value=POLL_SECONDS)
    settings_set(user=staff, key="lease_seconds", value=LEASE_SECONDS)
    _agent, sync_token = sync_agent_create(name="onprem-test")

    port = free_port()
    daphne = start_daphne(tmp_path / "daphne.log", port)
    emulator = Emulator(tmp_path / "emulator.log")
    try:
        wait_port(port, timeout=60)
        platform = Platform(hub_url=f"http://127.0.0.1:{port}", sync_token=sync_token, person_token=person_token,
                            emulator=emulator, staff=staff, person=person, tmp=tmp_path, daphne=daphne, port=port)
        yield platform
    finally:
        emulator.stop()
        stop(platform.daphne if "platform" in locals() else daphne)
