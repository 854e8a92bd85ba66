"""What the Query Engine does when the core announces a change (``achilles.hooks``; subscribed in
``ConversationsConfig.ready``)."""

from __future__ import annotations

import logging

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.db import transaction

from achilles import hooks
from achilles.notifications import user_sockets_group

logger = logging.getLogger(__name__)


def close_user_sockets(event: hooks.UserDeactivated) -> None:
    """A deactivated account's open websockets are closed at once (after commit), not at their next turn."""

    def send() -> None:
        try:
            async_to_sync(get_channel_layer().group_send)(
                user_sockets_group(event.user_id), {"type": "session.end", "reason": event.reason}
            )
        except Exception:  # Redis away: each socket still re-reads the session at its next turn
            logger.warning("could not close the websockets of user %s", event.user_id, exc_info=True)

    transaction.on_commit(send)


def subscribe() -> None:
    hooks.user_deactivated.subscribe(close_user_sockets)
