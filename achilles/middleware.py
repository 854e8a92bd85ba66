"""Request ids for structured logs (PLAT-9)."""

from __future__ import annotations

import contextvars
import logging
import os
import re
import uuid
import zoneinfo
from collections.abc import Callable

from asgiref.sync import iscoroutinefunction, markcoroutinefunction, sync_to_async
from csp.middleware import CSPMiddleware
from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import HttpResponse, JsonResponse
from django.template import loader
from django.utils import timezone, translation
from django.utils.cache import patch_vary_headers
from whitenoise.middleware import WhiteNoiseMiddleware

from achilles.errors import (
    INTERNAL_ERROR_DETAIL,
    ApplicationError,
    NotFound,
    PayloadTooLarge,
    UnsupportedMediaType,
    ValidationFailed,
    as_application_error,
    render,
)

request_id_var: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="-")
_VALID = re.compile(r"^[A-Za-z0-9._-]{1,64}$")


class RequestIdLogFilter(logging.Filter):
    """Adds ``request_id`` to every log record."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.request_id = request_id_var.get()
        return True


class HybridMiddleware:
    """A middleware that runs in the chain's own mode (no thread hop on the async path)."""

    sync_capable = True
    async_capable = True

    def __init__(self, get_response):
        self.get_response = get_response
        if iscoroutinefunction(get_response):
            markcoroutinefunction(self)


class RequestIdMiddleware(HybridMiddleware):
    """Takes ``X-Request-ID`` from the caller (or makes one) and echoes it back."""

    def _begin(self, request) -> tuple[str, contextvars.Token]:
        incoming = request.headers.get("X-Request-ID", "")
        rid = incoming if _VALID.match(incoming) else uuid.uuid4().hex
        request.request_id = rid
        return rid, request_id_var.set(rid)

    def __call__(self, request):
        if iscoroutinefunction(self):
            return self.__acall__(request)
        rid, token = self._begin(request)
        try:
            response = self.get_response(request)
        finally:
            request_id_var.reset(token)
        response["X-Request-ID"] = rid
        return response

    async def __acall__(self, request):
        rid, token = self._begin(request)
        try:
            response = await self.get_response(request)
        finally:
            request_id_var.reset(token)
        response["X-Request-ID"] = rid
        return response


# A JSON string escape for U+0000: ``\u0000`` preceded by an even number of backslashes.
_JSON_NUL = re.compile(rb"(?<!\\)(?:\\\\)*\\u0000")
NUL_DETAIL = "Text must not contain NUL (0x00) characters."
API_PREFIX = "/api/"


def _is_json(content_type: str) -> bool:
    return content_type == "application/json" or (
        content_type.startswith("application/") and content_type.endswith("+json")
    )


def _empty_form(request, body: bytes) -> bool:
    """A multipart body with no parts at all (what a form library sends for "no data")."""
    boundary = request.content_params.get("boundary", "") if request.content_type == "multipart/form-data" else ""
    return bool(boundary) and body.strip() == f"--{boundary}--".encode()


def carries_nul(request) -> bool:
    """True when the query string or the body carries a NUL character (raw or JSON-escaped),
    whatever the content type: PostgreSQL text cannot store it, and every such request used to
    end in a 500 somewhere deeper."""
    if "\x00" in request.META.get("QUERY_STRING", "") or any(
        "\x00" in value for values in request.GET.lists() for value in values[1]
    ):
        return True
    body = request.body
    # The substring test first: the regex (with its look-behind) costs ~50 ms on a 600 kB mirror page.
    return b"\x00" in body or (b"\\u0000" in body and _JSON_NUL.search(body) is not None)


# The routes that take files (multipart/form-data) instead of JSON: POST path → the largest body.
# Their bodies are binary (NUL is a byte like any other) and are not read here (Django spools the
# files to disk); the text fields are validated by the route.
MULTIPART_ROUTES: dict[str, Callable[[], int]] = {
    "/api/knowledge/documents": lambda: (
        settings.KNOWLEDGE_UPLOAD_MAX_MB * settings.KNOWLEDGE_UPLOAD_MAX_FILES * 2**20 + 2**20
    ),
}


# ``PUT /api/knowledge/documents/{id}`` replaces one document's file (multipart, one file).
_MULTIPART_PUT_PATH = re.compile(r"/api/knowledge/documents/[0-9]+")


def _replace_limit() -> int:
    return settings.KNOWLEDGE_UPLOAD_MAX_MB * 2**20 + 2**20


