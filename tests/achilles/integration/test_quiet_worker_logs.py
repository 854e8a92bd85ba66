"""A real Celery worker at INFO, as `make run` starts it: the scheduler tick and the heartbeat that
did nothing leave no line; the job after them does (issue 9: `make run`'s output was a wall of
tick lines every 2 s)."""

import time

import pytest

from tests.processes import STARTUP_SECONDS, start_celery_worker, stop

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def test_an_idle_tick_and_heartbeat_are_not_logged_at_info(tmp_path):
    from achilles.tasks import platform_heartbeat_task
    from agents.tasks import agents_scheduler_tick_task
    from knowledge.tasks import trust_decay_task

    log = tmp_path / "worker.log"
    proc = start_celery_worker(log, "quiet", queues=None, loglevel="INFO")
    try:
        for _ in range(3):
            agents_scheduler_tick_task.delay()
            platform_heartbeat_task.delay()
        trust_decay_task.delay()  # a solo worker runs them in order: this one comes last
        deadline = time.monotonic() + STARTUP_SECONDS
        while (
            "trust_decay_task" not in log.read_text()
            or "succeeded" not in log.read_text().split("trust_decay_task")[-1]
        ):
            assert time.monotonic() < deadline and proc.poll() is None, log.read_text()[-3000:]
            time.sleep(0.3)
    finally:
        stop(proc)
    text = log.read_text()
    assert "knowledge.tasks.trust_decay_task" in text
    assert "agents_scheduler_tick_task" not in text and "platform_heartbeat_task" not in text, text[-3000:]
