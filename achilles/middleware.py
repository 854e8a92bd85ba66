"""Request ids for structured logs (PLAT-9)."""

from __future__ import annotations

import contextvars
import logging
import re
import uuid

from asgiref.sync import iscoroutinefunction, markcoroutinefunction

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


def carries_nul(request) -> bool:
    """True when the query string or a JSON body carries a NUL character, which PostgreSQL text
    cannot store (every such request used to end in a 500 somewhere deeper)."""
    if "\x00" in request.META.get("QUERY_STRING", "") or any(
            "\x00" in value for values in request.GET.lists() for value in values[1]):
        return True
    if request.content_type == "application/json":
        body = request.body
        return b"\x00" in body or _JSON_NUL.search(body) is not None
    return False


class RejectNulMiddleware(HybridMiddleware):
    """``/api/``: a request carrying NUL characters is a 422 in the API's error shape, before any view.

    The check reads only the already buffered request, so it runs on the async path as it is."""

    @staticmethod
    def _refusal(request):
        if request.path.startswith("/api/") and carries_nul(request):
            from django.http import JsonResponse

            return JsonResponse({"detail": NUL_DETAIL, "code": "validation_error"}, status=422)
        return None

    def __call__(self, request):
        if iscoroutinefunction(self):
            return self.__acall__(request)
        return self._refusal(request) or self.get_response(request)

    async def __acall__(self, request):
        return self._refusal(request) or await self.get_response(request)


class StaticFilesMiddleware(HybridMiddleware):
    """WhiteNoise in the ASGI chain: serves ``STATIC_ROOT`` (hashed, pre-compressed files written by
    ``collectstatic``) before any other work; every other request goes on in the chain's own mode.

    WhiteNoise's own middleware is sync-only, which would put every request of this ASGI app — the
    SSE chat stream included — through a thread hop; this wrapper keeps the async path.
    """

    def __init__(self, get_response):
        from whitenoise.middleware import WhiteNoiseMiddleware

        super().__init__(get_response)
        self.whitenoise = WhiteNoiseMiddleware(get_response)

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
