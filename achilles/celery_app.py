"""The Celery application shared by the worker, beat and the web processes."""

from __future__ import annotations

import os

from celery import Celery
from celery.signals import worker_ready, worker_shutdown

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "achilles.settings")

app = Celery("achilles")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@worker_ready.connect
def _start_worker_heartbeat(sender=None, **kwargs):
    # The "worker" heartbeat speaks for the platform queue (scheduler tick, reaper): a worker
    # started with -Q agents only must not make /healthz green while no one runs the tick.
    from django.conf import settings

    from achilles.health import start_heartbeat_thread

    consumed = set(app.amqp.queues.consume_from or app.amqp.queues)
    if settings.CELERY_TASK_DEFAULT_QUEUE in consumed:
        start_heartbeat_thread("worker")


@worker_shutdown.connect
def _stop_worker_heartbeat(sender=None, **kwargs):
    from achilles.health import stop_heartbeat_thread

    stop_heartbeat_thread()
