"""Django's own middleware without thread hops on the async path (issue 15: CPU per chat turn).

``settings.MIDDLEWARE`` names Django's classes (its deploy checks look for those names, and the
test clients build their chains from them); the ASGI application that daphne serves
(``InlineHooksASGIHandler``, see ``achilles/asgi.py``) builds its chain with the subclasses below
in their place. Apart from ``achilles.middleware``: that module is imported by the logging
configuration, before the apps are loaded, and these import Django's auth, sessions and messages.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import logging
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from asgiref.sync import ThreadSensitiveContext, iscoroutinefunction, sync_to_async
from django.conf import settings
from django.contrib.auth import middleware as django_auth_middleware
from django.contrib.messages import get_messages
from django.contrib.messages import middleware as django_messages_middleware
from django.contrib.messages.storage.base import BaseStorage
from django.contrib.sessions import middleware as django_session_middleware
from django.core import signals
from django.core.exceptions import RequestAborted
from django.core.handlers.asgi import ASGIHandler, get_script_prefix
from django.middleware import clickjacking as django_clickjacking
from django.middleware import common as django_common
from django.middleware import csrf as django_csrf
from django.middleware import security as django_security
from django.urls import set_script_prefix

from achilles import compat


class InlineHooks:
    """Mixed in before one of Django's ``MiddlewareMixin`` middleware: its hooks are called in the
    chain's own mode.

    On the async path (daphne) Django runs a ``MiddlewareMixin``'s ``process_request``,
    ``process_view`` and ``process_response`` each through ``sync_to_async(thread_sensitive=True)``:
    for the seven below that is 13 thread hops per request, each a wake-up of a worker thread and
    of the event loop (bench/chat: "outside the view"). Their hooks only read the request and set
    headers, so they are called directly; where a hook would do I/O (``*_needs_thread``: a session
    to save, messages to store, a CSRF token kept in the session) it still goes to the thread, as
    before. The sync path is Django's own; the classes stay subclasses of Django's (the admin's
    checks look for them).
    """

    def __init__(self, get_response):
        super().__init__(get_response)
        if iscoroutinefunction(self) and hasattr(self, "process_view"):
            # Django takes process_view off the instance and adapts it to the chain's mode.
            sync_process_view = self.process_view

            async def process_view(request, view_func, view_args, view_kwargs):
                if self.request_needs_thread(request):
                    return await sync_to_async(sync_process_view, thread_sensitive=True)(
                        request, view_func, view_args, view_kwargs
                    )
                return sync_process_view(request, view_func, view_args, view_kwargs)

            self.process_view = process_view

    async def __acall__(self, request):
        response = None
        if hasattr(self, "process_request"):
            if self.request_needs_thread(request):
                response = await sync_to_async(self.process_request, thread_sensitive=True)(request)
            else:
                response = self.process_request(request)
        response = response or await self.get_response(request)
        if hasattr(self, "process_response"):
            if self.response_needs_thread(request, response):
                response = await sync_to_async(self.process_response, thread_sensitive=True)(request, response)
            else:
                response = self.process_response(request, response)
        return response

    def request_needs_thread(self, request) -> bool:
        return False

    def response_needs_thread(self, request, response) -> bool:
        return False


class SecurityMiddleware(InlineHooks, django_security.SecurityMiddleware):
    pass


class CommonMiddleware(InlineHooks, django_common.CommonMiddleware):
    pass


class XFrameOptionsMiddleware(InlineHooks, django_clickjacking.XFrameOptionsMiddleware):
    pass


class AuthenticationMiddleware(InlineHooks, django_auth_middleware.AuthenticationMiddleware):
    """Its hook only sets the lazy ``request.user``; the user is loaded where it is read."""


class SessionMiddleware(InlineHooks, django_session_middleware.SessionMiddleware):
    """The session store is lazy; its response hook writes only a session to save."""

    def response_needs_thread(self, request, response) -> bool:
        session = getattr(request, "session", None)
        return (
            session is not None and (session.modified or settings.SESSION_SAVE_EVERY_REQUEST) and not session.is_empty()
        )


class CsrfViewMiddleware(InlineHooks, django_csrf.CsrfViewMiddleware):
    """The token lives in a cookie; kept in the session (CSRF_USE_SESSIONS) its hooks read it."""

    def request_needs_thread(self, request) -> bool:
        return settings.CSRF_USE_SESSIONS

    def response_needs_thread(self, request, response) -> bool:
        return settings.CSRF_USE_SESSIONS


class MessageMiddleware(InlineHooks, django_messages_middleware.MessageMiddleware):
    """The storage is lazy; its response hook stores only messages that were added or read."""

    def response_needs_thread(self, request, response) -> bool:
        messages = get_messages(request)  # the request's storage, or [] when it has none
        return isinstance(messages, BaseStorage) and (messages.used or messages.added_new)


# Django's class (as settings.MIDDLEWARE names it) → the subclass the ASGI chain uses instead.
INLINE = {
    f"{cls.__bases__[1].__module__}.{cls.__bases__[1].__name__}": cls
    for cls in (
        SecurityMiddleware,
        CommonMiddleware,
        XFrameOptionsMiddleware,
        AuthenticationMiddleware,
        SessionMiddleware,
        CsrfViewMiddleware,
        MessageMiddleware,
    )
}


# Request threads kept idle for the next requests (more are made while more requests run at once).
IDLE_REQUEST_THREADS_MAX = 64

logger = logging.getLogger(__name__)


class RequestExecutor(ThreadPoolExecutor):
    """One request's thread at a time (one worker, reused by the next requests), which runs the
    request's ``request_started`` receivers in the same hop as its first sync work."""

    def __init__(self) -> None:
        super().__init__(max_workers=1, thread_name_prefix="django-request")
        self._first: Callable[[], Any] | None = None

    def run_first(self, call: Callable[[], Any]) -> None:
        """``call`` runs on this thread before anything submitted after it (one pending at a time)."""
        self._first = call

    def submit(self, fn, /, *args, **kwargs):
        first, self._first = self._first, None
        if first is not None:
            inner = fn

            def fn(*args, **kwargs):
                first()
                return inner(*args, **kwargs)

        return super().submit(fn, *args, **kwargs)

    def run_last(self, call: Callable[[], Any]) -> None:
        """``call`` after the request's work on its thread, not waited for; a failure is logged."""
        self.submit(contextvars.copy_context().run, call).add_done_callback(_log_failure)


