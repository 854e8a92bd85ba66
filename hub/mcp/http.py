"""Streamable HTTP at ``/mcp/`` (HUB-16): stateless, JSON responses, Bearer personal token.

Mounted in front of Django in ``achilles/asgi.py``. Our wrapper, not the SDK, checks the token, so a
missing or bad one is the API's own 401 ``{"detail": …, "code": "not_authenticated"}``.

``GET /mcp/`` is the server's own stream to the client (SSE; stateless, nothing is ever sent on it
but keep-alive pings). It is bounded here: its headers leave at once (a first SSE comment: daphne sends
headers only with the first body bytes, which were the SDK's first ping, 15 s later); the token is
checked again every ``GET_STREAM_RECHECK_SECONDS`` (revoked or expired: the stream ends); it lives at
most ``GET_STREAM_MAX_SECONDS`` (the client reconnects); and a token holds at most
``GET_STREAMS_PER_TOKEN`` of them per web process — the next one is refused with 429
``too_many_streams`` (refusing the newcomer rather than closing the oldest: a leaking client cannot
push out the streams of a well-behaved one under the same token).

Stateless because several web processes serve ``/mcp/`` and any of them may get the next request.
The SDK's session manager has to be *entered* (its task group runs each request's server); daphne
runs no ASGI lifespan, so it is entered lazily by the first request, in a task of its own that lives
as long as the event loop (one per loop: tests run several loops in one process).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import hashlib
import json
import logging
from dataclasses import dataclass, field

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import close_old_connections
from django.http.request import split_domain_port, validate_host
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings

from achilles.errors import ApplicationError, NotAuthenticated, TooManyRequests, render
from achilles.services import api_token_authenticate
from hub.mcp.server import NOT_AUTHENTICATED, Caller, build_server, current_caller

logger = logging.getLogger(__name__)

MCP_PATHS = ("/mcp", "/mcp/")

# GET /mcp/: open streams per token (per web process), their longest life, how often the token is re-read.
GET_STREAMS_PER_TOKEN = 2
GET_STREAM_MAX_SECONDS = 600.0
GET_STREAM_RECHECK_SECONDS = 30.0


def transport_security() -> TransportSecuritySettings:
    """DNS-rebinding protection with Django's ``ALLOWED_HOSTS`` (any port) as the allowed hosts and
    their http(s) origins (plus ``CSRF_TRUSTED_ORIGINS``); ``*`` or a ``.domain`` wildcard, which the
    SDK cannot express, leaves the host check to Django's own rule in :func:`host_allowed`."""
    hosts = list(settings.ALLOWED_HOSTS)
    if any(h == "*" or h.startswith(".") for h in hosts):
        return TransportSecuritySettings(enable_dns_rebinding_protection=False)
    allowed_hosts, origins = [], list(getattr(settings, "CSRF_TRUSTED_ORIGINS", []))
    for host in hosts:
        allowed_hosts += [host, f"{host}:*"]
        for scheme in ("http", "https"):
            origins += [f"{scheme}://{host}", f"{scheme}://{host}:*"]
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True, allowed_hosts=allowed_hosts, allowed_origins=origins
    )


def host_allowed(host: str) -> bool:
    domain, _port = split_domain_port(host)
    return bool(domain) and validate_host(domain, settings.ALLOWED_HOSTS)


def _header(scope, name: bytes) -> str:
    for key, value in scope.get("headers", ()):
        if key.lower() == name:
            return value.decode("latin-1")
    return ""


async def json_error(send, error: BaseException, headers: tuple = ()) -> None:
    """The API's error body, from the platform's one renderer (``achilles.errors.render``): a domain
    error, PostgreSQL or Redis away (503), or a crash (the logged 500) — JSON, never an HTML page."""
    rendered = render(error, context="/mcp/")
    body = json.dumps(rendered.body, ensure_ascii=False).encode()
    await send(
        {
            "type": "http.response.start",
            "status": rendered.status,
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()), *headers],
        }
    )
    await send({"type": "http.response.body", "body": body})


def _authenticate(raw: str) -> bool:
    try:
        return api_token_authenticate(raw) is not None
    finally:
        close_old_connections()


@dataclass
class _LoopRunner:
    manager: StreamableHTTPSessionManager
    ready: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task | None = None
    failed: bool = False


