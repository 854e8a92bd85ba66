"""Celery entry points of the hub: take ids, call services, nothing else."""

from __future__ import annotations

import logging

from django.db import transaction

from achilles.celery_app import app

logger = logging.getLogger(__name__)


@app.task(name="hub.tasks.commands_requeue_expired_task", ignore_result=True)
def commands_requeue_expired_task() -> int:
    from hub.protocol import commands_requeue_expired

    return len(commands_requeue_expired())


@app.task(name="hub.tasks.mirror_to_knowledge_task", ignore_result=True, acks_late=True)
def mirror_to_knowledge_task(issue_ids: list[int]) -> int:
    from hub.knowledge_feed import mirror_to_knowledge

    return mirror_to_knowledge(issue_ids=issue_ids)


def mirror_to_knowledge_on_commit(issue_ids: list[int]) -> None:
    """Queue the Knowledge Store upsert once the mirror rows are committed."""
    if not issue_ids:
        return

    def send() -> None:
        try:
            mirror_to_knowledge_task.delay(issue_ids)
        except Exception as exc:  # no broker: the next upload of these issues (or a full sync) feeds them
            logger.warning("hub: mirror → knowledge not enqueued for %d issues (%s)", len(issue_ids), exc)

    transaction.on_commit(send)
