"""How agent runs and the platform jobs reach their workers: the Celery route of an agent run and
Beat's schedule of the platform jobs, each pinned by a test (issue 14)."""

from __future__ import annotations

import pytest
from django.conf import settings

pytestmark = [pytest.mark.integration, pytest.mark.p1]


def test_agent_runs_are_routed_to_the_agents_queue_and_platform_jobs_to_the_default_one():
    from achilles.celery_app import app

    def queue_of(task_name: str) -> str:
        return app.amqp.router.route({}, task_name, args=(1,), kwargs={})["queue"].name

    assert queue_of("agents.tasks.agent_run_task") == settings.AGENT_RUN_QUEUE
    assert settings.AGENT_RUN_QUEUE.startswith("agents")
    # a long agent run can never hold up the tick: the tick and the reaper go elsewhere
    for job in ("agents.tasks.agents_scheduler_tick_task", "agents.tasks.agent_runs_reap_stale_task"):
        assert queue_of(job) == settings.CELERY_TASK_DEFAULT_QUEUE != settings.AGENT_RUN_QUEUE


def test_beat_schedules_every_platform_job_at_its_declared_period(db):
    """After migrate (post_migrate syncs them), Beat's own scheduler reads every declared platform
    job from the database with its period — the agents' scheduler tick among them."""
    from achilles.beat import HeartbeatDatabaseScheduler
    from achilles.celery_app import app
    from achilles.periodic import MANAGED_PREFIX

    scheduler = HeartbeatDatabaseScheduler(app=app, lazy=True)
    entries = scheduler.all_as_schedule()

    for key, job in settings.PLATFORM_PERIODIC_JOBS.items():
        entry = entries[f"{MANAGED_PREFIX}{key}"]
        assert entry.task == job["task"]
        assert entry.schedule.run_every.total_seconds() == job["every_seconds"]
    assert settings.PLATFORM_PERIODIC_JOBS["agents.scheduler_tick"]["task"] == "agents.tasks.agents_scheduler_tick_task"
