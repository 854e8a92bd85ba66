"""Mirror sync end to end: a change made in Jira reaches the mirror within two poll intervals through
the incremental JQL; what the overlap re-reads is not uploaded again; settings from the hub apply
without a restart; each run is a sync_run."""

from __future__ import annotations

import time

import pytest

from tests.syncagent.harness import start_launcher, stop, wait_until
from tests.syncagent.integration.conftest import POLL_SECONDS

pytestmark = [pytest.mark.p1]


def visible(issue) -> tuple:
    return (
        issue.key,
        issue.summary,
        issue.status,
        issue.issue_type,
        issue.priority,
        issue.assignee,
        issue.duedate,
        issue.sprint,
        sorted(issue.labels),
        issue.description,
        sorted((link.link_type, link.direction, link.other_key) for link in issue.links.all()),
        [(c.jira_id, c.author, c.created, c.body) for c in issue.comments.order_by("created", "jira_id")],
    )


def test_incremental_sync_brings_jira_changes_and_settings_apply_live(platform):
    from django.core.management import call_command

    from hub.models import MirrorIssue, SyncRun
    from hub.services import settings_set

    # `make run` mirrors the hub's demo data first; the emulator serves the same project, so the
    # sync agent's first full sync changes nothing a user sees.
    call_command("demo_hub")
    before = [visible(i) for i in MirrorIssue.objects.order_by("key")]
    assert len(before) == 30

    proc = start_launcher(
        hub_url=platform.hub_url,
        token=platform.sync_token,
        jira_url=platform.emulator.url,
        state_dir=platform.tmp / "syncagent",
        log=platform.tmp / "launcher.log",
    )
    try:
        wait_until(lambda: SyncRun.objects.filter(kind="full", status="ok").exists(), 60, "the first full sync")
        assert [visible(i) for i in MirrorIssue.objects.order_by("key")] == before
        incremental = SyncRun.objects.filter(kind="incremental", status="ok").order_by("-id")
        first = wait_until(lambda: incremental.first(), 20, "an incremental run")
        # Two polls: an idle poll replaces the previous idle one in the log, so the latest id moves on.
        quiet = wait_until(lambda: incremental.filter(id__gt=first.id).first(), 20, "a second incremental run")
        assert quiet.counts.get("issues") == 0, "the overlap re-read nothing new to upload"
        assert not SyncRun.objects.filter(pk=first.id).exists(), "the idle poll before it left the log"

        resp = platform.emulator.admin.post(
            "/_emulator/touch", json={"key": "AURORA-9010", "summary": "Изменено в Jira"}
        )
        changed_at = time.monotonic()
        wait_until(
            lambda: MirrorIssue.objects.filter(key="AURORA-9010", summary="Изменено в Jira").exists(),
            10,
            "the Jira change in the mirror",
        )
        lag = time.monotonic() - changed_at
        assert lag <= 2 * POLL_SECONDS + 1.5, f"lag {lag:.2f} s"
        row = MirrorIssue.objects.get(key="AURORA-9010")
        assert row.updated.isoformat(timespec="milliseconds").startswith(resp.json()["updated"][:23])

        since = platform.emulator.seq()
        settings_set(user=platform.staff, key="base_label", value="OTHERLABEL")

        def searched_new_label():
            return any(
                'labels = "OTHERLABEL"' in (r["query"].get("jql") or "") for r in platform.emulator.requests(since)
            )

        wait_until(searched_new_label, 10, "the incremental JQL with the new base label")
        assert proc.poll() is None, "no restart needed"
    finally:
        stop(proc)
