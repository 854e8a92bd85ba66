"""Batch-finished notifications over Redis pub/sub, and the hub's boot marker.

A batch's last command turning final publishes ``hub:batch:<id>`` on commit; ``batch_wait`` sleeps on
that channel instead of reading the database in a loop. The boot marker lets every web process tell
whether the sync agent has claimed since the hub (re)started, so it lives in Redis, not in a process.
"""

from __future__ import annotations

import datetime as dt
import functools
import logging

import redis
import redis.asyncio as aioredis
from django.conf import settings
from django.db import transaction
from django.db.models import Count, Q
from django.utils import timezone

from achilles.notifications import notify_on_commit
from hub.models import Batch

logger = logging.getLogger(__name__)


def _prefix() -> str:
    return settings.CACHES["default"].get("KEY_PREFIX") or "achilles"


def batch_channel(batch_id: int) -> str:
    return f"{_prefix()}:hub:batch:{batch_id}"


def boot_key() -> str:
    return f"{_prefix()}:hub:boot_at"


@functools.cache
def redis_client() -> redis.Redis:
    # One client (thread-safe pool) per process.
    return redis.Redis.from_url(settings.REDIS_URL, socket_connect_timeout=3, health_check_interval=30)


def async_redis_client() -> aioredis.Redis:
    # Per call: an asyncio client is bound to the loop that created it.
    return aioredis.from_url(settings.REDIS_URL, socket_connect_timeout=3)


def batches_finished_on_commit(batch_ids: list[int]) -> None:
    """Publish each finished batch after the transaction commits (a waiter must see it final)."""
    if not batch_ids:
        return

    def publish() -> None:
        try:
            client = redis_client()
            for batch_id in batch_ids:
                client.publish(batch_channel(batch_id), "finished")
        except redis.RedisError:
            # Waiters re-read the batch at their safety interval; a lost message costs latency only.
            logger.warning("hub: could not publish batch finished for %s", batch_ids, exc_info=True)

    transaction.on_commit(publish)


def batch_owners_notify_on_commit(batch_ids: list[int]) -> None:
    """Each finished batch's creator gets a notice (the bell, e-mail if asked), written after commit."""
    if not batch_ids:
        return
    batches = (
        Batch.objects.filter(pk__in=batch_ids, created_by__isnull=False)
        .annotate(failed=Count("commands", filter=Q(commands__state__in=["failed", "cancelled"])))
        .values("id", "title", "created_by_id", "failed")
    )
    for batch in batches:
        outcome = f"не выполнено команд: {batch['failed']}" if batch["failed"] else "все команды выполнены"
        notify_on_commit(
            user_id=batch["created_by_id"],
            kind="hub_batch",
            title=f"Пакет #{batch['id']} «{batch['title']}» завершён",
            body=f"Пакет хаба завершён: {outcome}.",
            link="/hub/",
        )


def hub_boot_mark(at: dt.datetime | None = None) -> None:
    """Called when a web process starts: from now on the launcher state is unknown until a claim."""
    at = at or timezone.now()
    try:
        redis_client().set(boot_key(), at.isoformat())
    except redis.RedisError:
        logger.warning("hub: could not store the boot marker", exc_info=True)


def hub_booted_at() -> dt.datetime | None:
    try:
        raw = redis_client().get(boot_key())
    except redis.RedisError:
        return None
    return dt.datetime.fromisoformat(raw.decode()) if raw else None