class McpHttpApp:
    """The ASGI app behind ``/mcp/``."""

    def __init__(self) -> None:
        self._runners: dict[asyncio.AbstractEventLoop, _LoopRunner] = {}
        self._get_streams: dict[str, int] = {}  # sha256 of a token → its open GET streams

    async def __call__(self, scope, receive, send) -> None:
        if not host_allowed(_header(scope, b"host")):
            await json_error(send, ApplicationError("Invalid Host header.", code="bad_request", status=400))
            return
        header = _header(scope, b"authorization")
        raw = header[7:].strip() if header[:7].lower() == "bearer " else ""
        try:
            authenticated = bool(raw) and await sync_to_async(_authenticate, thread_sensitive=False)(raw)
        except Exception as exc:  # PostgreSQL away: the JSON 503 (anything else the logged JSON 500)
            await json_error(send, exc)
            return
        if not authenticated:
            await json_error(
                send, NotAuthenticated(NOT_AUTHENTICATED), headers=((b"www-authenticate", b'Bearer realm="achilles"'),)
            )
            return
        started = False

        async def tracked(message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        reset = current_caller.set(Caller(token=raw))
        try:
            manager = await self._manager()
            # The request's server task is started from here and copies this context: the tools
            # see the caller.
            if scope.get("method") == "GET":
                await self._get_stream(manager, raw, scope, receive, tracked)
            else:
                await manager.handle_request(scope, receive, tracked)
        except Exception as exc:
            if started:
                raise
            await json_error(send, exc)  # before any answer: the JSON error (a crash: the logged 500), not a page
        finally:
            current_caller.reset(reset)

    async def _get_stream(self, manager, raw: str, scope, receive, send) -> None:
        """The SDK's GET stream, bounded (see the module's docstring)."""
        key = hashlib.sha256(raw.encode()).hexdigest()
        if self._get_streams.get(key, 0) >= GET_STREAMS_PER_TOKEN:
            message = f"At most {GET_STREAMS_PER_TOKEN} open GET streams per token; close one first."
            await json_error(send, TooManyRequests(message, code="too_many_streams"))
            return
        self._get_streams[key] = self._get_streams.get(key, 0) + 1
        state = {"started": False, "ended": False}

        async def relay(message) -> None:
            if state["ended"]:
                return
            await send(message)
            if message["type"] == "http.response.start":
                state["started"] = True
                if message.get("status") == 200:  # the stream: its headers leave with a first comment
                    await send({"type": "http.response.body", "body": b": stream open\n\n", "more_body": True})
            elif message["type"] == "http.response.body" and not message.get("more_body", False):
                state["ended"] = True

        loop = asyncio.get_running_loop()
        ends_at = loop.time() + GET_STREAM_MAX_SECONDS
        stream = asyncio.ensure_future(manager.handle_request(scope, receive, relay))
        try:
            reason = await self._watch(stream, raw, ends_at)
            if reason is None:
                return
            stream.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await stream
            if state["started"] and not state["ended"]:
                state["ended"] = True
                await send({"type": "http.response.body", "body": f": {reason}\n\n".encode(), "more_body": False})
        finally:
            if not stream.done():
                stream.cancel()
            left = self._get_streams.get(key, 1) - 1
            if left > 0:
                self._get_streams[key] = left
            else:
                self._get_streams.pop(key, None)

    @staticmethod
    async def _watch(stream: asyncio.Future, raw: str, ends_at: float) -> str | None:
        """Until the stream ends by itself (None), or the reason to end it: its token no longer
        authenticates (revoked, expired, its user deactivated — or the database cannot say) or its
        lifetime is over."""
        loop = asyncio.get_running_loop()
        while True:
            left = ends_at - loop.time()
            if left <= 0:
                return "stream lifetime over; reconnect"
            await asyncio.wait({stream}, timeout=min(GET_STREAM_RECHECK_SECONDS, left))
            if stream.done():
                stream.result()  # its own error, if any, is raised here
                return None
            if loop.time() >= ends_at:
                return "stream lifetime over; reconnect"
            try:
                valid = await sync_to_async(_authenticate, thread_sensitive=False)(raw)
            except Exception:
                logger.warning("MCP GET stream: the token could not be checked again; ending it", exc_info=True)
                return "token could not be checked; reconnect"
            if not valid:
                return "token no longer valid"

    async def _manager(self) -> StreamableHTTPSessionManager:
        loop = asyncio.get_running_loop()
        runner = self._runners.get(loop)
        if runner is None:
            server = build_server()
            server.streamable_http_app(stateless_http=True, json_response=True, transport_security=transport_security())
            runner = _LoopRunner(manager=server.session_manager)
            self._runners[loop] = runner
            # A clean context: the long-lived task must not carry this request's caller.
            runner.task = loop.create_task(
                self._run(runner), name="hub-mcp-session-manager", context=contextvars.Context()
            )
        await runner.ready.wait()
        if runner.failed:
            self._runners.pop(loop, None)  # the next request tries a fresh one
            raise RuntimeError("the MCP session manager could not start")
        return runner.manager

    @staticmethod
    async def _run(runner: _LoopRunner) -> None:
        try:
            async with runner.manager.run():
                runner.ready.set()
                await asyncio.Event().wait()  # until the loop ends (or aclose cancels it)
        except asyncio.CancelledError:
            pass
        except Exception:
            logger.exception("MCP session manager stopped")
            runner.failed = True
            runner.ready.set()

    async def aclose(self) -> None:
        """Stop this loop's session manager (tests end their event loops with it)."""
        runner = self._runners.pop(asyncio.get_running_loop(), None)
        if runner is not None and runner.task is not None:
            runner.task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await runner.task


mcp_http_app = McpHttpApp()


class McpRouter:
    """``/mcp`` and ``/mcp/`` to the MCP app, every other HTTP request to Django."""

    def __init__(self, default, mcp=mcp_http_app) -> None:
        self.default = default
        self.mcp = mcp

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http" and scope.get("path") in MCP_PATHS:
            return await self.mcp(scope, receive, send)
        return await self.default(scope, receive, send)
