"""Celery entry points of the Knowledge Store: take arguments, call a service, nothing else."""

from celery import shared_task

from achilles.errors import ServiceUnavailable
from knowledge.connectors import runs as connector_runs
from knowledge.connectors import services as connector_services
from knowledge.connectors.sync import connector_run
from knowledge.services import trust_decay
from knowledge.uploads import services as uploads


@shared_task(name="knowledge.tasks.trust_decay_task")
def trust_decay_task() -> int:
    """KS-8: recompute trust scores from content age and access signals (Celery Beat, hourly)."""
    return trust_decay()


@shared_task(
    name="knowledge.tasks.document_parse_task",
    acks_late=True,
    reject_on_worker_lost=True,
    autoretry_for=(ServiceUnavailable,),
    retry_backoff=10,
    retry_backoff_max=600,
    max_retries=8,
)
def document_parse_task(document_id: int) -> str:
    """Parse an uploaded document and index its record (the ``ingest`` queue). Acked when done, so a
    worker's death re-delivers it; re-running is safe (see ``document_parse``)."""
    return uploads.document_parse(document_id=document_id)


@shared_task(name="knowledge.tasks.documents_requeue_stale_task")
def documents_requeue_stale_task() -> int:
    """Send again the parse tasks that were lost (Celery Beat, every minute)."""
    return uploads.documents_requeue_stale()


class OtherIngestWorkerMaybeAlive(Exception):
    """Another ingest worker's heartbeat is not yet known stale: its documents may be in work."""


@shared_task(
    name="knowledge.tasks.documents_requeue_orphaned_task",
    autoretry_for=(OtherIngestWorkerMaybeAlive,),
    default_retry_delay=6,
    max_retries=10,
)
def documents_requeue_orphaned_task(starting_worker: str) -> int:
    """The ingest worker's start-up sweep (sent by the worker itself as it starts consuming):
    documents left «parsing» by a killed worker are parsed again, once no other ingest worker can
    still be on them."""
    count = uploads.documents_requeue_orphaned(starting_worker=starting_worker)
    if count is None:
        raise OtherIngestWorkerMaybeAlive(starting_worker)
    return count


@shared_task(name="knowledge.tasks.connector_run_task", acks_late=True, reject_on_worker_lost=True)
def connector_run_task(run_id: int) -> str:
    """Run (or resume from its checkpoint) one connector sync (the ``connectors`` queue). Acked when
    done: a worker's death re-delivers it, and the reaper sends it again if the message is lost."""
    return connector_run(run_id=run_id)


@shared_task(name="knowledge.tasks.connector_runs_reap_task")
def connector_runs_reap_task() -> int:
    """Send again connector runs whose message was lost or whose worker died (Beat, every 30 s)."""
    return len(connector_runs.runs_reap())


@shared_task(name="knowledge.tasks.connectors_schedule_task")
def connectors_schedule_task() -> int:
    """Queue the content and permission syncs that are due (Beat, every minute)."""
    return len(connector_services.runs_schedule_due())
