"""Sync runs (HUB-14) in the log: an incremental run that wrote nothing replaces the previous such run."""

import pytest

from hub import protocol
from hub.models import SyncRun

pytestmark = pytest.mark.django_db

EMPTY = {"issues": 0, "comments": 0, "links": 0, "unchanged": 0, "stale": 0}


def _run(agent, kind="incremental", status="ok", counts=EMPTY, errors=()):
    run = protocol.sync_run_start(sync_agent=agent, kind=kind)
    return protocol.sync_run_finish(
        sync_agent=agent, sync_run_id=run.id, status=status, counts=dict(counts), errors=list(errors)
    )


def test_an_empty_incremental_run_replaces_the_previous_empty_one(sync_agent):
    """At a 10 s poll interval every idle poll used to add a row (~8 640 a day). Failed before the fix:
    all five empty runs stayed in the log."""
    full = _run(sync_agent, kind="full", counts={**EMPTY, "issues": 3})
    wrote = _run(sync_agent, counts={**EMPTY, "issues": 2, "comments": 1})
    for _ in range(4):
        _run(sync_agent)
    failed = _run(sync_agent, status="failed", errors=["Jira 503"])
    nothing_changed = _run(sync_agent, counts={**EMPTY, "unchanged": 5})
    latest = _run(sync_agent)

    # Kept: every run that wrote, failed or was not incremental, and the latest idle poll (its time
    # is when the sync was last seen alive). An upload's "unchanged" is still work, so it is kept.
    assert list(SyncRun.objects.order_by("id").values_list("id", flat=True)) == [
        full.id,
        wrote.id,
        failed.id,
        nothing_changed.id,
        latest.id,
    ]
    # A retried finish of the kept run is still answered as before.
    again = protocol.sync_run_finish(
        sync_agent=sync_agent, sync_run_id=latest.id, status="ok", counts=dict(EMPTY), errors=[]
    )
    assert again.id == latest.id


def test_empty_runs_of_another_agent_and_running_ones_stay(sync_agent):
    other, _token = protocol.sync_agent_create(name="other")
    theirs = _run(other)
    running = protocol.sync_run_start(sync_agent=sync_agent, kind="incremental")
    mine = _run(sync_agent, counts={})
    assert set(SyncRun.objects.values_list("id", flat=True)) == {theirs.id, running.id, mine.id}
    assert SyncRun.objects.get(pk=running.id).status == "running"
