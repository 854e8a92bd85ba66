"""The launcher with real processes: a broken v7 publication is rolled back to v6 and the hub's
agent_status shows the seed's lines; a working v8 becomes current. (A sha256 mismatch needs bytes the
hub's own CHECK forbids it to store: ``tests/syncagent/unit/test_launcher.py`` serves them.)"""

from __future__ import annotations

import io
import json
import tarfile

import pytest

from syncagent.package import build_artifact
from tests.syncagent.harness import start_launcher, stop, wait_until

pytestmark = [pytest.mark.p1]

BROKEN_MAIN = 'raise SystemExit("v7: unsupported configuration schema 3")\n'


def v6_tree(tmp_path):
    """A sync agent v6 installation (launcher v1 included), as an admin would have unpacked it."""
    root = tmp_path / "install-v6"
    with tarfile.open(fileobj=io.BytesIO(build_artifact(6)), mode="r:gz") as tar:
        tar.extractall(root, filter="data")
    return root / "syncagent" / "run.py"


def contact():
    from hub.models import SyncAgentContact

    return SyncAgentContact.objects.first()


def test_broken_v7_is_rolled_back_to_v6_with_the_seed_lines(platform):
    from hub.protocol import publication_create

    publication_create(version=7, artifact=build_artifact(7, replace={"__main__.py": BROKEN_MAIN}), notes="v7")
    state_dir = platform.tmp / "syncagent"
    proc = start_launcher(
        hub_url=platform.hub_url,
        token=platform.sync_token,
        jira_url=platform.emulator.url,
        state_dir=state_dir,
        log=platform.tmp / "launcher.log",
        run_py=v6_tree(platform.tmp),
    )
    try:
        wait_until(
            lambda: (c := contact()) is not None and c.update_state == "rolled_back" and c.version == 6,
            90,
            "v6 reporting the rollback of v7",
        )
        text = platform.mcp("agent_status", {})
        lines = text.splitlines()
        assert "версия: v6" in lines
        assert any(line.startswith("публикация: v7 от ") for line in lines), text
        assert "обновление: rolled_back v6 → v7" in lines
        assert "запускатель: v1" in lines
        hint = next(line for line in lines if line.startswith("откат с v7 на v6: "))
        assert "v7 exited with code 1 before its first claim" in hint and "unsupported configuration schema 3" in hint
        meta = json.loads((state_dir / "launcher" / "launcher.json").read_text())
        assert meta["current"] == 6
        assert (state_dir / "versions" / "v6").is_dir() and (state_dir / "versions" / "v7").is_dir()
    finally:
        stop(proc)


def test_a_new_version_that_claims_becomes_current(platform):
    from hub.protocol import publication_create

    publication_create(version=7, artifact=build_artifact(7), notes="v7")
    state_dir = platform.tmp / "syncagent"
    proc = start_launcher(
        hub_url=platform.hub_url,
        token=platform.sync_token,
        jira_url=platform.emulator.url,
        state_dir=state_dir,
        log=platform.tmp / "launcher.log",
        run_py=v6_tree(platform.tmp),
    )
    try:
        # v7's first claim still says "starting"; the launcher records "done" once it saw that claim.
        wait_until(
            lambda: (c := contact()) is not None and c.version == 7 and c.update_state == "done",
            60,
            "v7 claiming after a done update",
        )
        c = contact()
        assert (c.launcher_version, c.update_state, c.update_from, c.update_to) == (1, "done", 6, 7)
        assert json.loads((state_dir / "launcher" / "launcher.json").read_text())["current"] == 7
    finally:
        stop(proc)
