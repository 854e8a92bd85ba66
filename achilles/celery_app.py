"""The Celery application shared by the worker, beat and the web processes."""

from __future__ import annotations

import contextlib
import logging
import os

from celery import Celery, bootsteps
from celery.signals import task_postrun, worker_init, worker_shutting_down

from achilles.bootstrap import bootstrap
from achilles.broker import install as install_broker_transport

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "achilles.settings")
# The entry point of `celery -A achilles.celery_app worker|beat`; in a process that has
# bootstrapped already (manage.py, daphne, pytest) this returns at once.
bootstrap()
install_broker_transport()  # kombu's Redis transport, fixed for a Redis blip (see achilles.broker)

# After the settings module is named: achilles.metrics reads the settings when imported.
from achilles.metrics import task_record  # noqa: E402

logger = logging.getLogger(__name__)

app = Celery("achilles")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


_main_pid: int | None = None


@task_postrun.connect
def _count_task_outcome(sender=None, state=None, **kwargs):
    # /metrics: achilles_celery_tasks_total{task, outcome} (SUCCESS, FAILURE, RETRY, …)
    task_record(getattr(sender, "name", "?"), str(state or "UNKNOWN"))


@worker_init.connect
def _remember_main_pid(**kwargs):
    # Set before the pool forks, so pool processes inherit it: they report their worker's main pid.
    global _main_pid
    _main_pid = os.getpid()


def worker_instance(hostname: str) -> str:
    """One worker process, as the heartbeats and agent runs name it: ``hostname:main pid``. A worker
    restarted under the same hostname (supervisord) is a new instance; the old one's runs are lost."""
    return f"{hostname}:{_main_pid or os.getpid()}"


@worker_init.connect
def _production_guard(sender=None, **kwargs):
    # ACHILLES_ENV=production: a worker refuses to start with demo accounts or demo passwords.
    from achilles.security import production_guard

    production_guard()


def served_roles(consumer) -> tuple[str, ...]:
    # One heartbeat per queue served: "worker" speaks for the platform queue (scheduler tick,
    # reaper), "agents_worker" for agent runs, "ingest_worker" for parsing uploaded documents. A worker started with -Q agents only must not make
    # /healthz's "worker" green while no one runs the tick, and the other way round.
    from django.conf import settings

    consumed = {queue.name for queue in consumer.task_consumer.queues} if consumer.task_consumer else set()
    return tuple(
        role
        for role, queue in (
            ("worker", settings.CELERY_TASK_DEFAULT_QUEUE),
            ("agents_worker", settings.AGENT_RUN_QUEUE),
            ("ingest_worker", settings.KNOWLEDGE_INGEST_QUEUE),
        )
        if queue in consumed
    )


class ConsumerHeartbeat(bootsteps.StartStopStep):
    """The worker's heartbeat, written from the consumer's own event loop while it consumes.

    Started after the task consumer, stopped with it: a consumer that dies or hangs stops writing
    (a side thread would go on vouching for a dead consumer), and a worker that shuts down takes
    itself off the list at once.
    """

    requires = ("celery.worker.consumer.tasks:Tasks",)

    def __init__(self, parent, **kwargs):
        self.timer_entry = None
        self.roles: tuple[str, ...] = ()
        super().__init__(parent, **kwargs)

    def start(self, parent):
        from achilles.health import WORKER_HEARTBEAT_SECONDS

        self.roles = served_roles(parent)
        if not self.roles:
            return
        instance = worker_instance(parent.hostname)
        self._beat(instance)
        self.timer_entry = parent.timer.call_repeatedly(WORKER_HEARTBEAT_SECONDS, self._beat, (instance,), priority=10)
        if "ingest_worker" in self.roles:
            # a start-up sweep: documents a killed ingest worker left «parsing» are parsed again
            # (routed to the ingest queue, so this worker runs it; see knowledge.uploads.services)
            with contextlib.suppress(Exception):
                app.send_task("knowledge.tasks.documents_requeue_orphaned_task", args=(instance,))

    def _beat(self, instance: str) -> None:
        from achilles.health import heartbeat_write

        if _shutting_down:
            return
        for role in self.roles:
            try:
                heartbeat_write(role, instance)
            except Exception:  # Redis away for a moment: /healthz says so itself
                logger.debug("heartbeat not written", exc_info=True)

    def stop(self, parent):
        if self.timer_entry is not None:
            self.timer_entry.cancel()
            self.timer_entry = None

    def shutdown(self, parent):
        self.stop(parent)
        _leave(worker_instance(parent.hostname), self.roles)


_shutting_down = False


def _leave(instance: str, roles) -> None:
    from achilles.health import heartbeat_remove

    for role in roles:
        with contextlib.suppress(Exception):
            heartbeat_remove(role, instance)


@worker_shutting_down.connect
def _stop_vouching(sender=None, **kwargs):
    # A warm shutdown lets running tasks finish but takes no new ones: from this moment the worker
    # no longer serves its queues, so it stops vouching for them (/healthz, the reaper) at once.
    global _shutting_down
    _shutting_down = True
    _leave(worker_instance(str(sender)), ("worker", "agents_worker", "ingest_worker"))


app.steps["consumer"].add(ConsumerHeartbeat)
