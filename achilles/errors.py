"""The platform's one error family (PLAT-8).

Every domain error raised by a service, selector, facade or provider subclasses
``ApplicationError``. One handler per surface (ninja, websocket, MCP) maps
``status`` to the transport and renders ``{"detail": ..., "code": ...}``.
"""

from __future__ import annotations

from typing import Any


class ApplicationError(Exception):
    """Base of every domain error; ``status`` is the HTTP status it maps to."""

    status: int = 400
    code: str = "error"

    def __init__(self, detail: Any = None, *, code: str | None = None, extra: dict | None = None):
        self.detail = detail if detail is not None else self.default_detail()
        if code is not None:
            self.code = code
        self.extra = extra or {}
        super().__init__(str(self.detail))

    def default_detail(self) -> str:
        return self.code.replace("_", " ")

    def as_dict(self) -> dict[str, Any]:
        return {"detail": self.detail, "code": self.code, **self.extra}


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


class ValidationFailed(ApplicationError):
    status = 422
    code = "validation_error"


class ServiceUnavailable(ApplicationError):
    """An upstream the platform depends on (model provider, search engine) failed."""

    status = 503
    code = "service_unavailable"
