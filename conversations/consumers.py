"""Websocket ``/ws/chat/`` (QE-15): the same turn events as JSON frames, session auth.

Client → ``{"content": "...", "conversation_id": "..."?}``; server → ``{"event": "token", "text"}``…
then ``{"event": "done", ...}`` or ``{"event": "error", "detail", "code"}``. One turn at a time
per socket. Disconnect → the running turn is cancelled and finalized ``interrupted``.

A socket without a session is accepted, sent ``{"event": "error", "code": "not_authenticated"}`` and
closed with 4401 (not refused at the handshake: a browser would see no code). The session is read
again for every turn, not once per socket: a sign-out elsewhere, a password
change or a deactivated account ends what an open socket may ask (error ``not_authenticated``,
then close 4401). A deactivation also closes the account's open sockets at once (the same frame and
code): each socket joins its account's channel-layer group, ``conversations.subscriptions``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from importlib import import_module
from types import SimpleNamespace

from channels.generic.websocket import AsyncWebsocketConsumer
from django.conf import settings
from django.contrib import auth
from django.utils import translation
from pydantic import ValidationError

from achilles import errors
from achilles.middleware import user_language
from conversations.dbconn import db_step
from conversations.pipeline import prepare_turn
from conversations.schemas import ChatIn
from conversations.subscriptions import user_sockets_group

logger = logging.getLogger(__name__)

CLOSE_NOT_AUTHENTICATED = 4401
SESSION_ENDED = "Your session has ended; sign in again."
NOT_SIGNED_IN = "Sign in to use the chat."


def handshake_request(scope) -> SimpleNamespace:
    """What of the socket's handshake the language choice reads: its cookies and ``Accept-Language``."""
    headers = dict(scope.get("headers") or [])
    accept = headers.get(b"accept-language", b"").decode("latin-1")
    return SimpleNamespace(COOKIES=scope.get("cookies") or {}, META={"HTTP_ACCEPT_LANGUAGE": accept})


def session_user(session_key: str | None):
    """The user the session stands for now (Django's own checks: the session exists, its auth hash
    still matches the password, the account is active), else AnonymousUser."""
    store = import_module(settings.SESSION_ENGINE).SessionStore(session_key)
    return auth.get_user(SimpleNamespace(session=store))


class ChatConsumer(AsyncWebsocketConsumer):
    turn_task: asyncio.Task | None = None
    user_group: str | None = None

    async def connect(self):
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.accept()
            # Accepted, then told and closed: a close before the accept is an HTTP 403 of the
            # handshake, which a browser reports as 1006 and nothing more, so the page could not
            # tell a lost session (sign in) from a lost network (reconnect). A foreign origin is
            # still refused at the handshake (achilles/ws_origin.py): it is owed no explanation.
            await self._send_error(errors.NotAuthenticated(NOT_SIGNED_IN))
            await self.close(code=CLOSE_NOT_AUTHENTICATED)
            return
        self.user_group = user_sockets_group(user.pk)
        try:
            await self.channel_layer.group_add(self.user_group, self.channel_name)
        except Exception:  # Redis away: the per-turn session check still holds
            logger.warning("websocket: could not join %s", self.user_group, exc_info=True)
            self.user_group = None
        # Accepted once in the group: a page whose socket is open misses no notice sent after.
        await self.accept()

    async def session_end(self, event):
        """The account was deactivated: the running turn stops, the client is told, the socket closes."""
        task = self.turn_task
        if task is not None and not task.done():
            task.cancel()
        await self._send_error(errors.NotAuthenticated(SESSION_ENDED))
        await self.close(code=CLOSE_NOT_AUTHENTICATED)

    async def notification_new(self, event):
        """A notice for this account (``achilles.notifications``): the page's bell shows it at once."""
        await self._send({"event": "notification", "notification": event["notification"]})

    async def receive(self, text_data=None, bytes_data=None):
        try:
            body = ChatIn.model_validate_json(text_data or bytes_data or b"{}")
        except ValidationError as exc:
            await self._send_error(errors.ValidationFailed(errors.field_errors(exc.errors())))
            return
        if self.turn_task is not None and not self.turn_task.done():
            await self._send_error(errors.Conflict("a turn is already running on this socket"))
            return
        self.turn_task = asyncio.create_task(self._turn(body))

    async def _turn(self, body: ChatIn):
        try:
            await self._run_turn(body)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the database or Redis away: the client gets a frame, not silence
            frame = errors.render(exc, context="websocket chat turn").body
            with contextlib.suppress(Exception):  # the socket itself may be what failed
                await self._send({"event": "error", **frame})

    async def _run_turn(self, body: ChatIn):
        session = self.scope.get("session")
        user = await db_step(session_user)(getattr(session, "session_key", None))
        if not user.is_authenticated or user.pk != self.scope["user"].pk:
            await self._send_error(errors.NotAuthenticated(SESSION_ENDED))
            await self.close(code=CLOSE_NOT_AUTHENTICATED)
            return
        # The turn's texts in the reader's language, as REST and SSE give them (read per turn: a
        # language chosen on the settings page applies to an open socket's next turn).
        with translation.override(user_language(handshake_request(self.scope), user)):
            await self._stream_turn(user, body)

    async def _stream_turn(self, user, body: ChatIn):
        try:
            turn = await prepare_turn(
                admit=lambda: user,  # the session was checked just above
                content=body.content,
                conversation_id=body.conversation_id,
                regenerate_of=body.regenerate_of,
                edit_of=body.edit_of,
            )
        except errors.ApplicationError as exc:
            await self._send_error(exc)
            return
        # aclosing: a send that fails (the socket went away) closes the turn at once, so its answer
        # is stored ``interrupted`` now rather than whenever the generator is collected.
        async with contextlib.aclosing(turn.events()) as events:
            async for event in events:
                await self._send({"event": event.name, **event.payload()})

    async def _send_error(self, exc: BaseException):
        await self._send({"event": "error", **errors.render(exc, context="websocket chat").body})

    async def _send(self, frame: dict):
        await self.send(text_data=json.dumps(frame, ensure_ascii=False))

    async def disconnect(self, code):
        task = self.turn_task
        if task is not None and not task.done():
            task.cancel()
            # Wait for the turn's shielded finalize (message → interrupted) before the consumer goes.
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        if self.user_group is not None:
            with contextlib.suppress(Exception):
                await self.channel_layer.group_discard(self.user_group, self.channel_name)
