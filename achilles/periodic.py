"""Sync the platform's periodic jobs (settings.PLATFORM_PERIODIC_JOBS) into Celery Beat."""

from __future__ import annotations

from django.conf import settings
from django.db import transaction
from django_celery_beat.models import IntervalSchedule, PeriodicTask

MANAGED_PREFIX = "platform:"


@transaction.atomic
def periodic_jobs_sync() -> list[str]:
    """Idempotent: creates or updates the declared jobs, removes managed jobs no longer declared."""
    names = []
    for key, job in settings.PLATFORM_PERIODIC_JOBS.items():
        schedule, _ = IntervalSchedule.objects.get_or_create(
            every=job["every_seconds"], period=IntervalSchedule.SECONDS
        )
        name = f"{MANAGED_PREFIX}{key}"
        task, created = PeriodicTask.objects.get_or_create(
            name=name, defaults={"task": job["task"], "interval": schedule}
        )
        if not created and (task.task != job["task"] or task.interval_id != schedule.id or not task.enabled):
            task.task, task.interval, task.enabled = job["task"], schedule, True
            task.save()
        names.append(name)
    PeriodicTask.objects.filter(name__startswith=MANAGED_PREFIX).exclude(name__in=names).delete()
    return names
