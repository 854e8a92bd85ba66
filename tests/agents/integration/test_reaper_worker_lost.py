"""The reaper and a worker known dead (issue 10, finding 12): reaped in one pass, not after the
stale window; a live worker's run and a run of unknown worker wait for the window as before."""

from __future__ import annotations

import time

import pytest
from django.utils import timezone

from achilles.health import WORKER_DEAD_AFTER_SECONDS, _redis, heartbeat_write
from agents.services import agent_runs_reap_stale

pytestmark = [pytest.mark.integration, pytest.mark.django_db]


@pytest.fixture
def redis_up_long_enough():
    """A Redis that has just (re)started knows no worker yet; the reaper rightly trusts it only later."""
    uptime = int(_redis().info("server")["uptime_in_seconds"])
    if uptime <= WORKER_DEAD_AFTER_SECONDS:
        time.sleep(WORKER_DEAD_AFTER_SECONDS + 1 - uptime)


def _running(run_factory, worker: str):
    now = timezone.now()
    return run_factory(state="running", started_at=now, heartbeat_at=now, worker=worker)


def test_a_run_whose_worker_left_no_heartbeat_is_reaped_worker_lost_at_once(run_factory, redis_up_long_enough):
    """Failed before the fix: a fresh row heartbeat kept it running for the whole stale window."""
    dead = _running(run_factory, "agents@gone")
    heartbeat_write("agents_worker", "agents@alive")
    alive = _running(run_factory, "agents@alive")
    unknown = _running(run_factory, "")

    assert agent_runs_reap_stale() == 1

    dead.refresh_from_db(), alive.refresh_from_db(), unknown.refresh_from_db()
    assert (dead.state, dead.reason) == ("failed", "worker_lost") and dead.finished_at is not None
    assert alive.state == unknown.state == "running"


def test_a_redis_that_just_restarted_is_not_taken_as_every_worker_dead(run_factory, monkeypatch):
    import achilles.health as health

    run = _running(run_factory, "agents@somewhere")
    monkeypatch.setattr(health, "WORKER_DEAD_AFTER_SECONDS", 10**9)  # "Redis has not been up that long"

    assert agent_runs_reap_stale() == 0
    run.refresh_from_db()
    assert run.state == "running"
