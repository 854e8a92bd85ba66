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


class RequestIdMiddleware:
    """Takes ``X-Request-ID`` from the caller (or makes one) and echoes it back."""

    sync_capable = True
    async_capable = True

    def __init__(self, get_response):
        self.get_response = get_response
        if iscoroutinefunction(get_response):
            markcoroutinefunction(self)

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
