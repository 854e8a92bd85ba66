"""``/scim/v2/…``: one Django view in front of scim2-server's handler.

The view turns the request into a ``ScimRequest``, lets the application authenticate it (a
``ScimToken``) and serve it, and writes the ``ScimResponse`` back as ``application/scim+json``.
Every failure leaves as a SCIM error (``urn:ietf:params:scim:api:messages:2.0:Error``, with
``status`` and ``scimType``): an unknown path, a wrong method, a body too large or carrying NUL, a
database away (503) — never Django's HTML page nor the ``/api/`` shape.
"""

from __future__ import annotations

import functools
import json
import logging
from http import HTTPStatus
from typing import Any

from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse
from django.views.decorators.csrf import csrf_exempt
from scim2_models import (
    AuthenticationScheme,
    Bulk,
    ChangePassword,
    EnterpriseUser,
    ETag,
    External,
    Filter,
    Group,
    InvalidValueException,
    Pagination,
    Patch,
    PayloadTooLargeException,
    Reference,
    ResourceType,
    SCIMException,
    ScimPolicy,
    ScimProvider,
    ServiceProviderConfig,
    Sort,
    UnauthorizedException,
    User,
)
from scim2_server.applications.base import BaseApplication
from scim2_server.handler import ScimHandler
from scim2_server.requests import ScimRequest
from scim2_server.responses import ScimResponse
from scim2_server.service import ScimService

from achilles.errors import as_application_error
from achilles.middleware import carries_nul
from achilles.scim.services import scim_token_authenticate
from achilles.scim.storage import DatabaseStorage

logger = logging.getLogger(__name__)

BASE_PATH = "/scim/v2"
MAX_RESULTS = 200

BEARER = AuthenticationScheme(
    type=AuthenticationScheme.Type.oauthbearertoken,
    name="OAuth Bearer Token",
    description="A SCIM token of the identity provider (manage.py scim_token create NAME)",
    spec_uri=Reference[External]("https://www.rfc-editor.org/rfc/rfc6750"),
    primary=True,
)

# What identity providers send that the RFCs do not: attributes no schema here declares (Entra's
# custom extension attributes) are ignored; a PATCH remove carrying a value removes that value
# (Entra's members remove); a filtered path that matches nothing creates the entry it describes
# (Entra's emails[type eq "work"].value). Entra's capitalised ops and "True"/"False" strings are
# read by scim2-models as they are.
POLICY = ScimPolicy(
    unknown=ScimPolicy.Unknown.ignore,
    remove_value_as_filter=ScimPolicy.RemoveValue.apply,
    unmatched_path_filter=ScimPolicy.UnmatchedPathFilter.create,
)


@functools.cache
def provider() -> ScimProvider:
    config = ServiceProviderConfig(
        documentation_uri=None,
        patch=Patch(supported=True),
        bulk=Bulk(supported=False, max_operations=0, max_payload_size=0),
        filter=Filter(supported=True, max_results=MAX_RESULTS),
        change_password=ChangePassword(supported=False),
        sort=Sort(supported=False),
        etag=ETag(supported=False),
        pagination=Pagination(index=True, cursor=False, default_page_size=100, max_page_size=MAX_RESULTS),
        authentication_schemes=[BEARER],
    )
    return ScimProvider(
        models=[User, EnterpriseUser, Group],
        resource_types=[ResourceType.from_resource(User[EnterpriseUser]), ResourceType.from_resource(Group)],
        config=config,
        policy=POLICY,
    )


class Application(BaseApplication):
    """scim2-server's request cycle with the platform's SCIM token and storage."""

    def check_auth(self, request: ScimRequest) -> None:
        scheme, _, raw = (request.header("Authorization") or "").partition(" ")
        token = scim_token_authenticate(raw.strip()) if scheme.lower() == "bearer" else None
        if token is None:
            raise UnauthorizedException(detail="a valid SCIM bearer token is required")
        request.subject = token

    def serve(self, request: ScimRequest) -> ScimResponse:
        try:
            if self.needs_auth(request):
                self.check_auth(request)
            actor = f"scim:{request.subject.name}" if request.subject is not None else "scim"
            models = {rt.name: self.service.get_model(rt) for rt in self.provider.resource_types}
            handler = ScimHandler(self.service, DatabaseStorage(actor=actor, models=models))
            response = handler.handle(request)
        except Exception as exception:  # noqa: BLE001 (rendered as a SCIM error, a crash logged)
            response = self.handle_exception(request, exception)
        return self.finalize_response(request, response)

    def handle_exception(self, request: ScimRequest, exception: Exception) -> ScimResponse:
        if not isinstance(exception, SCIMException):
            error = as_application_error(exception)
            if error is not None and error.status == 503:  # PostgreSQL or Redis away: retry, nothing crashed
                logger.warning("scim: %s", error.code)
                body = {
                    "schemas": ["urn:ietf:params:scim:api:messages:2.0:Error"],
                    "status": "503",
                    "detail": str(error.message),
                }
                return ScimResponse(HTTPStatus.SERVICE_UNAVAILABLE, body, {"Retry-After": "5"})
        return super().handle_exception(request, exception)


@functools.cache
def application() -> Application:
    return Application(provider(), ScimService(provider()))


def _refusal(request: HttpRequest) -> SCIMException | None:
    try:
        request.body  # noqa: B018 (read once, within DATA_UPLOAD_MAX_MEMORY_SIZE)
    except RequestDataTooBig:
        return PayloadTooLargeException(detail="the request body is too large")
    if carries_nul(request):
        return InvalidValueException(detail="text must not contain NUL (0x00) characters")
    return None


def _http(response: ScimResponse) -> HttpResponse:
    body: Any = b"" if response.body is None else json.dumps(response.body)
    answer = HttpResponse(body, status=int(response.status))
    for name, value in response.headers.items():
        answer[name] = value
    if response.body is None:
        del answer["Content-Type"]
    return answer


@csrf_exempt
def scim_endpoint(request: HttpRequest, path: str | None = "") -> HttpResponse:
    """Every SCIM route (RFC 7644 §3.2); the routing is scim2-server's."""
    app = application()
    base_url = request.build_absolute_uri(BASE_PATH)
    scim_request = ScimRequest(
        method=request.method or "GET",
        base_url=base_url,
        path=app.split_path("/" + (path or "")),
        query=request.GET.dict(),
        headers=list(request.headers.items()),
    )
    refusal = _refusal(request)
    if refusal is not None:
        return _http(app.finalize_response(scim_request, app.service.error_response(refusal)))
    scim_request.body = request.body
    return _http(app.serve(scim_request))
