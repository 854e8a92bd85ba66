"""The REST API (django-ninja) and its one error contract (PLAT-7/8).

Every router is mounted here. Every route requires a session or a Bearer token unless it
says ``auth=None`` explicitly. Every error leaves as ``{"detail": ..., "code": ...}``.
"""

from __future__ import annotations

import logging

from django.http import Http404
from ninja import NinjaAPI
from ninja.errors import AuthenticationError, AuthorizationError, HttpError
from ninja.errors import ValidationError as NinjaValidationError
from pydantic import ValidationError as PydanticValidationError

from achilles.auth import api_auth
from achilles.errors import ApplicationError

logger = logging.getLogger(__name__)

api = NinjaAPI(
    title="Achilles API",
    version="1.0",
    description="Ask, delegate and act over the company's knowledge. Authenticate with a session or `Authorization: Bearer <token>`.",
    auth=api_auth,
    docs_url="/docs",
    urls_namespace="api",
)


def error_response(request, status: int, detail, code: str, **extra):
    return api.create_response(request, {"detail": detail, "code": code, **extra}, status=status)


@api.exception_handler(ApplicationError)
def _application_error(request, exc: ApplicationError):
    return api.create_response(request, exc.as_dict(), status=exc.status)


@api.exception_handler(NinjaValidationError)
def _validation_error(request, exc: NinjaValidationError):
    return error_response(request, 422, exc.errors, "validation_error")


@api.exception_handler(PydanticValidationError)
def _pydantic_error(request, exc: PydanticValidationError):
    errors = [{"loc": list(e["loc"]), "msg": e["msg"], "type": e["type"]} for e in exc.errors()]
    return error_response(request, 422, errors, "validation_error")


@api.exception_handler(AuthenticationError)
def _unauthenticated(request, exc):
    return error_response(request, 401, "Authentication credentials were not provided or are invalid.", "not_authenticated")


@api.exception_handler(AuthorizationError)
def _forbidden(request, exc):
    return error_response(request, 403, "You do not have permission to perform this action.", "permission_denied")


@api.exception_handler(Http404)
def _not_found(request, exc):
    return error_response(request, 404, "Not found.", "not_found")


@api.exception_handler(HttpError)
def _http_error(request, exc: HttpError):
    codes = {400: "bad_request", 401: "not_authenticated", 403: "permission_denied", 404: "not_found",
             405: "method_not_allowed", 409: "conflict", 422: "validation_error"}
    return error_response(request, exc.status_code, str(exc), codes.get(exc.status_code, "error"))


@api.exception_handler(Exception)
def _unexpected(request, exc: Exception):
    logger.exception("unhandled error on %s %s", request.method, request.path)
    return error_response(request, 500, "Internal error; it has been logged.", "internal_error")


api.add_router("/", "achilles.api_core.router")
api.add_router("/", "agents.api.router")
api.add_router("/", "conversations.api.router")
api.add_router("/knowledge/", "knowledge.api.router")
api.add_router("/hub/sync-agent/", "hub.api.sync_agent_router")
api.add_router("/hub/", "hub.api.router")