def _log_failure(future: Future) -> None:
    if not future.cancelled() and future.exception() is not None:
        exc = future.exception()
        logger.error("the end of a request failed", exc_info=(type(exc), exc, exc.__traceback__))


class InlineHooksASGIHandler(ASGIHandler):
    """Django's ASGI handler, its middleware chain built with the ``INLINE`` subclasses, and its
    requests' threads reused.

    Django runs each request's sync parts on a thread of its own (a ``ThreadSensitiveContext`` per
    request): asgiref made a ``ThreadPoolExecutor`` and started its thread at the request's first
    hop, and joined it at the end — ≈ 0.2–0.4 ms of CPU per request here. The handler keeps those
    single-thread executors and hands each request an idle one, as a WSGI server reuses its
    threads: still one request at a time per thread, and Django's ``request_started`` /
    ``request_finished`` still bracket every request in it (``close_old_connections`` there: with
    ``CONN_MAX_AGE = 0`` the thread's connections go back to the pool at the end of each request).

    Django's own ``handle`` crosses to that thread three times for a sync view: for the
    ``request_started`` receivers, for the view, and for ``response.close()`` (``request_finished``).
    Here (``_handle``) the first two are one hop — the receivers run on the thread just before the
    request's first sync work — and the close is queued on the thread after the response is sent,
    not waited for: the thread runs one thing at a time in order, so the next request given it
    still finds the connection back in the pool (bench/http: CPU per request; docs/benchmarks/http.md).
    """

    def __init__(self):
        super().__init__()
        self._idle_executors: list[RequestExecutor] = []

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":  # as Django's own
            raise ValueError(f"Django can only handle ASGI/HTTP connections, not {scope['type']}.")
        if compat.called_from_async_to_sync():
            # Called from sync code (``async_to_sync``: the test clients): as in Django, that code's
            # own thread runs the request's sync parts (and sees its transaction).
            async with ThreadSensitiveContext():
                await self.handle(scope, receive, send)
            return
        idle = self._idle_executors
        executor = idle.pop() if idle else RequestExecutor()
        try:
            async with ThreadSensitiveContext(executor=executor):
                await self._handle(scope, receive, send, executor)
        finally:
            if len(idle) < IDLE_REQUEST_THREADS_MAX:
                idle.append(executor)
            else:
                executor.shutdown(wait=False)

    async def _handle(self, scope, receive, send, executor: RequestExecutor) -> None:
        """Django 5.2's ``ASGIHandler.handle`` (pinned), its two signal hops folded as the class says."""
        try:
            body_file = await self.read_body(receive)
        except RequestAborted:
            return
        set_script_prefix(get_script_prefix(scope))
        executor.run_first(functools.partial(signals.request_started.send, sender=self.__class__, scope=scope))
        request, error_response = self.create_request(scope, body_file)
        if request is None:
            body_file.close()
            await self.send_response(error_response, send)
            executor.run_last(error_response.close)
            return

        async def process_request(request, send):
            response = await self.run_get_response(request)
            with contextlib.suppress(asyncio.CancelledError):  # the client went away while it was sent
                await self.send_response(response, send)
            return response

        # As Django's: a disconnect while the response is made cancels the view.
        tasks = [
            asyncio.create_task(self.listen_for_disconnect(receive)),
            asyncio.create_task(process_request(request, send)),
        ]
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        for task in tasks:
            if task.done():
                try:
                    task.result()
                except RequestAborted:
                    pass
                except AssertionError:
                    body_file.close()
                    raise
            else:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        try:
            response = tasks[1].result()
        except asyncio.CancelledError:
            executor.run_last(functools.partial(signals.request_finished.send, sender=self.__class__))
        else:
            executor.run_last(response.close)
        body_file.close()

    def load_middleware(self, is_async=False):
        # The chain is built once, when the application is created.
        with compat.middleware_classes_replaced(INLINE):
            super().load_middleware(is_async)
