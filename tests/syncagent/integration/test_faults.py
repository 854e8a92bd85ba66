"""Faults end to end: Jira's Retry-After is honoured (and never below 1 s), every 429 is counted and
the hub's agent_status shows the count; the hub going away mid-command loses no result."""

from __future__ import annotations

import time

import pytest

from tests.syncagent.harness import start_launcher, stop, wait_until

pytestmark = [pytest.mark.p1]


def puts(platform, key: str, since: int) -> list[dict]:
    return [
        r for r in platform.emulator.requests(since) if r["method"] == "PUT" and r["path"] == f"/rest/api/2/issue/{key}"
    ]


def test_429_retry_after_is_honoured_counted_and_shown(platform):
    from hub.models import Command, SyncRun

    proc = start_launcher(
        hub_url=platform.hub_url,
        token=platform.sync_token,
        jira_url=platform.emulator.url,
        state_dir=platform.tmp / "syncagent",
        log=platform.tmp / "launcher.log",
    )
    try:
        wait_until(lambda: SyncRun.objects.filter(kind="full", status="ok").exists(), 60, "the first full sync")
        platform.emulator.faults(
            {
                "kind": "429",
                "method": "PUT",
                "path": r"^/rest/api/2/issue/AURORA-9005$",
                "retry_after": "3",
                "times": 1,
            },
            {
                "kind": "429",
                "method": "PUT",
                "path": r"^/rest/api/2/issue/AURORA-9006$",
                "retry_after": "0",
                "times": 3,
            },
        )
        since = platform.emulator.seq()
        batch_id = platform.batch_create(
            "429",
            [
                {"type": "ensure_fields", "key": "AURORA-9005", "fields": {"duedate": "2027-01-15"}},
                {"type": "ensure_fields", "key": "AURORA-9006", "fields": {"duedate": "2027-01-16"}},
            ],
        )
        platform.batch_wait(batch_id, minutes=2)
        assert set(Command.objects.filter(batch_id=batch_id).values_list("state", flat=True)) == {"done"}

        slow = puts(platform, "AURORA-9005", since)
        assert [r["status"] for r in slow] == [429, 204]
        assert slow[1]["at"] - slow[0]["at"] >= 3.0, "Retry-After: 3 → waited at least 3 s"

        storm = puts(platform, "AURORA-9006", since)
        assert [r["status"] for r in storm] == [429, 429, 429, 204]
        gaps = [b["at"] - a["at"] for a, b in zip(storm, storm[1:], strict=False)]
        assert min(gaps) >= 1.0, f"Retry-After: 0 must not storm: {gaps}"

        assert platform.emulator.issue("AURORA-9006")["fields"]["duedate"] == "2027-01-16"
        wait_until(lambda: "429 за сутки: 4" in platform.mcp("agent_status", {}), 10, "the 429 count in agent_status")
    finally:
        stop(proc)


def test_hub_down_while_a_command_runs_its_report_arrives_later(platform):
    """The hub goes away while the sync agent is inside a Jira call; the result waits in the state
    file, the sync agent keeps trying, and the report lands once the hub is back: done, Jira changed once."""
    from hub.models import Command, SyncRun

    proc = start_launcher(
        hub_url=platform.hub_url,
        token=platform.sync_token,
        jira_url=platform.emulator.url,
        state_dir=platform.tmp / "syncagent",
        log=platform.tmp / "launcher.log",
    )
    try:
        wait_until(lambda: SyncRun.objects.filter(kind="full", status="ok").exists(), 60, "the first full sync")
        platform.emulator.faults(
            {"kind": "latency", "method": "PUT", "path": r"^/rest/api/2/issue/AURORA-9007$", "seconds": 2}
        )
        since = platform.emulator.seq()
        batch_id = platform.batch_create(
            "hub down", [{"type": "ensure_fields", "key": "AURORA-9007", "fields": {"duedate": "2027-03-01"}}]
        )
        first = Command.objects.filter(batch_id=batch_id, seq=1)
        wait_until(lambda: first.filter(state="claimed").exists(), 30, "the command claimed")
        platform.hub_down()
        pending = platform.tmp / "syncagent" / "agent" / "state.json"
        wait_until(lambda: '"pending_reports": [{' in pending.read_text(), 20, "the result kept locally")
        time.sleep(2)  # a few failed tries against the missing hub
        platform.hub_up()
        platform.batch_wait(batch_id)
        assert first.get().state == "done"
        assert [r for r in platform.emulator.writes(since) if r.startswith("PUT ")] == [
            "PUT /rest/api/2/issue/AURORA-9007"
        ]
        wait_until(lambda: '"pending_reports": []' in pending.read_text(), 10, "the report acknowledged")
    finally:
        stop(proc)
