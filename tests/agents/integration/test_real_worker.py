"""Against a real Celery worker on the real (embedded) Redis: a run end to end, then ``kill -9``
mid-run, the reaper, and the agent running again (AE-RUN, done-when of the issue)."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from datetime import timedelta
from pathlib import Path

import pytest
from django.conf import settings
from django.utils import timezone

from achilles.platform import platform_settings_update
from agents.models import AgentRun
from agents.services import agent_create, agent_run_request, agent_runs_reap_stale
from tests.achilles.factories import AllowedModelFactory, UserFactory
from tests.processes import start_celery_worker

pytestmark = [pytest.mark.integration, pytest.mark.p0]
ROOT = Path(settings.BASE_DIR)


def _start_worker(tmp_path: Path, name: str) -> subprocess.Popen:
    return start_celery_worker(tmp_path / f"{name}.log", f"ae-{name}", extra=("--without-gossip", "--without-mingle"))


def _wait_for(run_id: int, states: set[str], timeout: float, seen: list[str], log: Path) -> AgentRun:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        run = AgentRun.objects.get(pk=run_id)
        if not seen or seen[-1] != run.state:
            seen.append(run.state)
        if run.state in states:
            return run
        time.sleep(0.05)
    raise AssertionError(f"run {run_id} never reached {states}; saw {seen}\n{log.read_text()[-3000:]}")


@pytest.mark.django_db(transaction=True)
def test_real_worker_runs_then_kill_9_mid_run_is_reaped_stale_and_the_agent_runs_again(tmp_path):
    # given the offline builtin model, slowed down so a run lasts a few seconds
    owner = UserFactory(username="worker-owner")
    AllowedModelFactory(name="builtin-slow", provider="builtin", is_default=True, options={"delay": 0.4})
    platform_settings_update(agent_stale_after_seconds=30)
    agent = agent_create(owner=owner, name="real", instructions="Что делать дежурному при инциденте?")
    worker = _start_worker(tmp_path, "first")
    try:
        # when a manual run is requested (the task goes through Redis to the worker)
        run = agent_run_request(agent=agent)
        seen: list[str] = []
        running = _wait_for(run.pk, {"running", "succeeded", "failed"}, 90, seen, tmp_path / "first.log")
        assert running.state == "running", seen
        # and the worker is killed -9 in the middle of it
        os.kill(worker.pid, signal.SIGKILL)
        worker.wait(timeout=10)
    finally:
        if worker.poll() is None:
            worker.kill()
    # then the row is left running: a zombie holding the single-flight lock
    zombie = AgentRun.objects.get(pk=run.pk)
    assert zombie.state == "running" and zombie.finished_at is None
    # when the reaper runs after the heartbeat went stale
    assert agent_runs_reap_stale(now=timezone.now() + timedelta(seconds=31)) == 1
    zombie.refresh_from_db()
    assert (zombie.state, zombie.reason) == ("failed", "stale")

    # then the agent runs again, on a fresh worker: queued → running → succeeded with output and tokens
    worker = _start_worker(tmp_path, "second")
    try:
        again = agent_run_request(agent=agent)
        seen = []
        done = _wait_for(again.pk, {"succeeded", "failed"}, 90, seen, tmp_path / "second.log")
    finally:
        worker.terminate()
        try:
            worker.wait(timeout=15)
        except subprocess.TimeoutExpired:
            worker.kill()
    assert done.state == "succeeded", (done.error, (tmp_path / "second.log").read_text()[-3000:])
    assert seen[0] == "queued" and "running" in seen
    assert done.output.strip() and done.tokens_used > 0
    assert done.started_at and done.finished_at and done.enqueued_at
