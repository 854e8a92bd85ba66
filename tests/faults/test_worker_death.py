"""A worker that dies or shuts down (issue 10, finding 2 and 12): /healthz tells within one
heartbeat, and its running run is reaped within one reaper pass, not the whole stale window."""

from __future__ import annotations

import os
import signal
import time

import pytest
from django.conf import settings

from achilles.health import WORKER_DEAD_AFTER_SECONDS
from achilles.platform import platform_settings_update
from agents.models import AgentRun
from agents.services import agent_create, agent_run_request, agent_runs_reap_stale
from tests.achilles.factories import AllowedModelFactory, UserFactory
from tests.achilles.llm_stub_server import StubLLMServer, StubReply
from tests.faults.helpers import children, healthz, kill_all, wait_for
from tests.processes import start_celery_worker, stop

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def slow_run(tmp_path):
    """A prefork agents worker (as `make run` starts it) running an agent whose model answers late."""
    log = tmp_path / "agents.log"
    with StubLLMServer(replies=[StubReply(text="Поздний ответ.", ttft=60)]) as llm:
        AllowedModelFactory(
            name="stub-late",
            provider="openai",
            is_default=True,
            options={"base_url": llm.base_url, "timeout": 120, "idle_timeout": 90},
        )
        platform_settings_update(agent_stale_after_seconds=300)
        agent = agent_create(owner=UserFactory(username="death-owner"), name="late", instructions="Отчёт.")
        worker = start_celery_worker(
            log, "agents-death", queues=[settings.AGENT_RUN_QUEUE], pool="prefork", extra=("--concurrency=1",)
        )
        pool: list[int] = []
        try:
            wait_for(lambda: "ready." in log.read_text(), 60, "worker start", log)
            wait_for(lambda: healthz()["agents_worker"] == "ok", 20, "the consumer's heartbeat", log)
            run = agent_run_request(agent=agent)
            wait_for(lambda: AgentRun.objects.get(pk=run.pk).state == "running", 60, "run start", log)
            wait_for(lambda: llm.requests, 30, "the model call", log)
            pool = children(worker.pid)
            yield worker, run, log
        finally:
            kill_all(pool)
            if worker.poll() is None:
                stop(worker, timeout=5)


def test_a_worker_shutting_down_stops_vouching_at_once(slow_run):
    """Failed before the fix: a side thread wrote the heartbeat until the process exited — a warm
    shutdown waiting for its running task (or a dead consumer) still said ``agents_worker: ok``."""
    worker, run, log = slow_run

    worker.send_signal(signal.SIGTERM)  # warm shutdown: the running task may finish, no new ones
    started = time.monotonic()
    wait_for(lambda: healthz()["agents_worker"] != "ok", 10, "/healthz to drop the worker", log)

    assert time.monotonic() - started < 5
    assert worker.poll() is None  # still finishing its task: only the consumer is gone


def test_a_killed_worker_shows_in_healthz_and_its_run_is_reaped_as_worker_lost(slow_run):
    """Failed before the fix: the run waited the whole stale window (300 s here) because the
    orphaned pool process kept its heartbeat fresh; now the reaper asks whether its worker lives."""
    worker, run, log = slow_run
    assert AgentRun.objects.get(pk=run.pk).worker.startswith("agents-death-")  # hostname:main pid

    os.kill(worker.pid, signal.SIGKILL)
    worker.wait(timeout=10)
    killed = time.monotonic()
    wait_for(
        lambda: healthz()["agents_worker"] != "ok",
        settings.HEARTBEAT_MAX_AGE_SECONDS + 10,
        "/healthz to see the dead consumer",
        log,
    )
    time.sleep(max(0.0, WORKER_DEAD_AFTER_SECONDS + 1 - (time.monotonic() - killed)))

    assert agent_runs_reap_stale() == 1
    reaped = AgentRun.objects.get(pk=run.pk)
    assert (reaped.state, reaped.reason) == ("failed", "worker_lost")
    assert time.monotonic() - killed < 60  # well inside the 300 s stale window
