"""Celery entry points of the hub: take ids, call services, nothing else."""

from __future__ import annotations

import logging

from django.db import transaction

from achilles.celery_app import app

logger = logging.getLogger(__name__)


@app.task(name="hub.tasks.commands_requeue_expired_task", ignore_result=True)
def commands_requeue_expired_task() -> int:
    from hub.protocol import commands_requeue_expired  # noqa: PLC0415 — hub.protocol imports this module

    return len(commands_requeue_expired())


@app.task(name="hub.tasks.mirror_to_knowledge_task", ignore_result=True, acks_late=True)
def mirror_to_knowledge_task(issue_ids: list[int]) -> int:
    from hub.knowledge_feed import mirror_to_knowledge  # noqa: PLC0415 — hub.protocol → tasks; keep the cycle open

    return mirror_to_knowledge(issue_ids=issue_ids)


def mirror_to_knowledge_on_commit(issue_ids: list[int]) -> None:
    """Queue the Knowledge Store upsert once the mirror rows are committed.

    Without a broker the feed runs inline in the same callback: a re-upload of these issues is
    ``unchanged`` and would never feed them, so dropping the task would lose them for the KS until
    they change in Jira. Nothing here raises: the mirror write is committed and the upload answered."""
    if not issue_ids:
        return

    def send() -> None:
        try:
            mirror_to_knowledge_task.delay(issue_ids)
            return
        except Exception as exc:  # the broker is away (kombu OperationalError, redis ConnectionError)
            logger.warning(
                "hub: mirror → knowledge not enqueued for %d issues (%s); feeding inline", len(issue_ids), exc
            )
        try:
            from hub.knowledge_feed import mirror_to_knowledge  # noqa: PLC0415 — see mirror_to_knowledge_task

            mirror_to_knowledge(issue_ids=issue_ids)
        except Exception:  # a callback that raises after the commit would turn a kept write into a 500
            logger.exception("hub: mirror → knowledge inline feed failed for %d issues", len(issue_ids))

    transaction.on_commit(send)
