"""Notices for people (the web app's bell, and e-mail when asked for): writes and reads.

Apps announce an ending (an agent run of the user's, a hub batch of theirs) with
``notify_on_commit``: the notice is written after the announcing transaction commits (a rolled-back
run or batch leaves no notice), then pushed to the user's open websockets (``notification`` frame)
and, when the user opted in and mail is configured, e-mailed by ``notification_email_task``.
"""

from __future__ import annotations

import logging
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.conf import settings
from django.core.mail import send_mail
from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone

from achilles.errors import NotFound
from achilles.models import Notification, User
from achilles.pagination import DEFAULT_LIMIT, Window, keyset_page

logger = logging.getLogger(__name__)

EMAIL_SUBJECT_PREFIX = "Achilles: "


def user_sockets_group(user_id: int) -> str:
    """The channel-layer group of one account's open websockets (test runs share Redis: the
    namespace keeps one worker's frames from reaching another's sockets)."""
    namespace = getattr(settings, "TEST_NAMESPACE", "") or "live"
    return f"chat-user.{namespace}.{user_id}"


def notification_out(notification: Notification) -> dict[str, Any]:
    """The notice as the API and the socket frame show it."""
    return {
        "id": notification.pk,
        "kind": notification.kind,
        "title": notification.title,
        "body": notification.body,
        "link": notification.link,
        "created_at": notification.created_at,
        "read_at": notification.read_at,
    }


# ---------------------------------------------------------------- writes


@transaction.atomic
def notification_create(*, user_id: int, kind: str, title: str, body: str = "", link: str = "") -> Notification:
    """Store a notice; after commit push it to the user's sockets and queue its e-mail if wanted."""
    notification = Notification.objects.create(user_id=user_id, kind=kind, title=title[:300], body=body, link=link)
    notification.refresh_from_db(fields=["created_at"])
    wants_mail = (
        settings.EMAIL_CONFIGURED
        and User.objects.filter(pk=user_id, is_active=True, notify_by_email=True).exclude(email="").exists()
    )
    transaction.on_commit(lambda: _push(notification))
    if wants_mail:
        from achilles.tasks import notification_email_task  # noqa: PLC0415  (tasks import this module)

        transaction.on_commit(lambda: notification_email_task.delay(notification.pk))
    return notification


def notify_on_commit(*, user_id: int | None, kind: str, title: str, body: str = "", link: str = "") -> None:
    """Write a notice once the caller's transaction commits; a failure is logged, never raised
    (a notice is a courtesy: it must not fail the run or the batch that ended)."""
    if user_id is None:
        return

    def write() -> None:
        try:
            notification_create(user_id=user_id, kind=kind, title=title, body=body, link=link)
        except Exception:
            logger.warning("could not write a notice for user %s", user_id, exc_info=True)

    transaction.on_commit(write)


def _push(notification: Notification) -> None:
    frame = {"type": "notification.new", "notification": notification_out(notification)}
    frame["notification"]["created_at"] = notification.created_at.isoformat()
    try:
        async_to_sync(get_channel_layer().group_send)(user_sockets_group(notification.user_id), frame)
    except Exception:  # Redis away: the bell still shows it at the next page load
        logger.warning("could not push notice %s", notification.pk, exc_info=True)


def notification_mark_read(*, user: User, notification_id: int) -> Notification:
    """Mark one of the user's notices read (idempotent); another person's notice is 404."""
    notification = notification_get_for_user(user=user, notification_id=notification_id)
    if notification.read_at is None:
        Notification.objects.filter(pk=notification.pk, read_at__isnull=True).update(read_at=timezone.now())
        notification.refresh_from_db(fields=["read_at"])
    return notification


def notifications_mark_all_read(*, user: User) -> int:
    """Mark every unread notice of the user read; returns how many were."""
    return Notification.objects.filter(user=user, read_at__isnull=True).update(read_at=timezone.now())


def notification_email_send(notification_id: int) -> bool:
    """The body of ``notification_email_task``: send the notice to the user's address once.
    Re-checks the opt-in and the address at sending time (they may have changed since)."""
    notification = Notification.objects.select_related("user").filter(pk=notification_id).first()
    if notification is None or notification.emailed_at is not None or not settings.EMAIL_CONFIGURED:
        return False
    user = notification.user
    if not (user.is_active and user.notify_by_email and user.email):
        return False
    text = notification.body
    if notification.link:
        text = f"{text}\n\n{settings.PUBLIC_BASE_URL}{notification.link}"
    send_mail(
        subject=EMAIL_SUBJECT_PREFIX + notification.title,
        message=text or notification.title,
        from_email=settings.DEFAULT_FROM_EMAIL,
        recipient_list=[user.email],
    )
    # A retry after a crash between the send and this update may send twice; never zero times.
    Notification.objects.filter(pk=notification.pk, emailed_at__isnull=True).update(emailed_at=timezone.now())
    return True


# ---------------------------------------------------------------- reads


def notifications_for_user(*, user: User) -> QuerySet[Notification]:
    return Notification.objects.filter(user=user)


def notification_get_for_user(*, user: User, notification_id: int) -> Notification:
    """The user's own notice, else NotFound (another person's notice does not exist for them)."""
    notification = Notification.objects.filter(pk=notification_id, user=user).first()
    if notification is None:
        raise NotFound("notification not found")
    return notification


def notification_page_for_user(
    *, user: User, cursor: str | None = None, limit: int = DEFAULT_LIMIT
) -> Window[Notification]:
    """The user's notices, newest first; keyset on id."""
    return keyset_page(
        notifications_for_user(user=user), scope="notifications", keys=("-id",), cursor=cursor, limit=limit
    )


def notification_unread_count(*, user: User) -> int:
    return Notification.objects.filter(user=user, read_at__isnull=True).count()
