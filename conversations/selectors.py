"""Reads of the Query Engine, with ownership built in: foreign or unknown → NotFound (never 403)."""

from __future__ import annotations

import base64
import binascii
import json
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Generic, TypeVar

from django.contrib.auth import get_user_model
from django.db.models import Prefetch, Q

from achilles.errors import NotFound, ValidationFailed
from achilles.models import User
from conversations.models import Citation, Conversation, Message


def _as_uuid(value: object) -> uuid.UUID:
    try:
        return value if isinstance(value, uuid.UUID) else uuid.UUID(str(value))
    except (ValueError, TypeError, AttributeError):
        raise NotFound("conversation not found") from None


def conversation_get_for_user(*, user: User, conversation_id: uuid.UUID | str, with_model: bool = False,
                              for_update: bool = False) -> Conversation:
    """The user's own thread (404 otherwise); ``for_update`` locks its row until the transaction
    ends, so a concurrent delete either happened (404) or waits."""
    qs = Conversation.objects.filter(pk=_as_uuid(conversation_id), user=user)
    if for_update:
        qs = qs.select_for_update(of=("self",))
    conversation = (qs.select_related("selected_model") if with_model else qs).first()
    if conversation is None:
        raise NotFound("conversation not found")
    return conversation


def message_get_for_user(*, user: User, message_id: int, for_update: bool = False) -> Message:
    qs = Message.objects.filter(pk=message_id, conversation__user=user)
    message = (qs.select_for_update(of=("self",)) if for_update else qs).first()
    if message is None:
        raise NotFound("message not found")
    return message


# --- cursor pagination ----------------------------------------------------------------------


def encode_cursor(payload: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(payload, separators=(",", ":")).encode()).decode().rstrip("=")


def decode_cursor(cursor: str | None) -> dict[str, Any] | None:
    if not cursor:
        return None
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        payload = json.loads(base64.urlsafe_b64decode(padded.encode()).decode())
        if not isinstance(payload, dict):
            raise ValueError
        return payload
    except (ValueError, binascii.Error, UnicodeDecodeError):
        raise ValidationFailed("invalid cursor", field="cursor") from None


T = TypeVar("T")


@dataclass(frozen=True)
class Page(Generic[T]):
    """One page of a keyset-paginated list and the cursor of the next (None: the last page)."""

    items: list[T]
    next_cursor: str | None


def conversation_list_for_user(*, user: User, cursor: str | None = None, limit: int = 20) -> Page[Conversation]:
    """Own conversations, most recently active first; keyset cursor on (updated_at, id)."""
    qs = Conversation.objects.filter(user=user).order_by("-updated_at", "-id")
    position = decode_cursor(cursor)
    if position is not None:
        try:
            at = datetime.fromisoformat(position["u"])
            last_id = uuid.UUID(position["i"])
        except (KeyError, ValueError, TypeError):
            raise ValidationFailed("invalid cursor", field="cursor") from None
        qs = qs.filter(Q(updated_at__lt=at) | Q(updated_at=at, id__lt=last_id))
    rows = list(qs[: limit + 1])
    next_cursor = None
    if len(rows) > limit:
        rows = rows[:limit]
        last = rows[-1]
        next_cursor = encode_cursor({"u": last.updated_at.isoformat(), "i": str(last.id)})
    return Page(items=rows, next_cursor=next_cursor)


def conversation_messages(*, conversation: Conversation, cursor: str | None = None, limit: int = 50,
                          order: str = "asc") -> Page[Message]:
    """Messages of a thread with their citations: two queries whatever the thread's length."""
    if order not in ("asc", "desc"):
        raise ValidationFailed("order is asc or desc", field="order")
    qs = Message.objects.filter(conversation=conversation).order_by("id" if order == "asc" else "-id")
    position = decode_cursor(cursor)
    if position is not None:
        last_id = position.get("i")
        if not isinstance(last_id, int):
            raise ValidationFailed("invalid cursor", field="cursor")
        qs = qs.filter(id__gt=last_id) if order == "asc" else qs.filter(id__lt=last_id)
    qs = qs.prefetch_related(Prefetch("citations", queryset=Citation.objects.order_by("rank")))
    rows = list(qs[: limit + 1])
    next_cursor = None
    if len(rows) > limit:
        rows = rows[:limit]
        next_cursor = encode_cursor({"i": rows[-1].id})
    return Page(items=rows, next_cursor=next_cursor)


def withheld_contact_emails(*, messages: Iterable[Message]) -> dict[int, str]:
    """E-mail addresses of the authors named in the messages' withheld hints (active users with one)."""
    ids = {source["contact"]["user_id"] for m in messages for source in (m.withheld_hint or {}).get("sources", [])
           if isinstance(source.get("contact"), dict) and isinstance(source["contact"].get("user_id"), int)}
    if not ids:
        return {}
    users = get_user_model().objects.filter(pk__in=ids, is_active=True).exclude(email="")
    return dict(users.values_list("pk", "email"))
