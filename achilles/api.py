"""The REST API (django-ninja) and its one error contract (PLAT-7/8).

Every router is mounted here. Every route requires a session or a Bearer token unless it
says ``auth=None`` explicitly. Every error leaves as ``{"detail": ..., "code": ...}``, rendered by
``achilles.errors.render`` (the renderer SSE and the websocket use too).
"""

from __future__ import annotations

from django.http import Http404
from django.http.multipartparser import MultiPartParserError
from ninja.errors import AuthenticationError, AuthorizationError, HttpError
from ninja.errors import ValidationError as NinjaValidationError
from pydantic import ValidationError as PydanticValidationError

from achilles import errors
from achilles.auth import api_auth
from achilles.openapi import DocumentedErrorsAPI

api = DocumentedErrorsAPI(
    title="Achilles API",
    version="1.0",
    description="Ask, delegate and act over the company's knowledge. Authenticate with a session or `Authorization: Bearer <token>`.",
    auth=api_auth,
    docs_url="/docs",
    urls_namespace="api",
)


def rest_locate(request):
    """Where a named field came from in this request: its path, its query string or its body."""
    path_kwargs = getattr(getattr(request, "resolver_match", None), "kwargs", {}) or {}

    def locate(field: str) -> list[str]:
        head = field.split(".")[0]
        if head in path_kwargs:
            return ["path", *field.split(".")]
        if head in request.GET:
            return ["query", *field.split(".")]
        return errors.body_location(field)

    return locate


def rest_error_response(request, exc: BaseException):
    rendered = errors.render(exc, locate=rest_locate(request), context=f"{request.method} {request.path}")
    return api.create_response(request, rendered.body, status=rendered.status)


@api.exception_handler(NinjaValidationError)
def _validation_error(request, exc: NinjaValidationError):
    # ninja's own locations already start with their source (["body", …], ["query", …]).
    return rest_error_response(request, errors.ValidationFailed(exc.errors))


@api.exception_handler(PydanticValidationError)
def _pydantic_error(request, exc: PydanticValidationError):
    return rest_error_response(request, errors.ValidationFailed(errors.field_errors(exc.errors())))


@api.exception_handler(AuthenticationError)
def _unauthenticated(request, exc):
    return rest_error_response(
        request, errors.NotAuthenticated("Authentication credentials were not provided or are invalid.")
    )


@api.exception_handler(AuthorizationError)
def _forbidden(request, exc):
    return rest_error_response(request, errors.PermissionDenied("You do not have permission to perform this action."))


@api.exception_handler(Http404)
def _not_found(request, exc):
    return rest_error_response(request, errors.NotFound("Not found."))


_HTTP_ERROR_CODES = {
    400: "bad_request",
    401: "not_authenticated",
    403: "permission_denied",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    413: "payload_too_large",
    415: "unsupported_media_type",
    422: "validation_error",
}


def http_error(status: int, message: str) -> errors.ApplicationError:
    """A bare HTTP status (from ninja or Django) as a domain error with the status's code."""
    return errors.ApplicationError(message, code=_HTTP_ERROR_CODES.get(status, "error"), status=status)


@api.exception_handler(MultiPartParserError)
def _bad_multipart(request, exc: MultiPartParserError):
    # Django reads a multipart body when a route asks for its files: a Content-Type without a
    # boundary, or a body that does not follow it, is the client's (found by `make fuzz`: a 500)
    return rest_error_response(request, errors.UnsupportedMediaType(f"The multipart body cannot be read: {exc}"))


@api.exception_handler(HttpError)
def _http_error(request, exc: HttpError):
    return rest_error_response(request, http_error(exc.status_code, str(exc)))


@api.exception_handler(Exception)
def _everything_else(request, exc: Exception):
    # Domain errors (ApplicationError subclasses) land here too: ninja looks handlers up by MRO.
    return rest_error_response(request, exc)


api.add_router("/", "achilles.api_core.router")
api.add_router("/", "agents.api.router")
api.add_router("/", "conversations.api.router")
api.add_router("/", "usage.api.router")
api.add_router("/knowledge/connectors", "knowledge.connectors.api.router")
api.add_router("/knowledge/", "knowledge.api.router")
api.add_router("/hub/sync-agent/", "hub.api.sync_agent_router")
api.add_router("/hub/", "hub.api.router")
