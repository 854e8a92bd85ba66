"""Celery entry points of the Query Engine: take arguments, call a service, nothing else."""

from celery import shared_task

from conversations.services import unanswered_questions_close


@shared_task(name="conversations.tasks.unanswered_questions_close_task")
def unanswered_questions_close_task() -> int:
    """Questions whose turn died with its process get their (failed) answer row (Celery Beat)."""
    return unanswered_questions_close()
