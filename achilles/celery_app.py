"""The Celery application shared by the worker, beat and the web processes."""

from __future__ import annotations

import os

from celery import Celery
from celery.signals import worker_init, worker_ready, worker_shutdown

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "achilles.settings")

app = Celery("achilles")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@worker_init.connect
def _production_guard(sender=None, **kwargs):
    from achilles.security import production_guard

    production_guard()


@worker_ready.connect
def _start_worker_heartbeat(sender=None, **kwargs):
    # One heartbeat per queue served: "worker" speaks for the platform queue (scheduler tick,
    # reaper), "agents_worker" for agent runs. A worker started with -Q agents only must not make
    # /healthz's "worker" green while no one runs the tick, and the other way round.
    from django.conf import settings

    from achilles.health import start_heartbeat_thread

    consumed = set(app.amqp.queues.consume_from or app.amqp.queues)
    roles = tuple(role for role, queue in (("worker", settings.CELERY_TASK_DEFAULT_QUEUE),
                                           ("agents_worker", settings.AGENT_RUN_QUEUE)) if queue in consumed)
    if roles:
        start_heartbeat_thread(roles)


@worker_shutdown.connect
def _stop_worker_heartbeat(sender=None, **kwargs):
    from achilles.health import stop_heartbeat_thread

    stop_heartbeat_thread()
