"""Platform Celery tasks."""

from __future__ import annotations

import logging
from dataclasses import asdict

from celery import shared_task
from django.conf import settings

from achilles.audit import audit_prune
from achilles.directory.sync import directory_sync
from achilles.errors import Conflict
from achilles.health import heartbeat_write
from achilles.notifications import notification_email_send

logger = logging.getLogger(__name__)


@shared_task(name="achilles.tasks.platform_heartbeat_task")
def platform_heartbeat_task() -> None:
    """Proves the path beat → broker → worker end to end."""
    heartbeat_write("worker")


@shared_task(name="achilles.tasks.audit_retention_task")
def audit_retention_task() -> int:
    """Deletes audit events older than ``AUDIT_RETENTION_DAYS`` (the trigger's only delete path)."""
    return audit_prune(older_than_days=settings.AUDIT_RETENTION_DAYS)


@shared_task(name="achilles.tasks.directory_sync_task")
def directory_sync_task() -> dict:
    """The directory sync (LDAP_SYNC_INTERVAL_MINUTES; declared only when LDAP_SERVER_URI is set)."""
    try:
        return asdict(directory_sync())
    except Conflict:  # the previous run is still going: this one is not needed
        logger.info("directory sync skipped: the previous run is still going")
        return {}


@shared_task(name="achilles.tasks.notification_email_task", autoretry_for=(OSError,), retry_backoff=30, max_retries=5)
def notification_email_task(notification_id: int) -> bool:
    """E-mails one notice (queued after the notice commits; an SMTP server away is retried)."""
    return notification_email_send(notification_id)
