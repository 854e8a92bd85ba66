"""Platform Celery tasks."""

from __future__ import annotations

from celery import shared_task
from django.conf import settings

from achilles.audit import audit_prune
from achilles.health import heartbeat_write


@shared_task(name="achilles.tasks.platform_heartbeat_task")
def platform_heartbeat_task() -> None:
    """Proves the path beat → broker → worker end to end."""
    heartbeat_write("worker")


@shared_task(name="achilles.tasks.audit_retention_task")
def audit_retention_task() -> int:
    """Deletes audit events older than ``AUDIT_RETENTION_DAYS`` (the trigger's only delete path)."""
    return audit_prune(older_than_days=settings.AUDIT_RETENTION_DAYS)