def _multipart_refusal(request, limit: int) -> ApplicationError | None:
    try:
        declared = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        declared = 0
    if declared > limit:
        return PayloadTooLarge(f"The upload is larger than {limit} bytes.")
    if "\x00" in request.META.get("QUERY_STRING", "") or any(
        "\x00" in value for values in request.GET.lists() for value in values[1]
    ):
        return ValidationFailed(NUL_DETAIL)
    return None


def api_body_refusal(request) -> ApplicationError | None:
    """The reason an /api/ request's body is refused before any view, or None.

    Over ``DATA_UPLOAD_MAX_MEMORY_SIZE`` → 413 (checked on the declared length before anything is
    read, and again on what was read); NUL anywhere → 422; a non-empty body that is not JSON → 415
    (every API route takes JSON but the MULTIPART_ROUTES; a body-less POST needs no content type)."""
    # by path, whatever the method: a multipart body sent with a method the route does not take is
    # not read as JSON here (its NUL bytes would be a 422), so routing answers 405
    multipart_limit: Callable[[], int] | None = MULTIPART_ROUTES.get(request.path)
    if multipart_limit is None and _MULTIPART_PUT_PATH.fullmatch(request.path):
        multipart_limit = _replace_limit
    if multipart_limit is not None and request.content_type == "multipart/form-data":
        return _multipart_refusal(request, multipart_limit())
    limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    too_large = PayloadTooLarge(f"The request body is larger than {limit} bytes.")
    try:
        declared = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        declared = 0
    if limit is not None and declared > limit:
        return too_large
    try:
        body = request.body
    except RequestDataTooBig:
        return too_large
    if carries_nul(request):
        return ValidationFailed(NUL_DETAIL)
    if body and not _is_json(request.content_type or "") and not _empty_form(request, body):
        return UnsupportedMediaType("The request body must be JSON (Content-Type: application/json).")
    return None


def _json_error(exc: ApplicationError):
    rendered = render(exc)
    return JsonResponse(rendered.body, status=rendered.status)


class ApiBodyMiddleware(HybridMiddleware):
    """``/api/``: a body that is too large, carries NUL or is not JSON is refused in the API's error
    shape, before any view. The check reads only the already buffered request, so it runs on the
    async path as it is."""

    @staticmethod
    def _refusal(request):
        if request.path.startswith(API_PREFIX):
            refusal = api_body_refusal(request)
            if refusal is not None:
                return _json_error(refusal)
        return None

    def __call__(self, request):
        if iscoroutinefunction(self):
            return self.__acall__(request)
        return self._refusal(request) or self.get_response(request)

    async def __acall__(self, request):
        return self._refusal(request) or await self.get_response(request)


# STATIC_ROOT's table (url → WhiteNoise's file with its headers and compressed variants), built once
# per process and per collected state instead of once per middleware chain: a process serves with
# one chain, but every Django test client builds its own, and the scan of the ~330 collected files
# was 64 ms of CPU each time (a fifth of the API tests' CPU).
_SCANNED: dict[tuple, dict] = {}


class _WhiteNoise(WhiteNoiseMiddleware):
    """WhiteNoise's middleware, its scan of a directory shared by the chains of one process (keyed by
    everything that shapes a file's answer: the directory, the URL prefix, the manifest's time and
    the headers' settings)."""

    def add_files(self, root, prefix=None):
        if self.autorefresh:  # DEBUG: looks on disk per request; nothing is scanned
            return super().add_files(root, prefix)
        manifest = os.path.join(root, "staticfiles.json")
        key = (
            str(root),
            prefix,
            os.stat(manifest).st_mtime_ns if os.path.exists(manifest) else None,
            self.max_age,
            self.allow_all_origins,
            self.charset,
            self.add_headers_function,
            # the middleware's own test (hashed names from the manifest) is a method: its function
            getattr(self.immutable_file_test, "__func__", self.immutable_file_test),
            self.index_file,
            repr(getattr(settings, "WHITENOISE_MIMETYPES", None)),
        )
        files = _SCANNED.get(key)
        if files is None:
            own, self.files = self.files, {}
            try:
                super().add_files(root, prefix)
                for stale in [other for other in _SCANNED if other[:2] == key[:2]]:
                    del _SCANNED[stale]  # an earlier collected state of the same directory
                files = _SCANNED[key] = self.files
            finally:
                self.files = {**own, **self.files}
        else:
            self.files.update(files)
        return None


