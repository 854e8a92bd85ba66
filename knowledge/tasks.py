"""Celery entry points of the Knowledge Store: take arguments, call a service, nothing else."""

from celery import shared_task

from knowledge.services import trust_decay


@shared_task(name="knowledge.tasks.trust_decay_task")
def trust_decay_task() -> int:
    """KS-8: recompute trust scores from content age and access signals (Celery Beat, hourly)."""
    return trust_decay()
