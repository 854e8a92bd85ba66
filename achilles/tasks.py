"""Platform Celery tasks."""

from __future__ import annotations

from celery import shared_task

from achilles.health import heartbeat_write


@shared_task(name="achilles.tasks.platform_heartbeat_task")
def platform_heartbeat_task() -> None:
    """Proves the path beat → broker → worker end to end."""
    heartbeat_write("worker")
