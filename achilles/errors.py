"""The platform's one error contract (PLAT-8): domain errors and the one renderer.

Every domain error raised by a service, selector, facade or provider subclasses
``ApplicationError``: a ``code`` (stable, machine-readable), a ``message`` (for people) and,
when one input field is at fault, that ``field``. Domain errors know nothing about transports:
no HTTP status in a service's call, no ``["body", …]`` location.

Each transport renders through this module and nowhere else:

- REST (ninja's handlers in ``achilles.api``, the JSON error middleware), SSE
  (``conversations.views``) and the websocket (``conversations.consumers``) call :func:`render`
  and get ``(status, {"detail", "code"})``;
- text-only transports (MCP tool results, the sync-agent protocol's log lines) call
  :func:`render_text`.

Anything that is not a domain error renders as the one 500 (``internal_error``, logged here), except
an unreachable Redis — the cache or the Celery broker — which is a 503 (``cache_unavailable`` /
``broker_unavailable``) and an unreachable PostgreSQL (no connection, a session cut, the pool's
timeout), a 503 ``database_unavailable``: the client may retry, nothing crashed.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import kombu.exceptions
import psycopg
import redis.exceptions

logger = logging.getLogger("achilles.errors")

INTERNAL_ERROR_DETAIL = "Internal error; it has been logged."


class ApplicationError(Exception):
    """Base of every domain error; ``status`` is the HTTP status a transport maps it to."""

    status: int = 400
    code: str = "error"

    def __init__(
        self,
        message: Any = None,
        *,
        code: str | None = None,
        field: str | None = None,
        extra: dict | None = None,
        status: int | None = None,
    ):
        if code is not None:
            self.code = code
        if status is not None:  # only for errors that mirror a bare transport status (see achilles.api)
            self.status = status
        self.message = message if message is not None else self.code.replace("_", " ")
        self.field = field
        self.extra = extra or {}
        super().__init__(str(self.message))

    @property
    def detail(self) -> Any:
        """The transport-neutral detail: the message, or one field error when a field is named
        (rendered with the location ``body`` when no transport says better)."""
        return render(self).body["detail"]

    def as_dict(self) -> dict[str, Any]:
        return render(self).body


class NotAuthenticated(ApplicationError):
    status = 401
    code = "not_authenticated"


class PermissionDenied(ApplicationError):
    status = 403
    code = "permission_denied"


class NotFound(ApplicationError):
    status = 404
    code = "not_found"


class Conflict(ApplicationError):
    status = 409
    code = "conflict"


class PayloadTooLarge(ApplicationError):
    status = 413
    code = "payload_too_large"


class UnsupportedMediaType(ApplicationError):
    status = 415
    code = "unsupported_media_type"


class ValidationFailed(ApplicationError):
    status = 422
    code = "validation_error"


class ServiceUnavailable(ApplicationError):
    """An upstream the platform depends on (model provider, search engine, Redis) failed."""

    status = 503
    code = "service_unavailable"


class DatabaseUnavailable(ServiceUnavailable):
    """PostgreSQL cannot be reached (down, restarting, or the pool's connections all gone)."""

    code = "database_unavailable"


class TooManyRequests(ApplicationError):
    status = 429
    code = "too_many_requests"


# ------------------------------------------------------------------ the renderer


@dataclass(frozen=True)
class Rendered:
    status: int
    body: dict[str, Any]


# Where a named field came from; a transport that knows better passes its own.
Locate = Callable[[str], Sequence[str]]


def body_location(field: str) -> list[str]:
    return ["body", *field.split(".")]


def field_errors(errors: Iterable[Mapping[str, Any]], *, source: str = "body") -> list[dict[str, Any]]:
    """pydantic's error list in the wire's one shape: ``{"loc": [source, …], "msg", "type"}``."""
    return [{"loc": [source, *map(str, e["loc"])], "msg": e["msg"], "type": e["type"]} for e in errors]


# SQLSTATEs of a server that is going away or not there yet: connection exceptions (class 08),
# admin_shutdown, crash_shutdown, cannot_connect_now. A client-side failure has no SQLSTATE at all.
_UNREACHABLE_SQLSTATES = ("08", "57P01", "57P02", "57P03")


def database_unreachable(exc: BaseException) -> bool:
    """True when ``exc`` (or what it was raised from: Django wraps psycopg's errors) says PostgreSQL
    cannot be reached — not a query's own failure (a constraint, a deadlock, a statement timeout)."""
    # Django's errors only if Django is loaded: the provider layer imports this module without it.
    django_db = sys.modules.get("django.db")
    interface_errors = (psycopg.InterfaceError, *((django_db.InterfaceError,) if django_db else ()))
    seen: BaseException | None = exc
    for _ in range(5):
        if seen is None:
            return False
        if isinstance(seen, interface_errors):
            return True  # "connection already closed": the session is gone
        if isinstance(seen, psycopg.OperationalError):
            sqlstate = seen.sqlstate
            return sqlstate is None or sqlstate.startswith(_UNREACHABLE_SQLSTATES)
        seen = seen.__cause__
    return False


def _infrastructure_error(exc: BaseException) -> ApplicationError | None:
    """Redis away (cache or broker) or PostgreSQL away is a 503 with a code the client can act on, not a crash."""
    django_db = sys.modules.get("django.db")
    database_errors = (psycopg.Error, *((django_db.DatabaseError,) if django_db else ()))
    if isinstance(exc, database_errors) and database_unreachable(exc):
        return DatabaseUnavailable("The database is unavailable; try again shortly.")
    if isinstance(exc, kombu.exceptions.OperationalError):
        return ServiceUnavailable("The task broker is unavailable; try again shortly.", code="broker_unavailable")
    if isinstance(exc, (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError)):
        return ServiceUnavailable("The cache is unavailable; try again shortly.", code="cache_unavailable")
    return None


def as_application_error(exc: BaseException) -> ApplicationError | None:
    """The domain error ``exc`` is or stands for; None for a genuine crash."""
    if isinstance(exc, ApplicationError):
        return exc
    return _infrastructure_error(exc)


def render(exc: BaseException, *, locate: Locate = body_location, context: str = "") -> Rendered:
    """``exc`` → ``(status, {"detail", "code", …extra})``, the body every transport sends.

    A field error's detail is the list shape of request validation (``[{"loc", "msg", "type"}]``);
    ``locate`` turns the field into its location on this transport (REST: ``path``/``query``/
    ``body``). A crash is logged (with ``context``) and rendered as the one 500."""
    error = as_application_error(exc)
    if error is None:
        logger.error("unhandled error%s", f" on {context}" if context else "", exc_info=exc)
        return Rendered(500, {"detail": INTERNAL_ERROR_DETAIL, "code": "internal_error"})
    if error is not exc:
        logger.warning("%s%s: %s", error.code, f" on {context}" if context else "", exc)
    detail: Any = error.message
    if error.field is not None:
        detail = [{"loc": list(locate(error.field)), "msg": str(error.message), "type": "value_error"}]
    return Rendered(error.status, {"detail": detail, "code": error.code, **error.extra})


def render_text(exc: BaseException, *, context: str = "") -> str:
    """The same error for a text-only transport (MCP tool results, protocol logs): ``code: message``."""
    error = as_application_error(exc)
    if error is None:
        render(exc, context=context)  # logs it
        return f"internal_error: {INTERNAL_ERROR_DETAIL}"
    where = f" ({error.field})" if error.field else ""
    return f"{error.code}{where}: {error.message}"