class StaticFilesMiddleware(HybridMiddleware):
    """WhiteNoise in the ASGI chain: serves ``STATIC_ROOT`` (hashed, pre-compressed files written by
    ``collectstatic``) before any other work; every other request goes on in the chain's own mode.

    WhiteNoise's own middleware is sync-only, which would put every request of this ASGI app — the
    SSE chat stream included — through a thread hop; this wrapper keeps the async path.
    """

    def __init__(self, get_response):
        super().__init__(get_response)
        self.whitenoise = _WhiteNoise(get_response)

    def _static_file(self, request):
        if not request.path_info.startswith(self.whitenoise.static_prefix):
            return None
        if self.whitenoise.autorefresh:  # DEBUG: looks on disk each time (a few stat calls)
            return self.whitenoise.find_file(request.path_info)
        return self.whitenoise.files.get(request.path_info)

    def __call__(self, request):
        if iscoroutinefunction(self):
            return self.__acall__(request)
        static_file = self._static_file(request)
        return self.whitenoise.serve(static_file, request) if static_file else self.get_response(request)

    async def __acall__(self, request):
        static_file = self._static_file(request)
        if static_file is not None:
            return self.whitenoise.serve(static_file, request)
        return await self.get_response(request)


_STATUS_ERRORS = {
    400: "bad_request",
    403: "permission_denied",
    404: "not_found",
    405: "method_not_allowed",
    413: "payload_too_large",
    415: "unsupported_media_type",
}


def _as_json_error(request, response):
    """Every error under /api/ is JSON: Django's own pages (a URL no route matches, a method the
    route does not take, the 400 of an oversized upload, the 500 of a crash) are replaced by the
    API's error shape. Streams and JSON answers pass untouched."""
    if (
        response.status_code < 400
        or not request.path.startswith(API_PREFIX)
        or response.streaming
        or response.get("Content-Type", "").startswith("application/json")
    ):
        return response
    status = response.status_code
    if status >= 500:
        exc = ApplicationError(INTERNAL_ERROR_DETAIL, code="internal_error", status=status)
    elif status == 404:
        exc = NotFound("Not found.")
    else:
        exc = ApplicationError(
            response.reason_phrase or "error", code=_STATUS_ERRORS.get(status, "error"), status=status
        )
    replaced = _json_error(exc)
    if response.has_header("Allow"):
        replaced["Allow"] = response["Allow"]
    return replaced


class ApiJsonErrorsMiddleware(HybridMiddleware):
    """Outermost on the API: whatever answered, an /api/ error leaves as ``{"detail", "code"}``."""

    def __call__(self, request):
        if iscoroutinefunction(self):
            return self.__acall__(request)
        return _as_json_error(request, self.get_response(request))

    async def __acall__(self, request):
        return _as_json_error(request, await self.get_response(request))


class ContentSecurityPolicyMiddleware(HybridMiddleware):
    """django-csp's header (and ``request.csp_nonce``) in the chain's own mode.

    django-csp's middleware is a ``MiddlewareMixin``: on the async path (the SSE chat) Django would
    run its two hooks through ``sync_to_async(thread_sensitive=True)``, one shared thread for every
    request. Its hooks only build a header, so they are called here directly in either mode.
    """

    def __init__(self, get_response):
        super().__init__(get_response)
        self.csp = CSPMiddleware(get_response)

    def __call__(self, request):
        if iscoroutinefunction(self):
            return self.__acall__(request)
        self.csp.process_request(request)
        return self.csp.process_response(request, self.get_response(request))

    async def __acall__(self, request):
        self.csp.process_request(request)
        return self.csp.process_response(request, await self.get_response(request))


def unavailable_response(request, exc: BaseException):
    """An upstream away (PostgreSQL, Redis) as the platform's 503, or None for anything else: JSON
    ``{"detail", "code"}`` under /api/, an HTML page elsewhere (a person is reading it). One renderer
    for a view's exception (:class:`ServiceUnavailableMiddleware`) and for a middleware's
    (``achilles.views.server_error``, the ``handler500``)."""
    error = as_application_error(exc)
    if error is None or error.status != 503:
        return None
    rendered = render(exc, context=f"{request.method} {request.path}")
    if request.path.startswith(API_PREFIX):
        response = JsonResponse(rendered.body, status=rendered.status)
    else:
        page = loader.render_to_string("503.html", {"message": error.message, "code": error.code})
        response = HttpResponse(page, status=rendered.status, content_type="text/html; charset=utf-8")
    response["Retry-After"] = "5"
    return response


