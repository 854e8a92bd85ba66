"""``POST /api/chat``: one chat turn streamed as Server-Sent Events (QE-15).

A plain async Django view (ninja routes are sync): it authenticates itself (session or Bearer),
validates the body, then streams ``token`` events, then one ``done`` (or ``error``) event. The
generation runs inside the request; no task queue. When the client goes away Django cancels
the stream and the turn finalizes its message ``interrupted``.
"""

from __future__ import annotations

import json
import logging

from asgiref.sync import async_to_sync
from django.http import JsonResponse, StreamingHttpResponse
from django.middleware.csrf import CsrfViewMiddleware
from django.views.decorators.csrf import csrf_exempt
from pydantic import ValidationError

from achilles import errors
from achilles.auth import authenticate_request
from conversations.pipeline import Event, prepare_turn
from conversations.schemas import ChatIn
from conversations.spans import turn_clock

logger = logging.getLogger(__name__)


class TurnStreamingResponse(StreamingHttpResponse):
    """The turn's event stream. A client that leaves after the turn started but before the first
    byte never starts the stream, so the turn's own clean-up never runs: ``close()`` (called by
    Django's handler in every case) closes such a turn ``interrupted``."""

    def __init__(self, turn, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._turn = turn

    def close(self):
        try:
            if not self._turn.started:  # the usual case (the stream ran) needs no trip to the loop
                async_to_sync(self._turn.close_unstarted)()
        finally:
            super().close()


def sse(event: Event) -> bytes:
    return f"event: {event.name}\ndata: {json.dumps(event.payload(), ensure_ascii=False)}\n\n".encode()


def _error(exc: BaseException, request=None) -> JsonResponse:
    """Before the stream starts an error is plain JSON, rendered like every REST error."""
    context = f"{request.method} {request.path}" if request is not None else ""
    rendered = errors.render(exc, context=context)
    return JsonResponse(rendered.body, status=rendered.status)


def _authenticate(request):
    """(user, via_session): the session wins; Bearer for scripts."""
    user = getattr(request, "user", None)
    if user is not None and user.is_authenticated:
        return user, True
    return authenticate_request(request), False


def _csrf_rejection(request):
    # A session-authenticated POST from a browser needs the CSRF token; Bearer calls do not.
    return CsrfViewMiddleware(lambda r: None).process_view(request, None, (), {})


@csrf_exempt
async def chat_sse(request):
    try:
        return await _chat_sse(request)
    except Exception as exc:  # the database or Redis away before the stream: JSON, never Django's HTML 500
        return _error(exc, request)


async def _chat_sse(request):
    clock = turn_clock()
    if request.method != "POST":
        return _error(errors.ApplicationError("Use POST.", code="method_not_allowed", status=405))
    try:
        body = ChatIn.model_validate_json(request.body or b"{}")
        invalid = None
    except ValidationError as exc:
        body, invalid = None, errors.ValidationFailed(errors.field_errors(exc.errors()))

    def admit():
        # Run in the turn's start step (one thread hop for the credentials and the start), in the
        # order of before: who asks (401), the session's CSRF token (403), then the body (422).
        user, via_session = _authenticate(request)
        if user is None:
            raise errors.NotAuthenticated("Authentication credentials were not provided or are invalid.")
        if via_session and _csrf_rejection(request) is not None:
            raise errors.PermissionDenied("CSRF check failed.")
        if invalid is not None:
            raise invalid
        return user

    try:
        clock.switch("turn_start")
        turn = await prepare_turn(
            admit=admit,
            content=body.content if body is not None else "",
            conversation_id=body.conversation_id if body is not None else None,
            clock=clock,
            regenerate_of=body.regenerate_of if body is not None else None,
            edit_of=body.edit_of if body is not None else None,
        )
    except Exception as exc:  # the turn could not start (nothing was stored): 4xx, or PostgreSQL away a 503, in JSON
        return _error(exc, request)

    async def stream():
        async for event in turn.events():
            yield sse(event)
        clock.finish()

    response = TurnStreamingResponse(turn, stream(), content_type="text/event-stream; charset=utf-8")
    response["Cache-Control"] = "no-cache"
    response["X-Accel-Buffering"] = "no"
    response["X-Conversation-Id"] = turn.conversation_id
    return response
