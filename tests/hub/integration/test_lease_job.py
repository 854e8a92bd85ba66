"""The lease-expiry re-issue runs from Celery Beat: declared in PLATFORM_PERIODIC_JOBS, synced into
django-celery-beat, and its task requeues expired leases on the real database."""

import pytest
from django.conf import settings
from django.db import connection

from achilles.periodic import periodic_jobs_sync
from hub import protocol, services
from hub.models import Command
from hub.tasks import commands_requeue_expired_task

pytestmark = pytest.mark.django_db


def test_the_job_is_declared_and_synced_into_beat(db):
    job = settings.PLATFORM_PERIODIC_JOBS["hub.requeue_expired_leases"]
    assert job["task"] == commands_requeue_expired_task.name and job["every_seconds"] <= 10
    from django_celery_beat.models import PeriodicTask

    periodic_jobs_sync()
    task = PeriodicTask.objects.get(name="platform:hub.requeue_expired_leases")
    assert task.task == "hub.tasks.commands_requeue_expired_task" and task.enabled


def test_the_task_requeues_only_expired_leases(hub_user, sync_agent):
    services.batch_create(
        user=hub_user,
        title="t",
        commands=[
            {"type": "ensure_comment", "key": "AURORA-1", "body": "a"},
            {"type": "ensure_comment", "key": "AURORA-1", "body": "b"},
        ],
    )
    first, second = protocol.sync_agent_claim(sync_agent=sync_agent, version=6, launcher_version=None)["commands"]
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE hub_commands SET lease_expires_at = now() - interval '1 second' WHERE id = %s", [first["id"]]
        )
    assert commands_requeue_expired_task.apply().get() == 1
    assert Command.objects.get(pk=first["id"]).state == "queued"
    assert Command.objects.get(pk=second["id"]).state == "claimed"