class ServiceUnavailableMiddleware(HybridMiddleware):
    """A view that raised because PostgreSQL or Redis is away answers the 503 of
    :func:`unavailable_response` (not Django's logged HTML 500)."""

    def __call__(self, request):
        if iscoroutinefunction(self):
            return self.__acall__(request)
        return self.get_response(request)

    async def __acall__(self, request):
        return await self.get_response(request)

    def process_exception(self, request, exception):
        return unavailable_response(request, exception)


class UserTimeZoneMiddleware(HybridMiddleware):
    """Pages and the admin in the reader's time zone: ``users.timezone``, else the organisation's.

    Django renders aware datetimes in the *current* time zone (``settings.TIME_ZONE``, UTC, when
    none is active), so without this the admin showed a 09:30 Moscow slot as 6:30. The pages'
    scripts read the same zone from ``<meta name="time-zone">`` (``base.html``). The API answers
    ISO 8601 with offsets and is left alone (its token auth happens in the view).
    """

    @staticmethod
    def _zone(user) -> zoneinfo.ZoneInfo | None:
        if user is None or not user.is_authenticated:
            return None
        try:
            return zoneinfo.ZoneInfo(user.effective_timezone())
        except (zoneinfo.ZoneInfoNotFoundError, ValueError):
            return None

    def __call__(self, request):
        if iscoroutinefunction(self):
            return self.__acall__(request)
        zone = None if request.path.startswith(API_PREFIX) else self._zone(getattr(request, "user", None))
        if zone is None:
            return self.get_response(request)
        timezone.activate(zone)
        try:
            return self.get_response(request)
        finally:
            timezone.deactivate()

    async def __acall__(self, request):
        if request.path.startswith(API_PREFIX) or not hasattr(request, "auser"):
            return await self.get_response(request)
        user = await request.auser()
        if not user.is_authenticated:  # nobody's zone to read: no thread hop
            return await self.get_response(request)
        # the organisation's zone may be a cache or database read: off the event loop
        zone = await sync_to_async(self._zone)(user)
        if zone is None:
            return await self.get_response(request)
        timezone.activate(zone)
        try:
            return await self.get_response(request)
        finally:
            timezone.deactivate()


def user_language(request, user) -> str:
    """The reader's language: the one chosen on the settings page (``users.language``), else the
    browser's (the language cookie, then ``Accept-Language``, as Django's ``LocaleMiddleware`` reads
    them), else ``LANGUAGE_CODE``. ``request`` needs only ``COOKIES`` and ``META`` (the chat's
    websocket passes its handshake's)."""
    chosen = getattr(user, "language", "") if user is not None and user.is_authenticated else ""
    return chosen or translation.get_language_from_request(request)


class UserLanguageMiddleware(HybridMiddleware):
    """Pages, the admin and the API's texts in the reader's language: the one chosen on the settings
    page (``users.language``), else the browser's (``Accept-Language``, as Django's
    ``LocaleMiddleware`` reads it), else ``LANGUAGE_CODE`` (Russian).

    Django's ``LocaleMiddleware`` runs before the user is known and would hop to a thread on the
    async path (the SSE chat); this one sits after the authentication middleware and runs in the
    chain's own mode. The MCP server is routed outside Django (``achilles.asgi``) and keeps the
    seeds' Russian texts.
    """

    @staticmethod
    def _language(request, user) -> str:
        return user_language(request, user)

    @staticmethod
    def _answer(request, response, language: str):
        patch_vary_headers(response, ("Accept-Language",))
        response.headers.setdefault("Content-Language", language)
        return response

    def __call__(self, request):
        if iscoroutinefunction(self):
            return self.__acall__(request)
        language = self._language(request, getattr(request, "user", None))
        translation.activate(language)
        request.LANGUAGE_CODE = translation.get_language()
        try:
            return self._answer(request, self.get_response(request), request.LANGUAGE_CODE)
        finally:
            translation.deactivate()

    async def __acall__(self, request):
        user = await request.auser() if hasattr(request, "auser") else None
        language = self._language(request, user)
        translation.activate(language)
        request.LANGUAGE_CODE = translation.get_language()
        try:
            return self._answer(request, await self.get_response(request), request.LANGUAGE_CODE)
        finally:
            translation.deactivate()
