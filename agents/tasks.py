"""Celery entry points of the Agent Engine: take ids, call services, nothing else."""

from __future__ import annotations

# The project's app, not ``shared_task``: importing this module from a web process must bind the
# tasks to the configured broker, not to Celery's default app (amqp://localhost).
from achilles.celery_app import app


@app.task(name="agents.tasks.agent_run_task", acks_late=True, bind=True)
def agent_run_task(self, run_id: int) -> str | None:
    from achilles.celery_app import worker_instance
    from agents.services import run_execute

    hostname = self.request.hostname
    return run_execute(run_id, worker=worker_instance(hostname) if hostname else "")


@app.task(name="agents.tasks.agents_scheduler_tick_task", ignore_result=True)
def agents_scheduler_tick_task() -> int:
    from agents.services import scheduler_tick

    return len(scheduler_tick().queued)


@app.task(name="agents.tasks.agent_runs_reap_stale_task", ignore_result=True)
def agent_runs_reap_stale_task() -> int:
    from agents.services import agent_runs_reap_stale

    return agent_runs_reap_stale()
