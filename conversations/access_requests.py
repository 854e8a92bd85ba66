"""«Запросить доступ» on the withheld hint: a request to the source's named contact.

The answer's withheld hint (``conversations.grounding.withheld_hint``) names, per source system, the
author of records the reader may not see. The reader may ask that author for access: the author gets
a notice in the web app (``achilles.notifications``; e-mailed when mail is configured and they opted
in) carrying the reader's question and the source's label — nothing of the withheld records (no
title, no text, no count), which the reader never saw and the author can find themselves.

Rate-limited in the shared cache: one request a day for the same reader, author and source, and at
most ``REQUESTS_PER_HOUR`` requests an hour from one reader (a notice lands in someone else's bell:
a reader must not be able to flood it).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from django.core.cache import cache
from django.db import transaction
from django.utils.translation import gettext as _

from achilles.errors import NotFound, TooManyRequests
from achilles.models import Notification, User
from achilles.notifications import notification_create
from conversations.models import Message
from conversations.selectors import message_get_for_user
from knowledge.facade import source_labels

REPEAT_SECONDS = 24 * 3600
REQUESTS_PER_HOUR = 5
QUESTION_CHARS = 1000


@dataclass(frozen=True)
class AccessRequestSent:
    """What the reader is told: whom the request went to, about which source (both in the hint)."""

    contact_name: str
    source_label: str


def _named_contact(message: Message, source_system: str, contact_id: int) -> dict | None:
    for source in (message.withheld_hint or {}).get("sources", []):
        if not isinstance(source, dict) or source.get("source_system") != source_system:
            continue
        contact = source.get("contact")
        if isinstance(contact, dict) and contact.get("user_id") == contact_id:
            return contact
    return None


def _question_of(message: Message) -> str:
    """The reader's question the answer replied to (the user message just before it)."""
    asked = (
        Message.objects.filter(conversation_id=message.conversation_id, role="user", id__lt=message.id)
        .order_by("-id")
        .values_list("content", flat=True)
        .first()
    )
    text = (asked or "").strip()
    return text if len(text) <= QUESTION_CHARS else text[: QUESTION_CHARS - 1] + "…"


def _rate_limit(*, user_id: int, contact_id: int, source_system: str) -> None:
    hour = int(time.time() // 3600)
    per_hour = f"access-request:hour:{user_id}:{hour}"
    cache.add(per_hour, 0, timeout=3600)
    if cache.incr(per_hour) > REQUESTS_PER_HOUR:
        raise TooManyRequests(
            _("Запросов доступа не больше %(n)s в час; попробуйте позже.") % {"n": REQUESTS_PER_HOUR},
            code="too_many_requests",
        )
    # add() is atomic: of two requests at once, one gets through
    if not cache.add(f"access-request:sent:{user_id}:{contact_id}:{source_system}", 1, timeout=REPEAT_SECONDS):
        raise TooManyRequests(
            _("Запрос доступа к этому источнику уже отправлен; повторить можно через сутки."),
            code="access_request_repeated",
        )


@transaction.atomic
def access_request_send(*, user: User, message_id: int, source_system: str, contact_id: int) -> AccessRequestSent:
    """Send the reader's request for access to the contact the hint of their answer names.

    Only the reader's own answer, and only a (source, contact) pair its stored hint holds: anything
    else is «not found» (the route reveals nothing about other answers, sources or people).
    """
    message = message_get_for_user(user=user, message_id=message_id)
    contact = _named_contact(message, source_system, contact_id)
    author = User.objects.filter(pk=contact_id, is_active=True).first() if contact else None
    if author is None or author.pk == user.pk:
        raise NotFound(_("Некого просить о доступе к этому источнику."))
    _rate_limit(user_id=user.pk, contact_id=author.pk, source_system=source_system)
    label = source_labels([source_system]).get(source_system) or source_system
    reader = user.get_full_name() or user.username
    question = _question_of(message)
    body = f"Источник: {label}.\nВопрос: «{question}»" if question else f"Источник: {label}."
    notification_create(
        user_id=author.pk,
        kind=Notification.Kind.ACCESS_REQUEST,
        title=f"{reader} просит доступ к материалам источника «{label}»",
        body=body,
    )
    return AccessRequestSent(
        contact_name=contact.get("name") or author.get_full_name() or author.username, source_label=label
    )
