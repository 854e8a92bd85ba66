"""The audit trail: one call every app uses to record a security-relevant action.

``audit_record(actor=..., action=..., target=..., details=...)`` appends a row to
``audit_events`` inside the caller's transaction (so an action that rolls back leaves no trace
of having happened). The table is append-only in the database (migration
``achilles/0004_audit_events``); ``audit_prune`` is the retention path, the only one the
trigger lets delete, and only rows older than the horizon it names.
"""

from __future__ import annotations

import json
import logging
from datetime import timedelta
from typing import TYPE_CHECKING, Any, TypeAlias

from django.core.serializers.json import DjangoJSONEncoder
from django.db import connection, transaction
from django.utils import timezone

if TYPE_CHECKING:
    from django.contrib.auth.models import AbstractBaseUser, AnonymousUser

logger = logging.getLogger(__name__)

# Who did it: a user (a request's, so possibly anonymous), None (anonymous) or a label such as "system".
Actor: TypeAlias = "AbstractBaseUser | AnonymousUser | str | None"

# Actions written by the platform (the hub adds its own names; any non-empty name is accepted).
SIGNIN_FAILED = "signin_failed"
SIGNIN_LOCKED_OUT = "signin_locked_out"
TOKEN_CREATED = "token_created"
TOKEN_REVOKED = "token_revoked"
SEARCH_AS_USER = "search_as_user"
WITHHELD_HINT = "withheld_hint"
WITHHELD_HINT_SUPPRESSED = "withheld_hint_suppressed"
AGENT_ADMIN_PAUSED = "agent_admin_paused"
AGENT_ADMIN_RESUMED = "agent_admin_resumed"
PLATFORM_SETTINGS_CHANGED = "platform_settings_changed"
AGENT_MODEL_CHANGED = "agent_model_changed"
AGENT_MODEL_DELETED = "agent_model_deleted"
HUB_SETTING_CHANGED = "hub_setting_changed"
HUB_PUBLICATION_CREATED = "hub_publication_created"

MAX_TARGET = 500


def _actor_fields(actor: Actor) -> tuple[int | None, str]:
    if actor is None:
        return None, "anonymous"
    if isinstance(actor, str):
        return None, actor[:150]
    if getattr(actor, "is_authenticated", False):
        return actor.pk, actor.get_username()[:150]
    return None, "anonymous"


def _request_id() -> str:
    from achilles.middleware import request_id_var

    rid = request_id_var.get()
    return "" if rid == "-" else rid


def audit_record(*, actor: Actor, action: str, target: str = "", details: dict[str, Any] | None = None,
                 request_id: str | None = None) -> None:
    """Append one event. ``actor``: a user, None (anonymous) or a label such as ``"system"``.

    ``request_id`` defaults to the current request's (the ``X-Request-ID`` of the log lines).
    """
    from achilles.models import AuditEvent

    actor_id, actor_name = _actor_fields(actor)
    # Dates, decimals, UUIDs in details are stored as the JSON text Django would write for them.
    safe = json.loads(json.dumps(details or {}, cls=DjangoJSONEncoder, default=str))
    AuditEvent.objects.create(actor_id=actor_id, actor=actor_name, action=action, target=str(target)[:MAX_TARGET],
                              details=safe, request_id=(request_id if request_id is not None else _request_id())[:100])


def audit_count(*, action: str, actor_id: int | None, since) -> int:
    """How many ``action`` events ``actor_id`` has since ``since`` (one index range scan)."""
    from achilles.models import AuditEvent

    return AuditEvent.objects.filter(action=action, actor_id=actor_id, created_at__gte=since).count()


def audit_prune(*, older_than_days: int) -> int:
    """Delete events older than ``older_than_days`` (≥ 1); the retention job. Returns the count.

    The append-only trigger lets a DELETE through only for rows older than the horizon named in
    the transaction-local setting ``achilles.audit_retention_days``, which is set here.
    """
    days = int(older_than_days)
    if days < 1:
        raise ValueError("audit retention must be at least one day")
    horizon = timezone.now() - timedelta(days=days)
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SELECT set_config('achilles.audit_retention_days', %s, true)", [str(days)])
        cursor.execute("DELETE FROM audit_events WHERE created_at < %s", [horizon])
        deleted = cursor.rowcount
    if deleted:
        logger.info("audit retention: deleted %d events older than %d days", deleted, days)
    return deleted
