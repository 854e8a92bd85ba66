"""The error answers of every operation, written into /api/openapi.json.

Routes declare their success answers; the errors are the API's one contract (``achilles.errors``):
any route may answer 400 (a body that is not JSON), 401 (no or a bad session/token; routes with
``auth=None`` excepted), 403 (a missing role, a session without its CSRF token), 404 (unknown or
someone else's object), 409 (a state conflict), 413 (a body over the upload limit) and 415 (a body
that is not JSON, or a multipart one that cannot be read), where there is a body, 422 (input refused: the field's location in
``detail``), 503 (the database or a dependency away), each as ``{"detail", "code"}``. A client
generated from the schema then knows them, and the fuzzer (scripts/fuzz.py) holds every answer to
the schema (``status_code_conformance``, ``response_schema_conformance``).
"""

from __future__ import annotations

from typing import Any

from ninja import NinjaAPI

ERROR_SCHEMA: dict[str, Any] = {
    "type": "object",
    "title": "Error",
    "required": ["detail", "code"],
    "properties": {
        "detail": {
            "description": "A message, or for input errors a list of {loc, msg, type}",
            "anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "object"}}],
        },
        "code": {"type": "string", "description": "A stable machine-readable code, e.g. agent_not_found"},
    },
}
ERRORS = {
    "400": "Malformed request (a body that is not JSON)",
    "401": "Not authenticated",
    "403": "Forbidden (a role missing, a session without its CSRF token)",
    "404": "Not found (or not yours: existence is never revealed)",
    "409": "Conflict with the object's state",
    "413": "Request body over the upload limit",
    "415": "Unsupported body (not JSON; a multipart upload that cannot be read)",
    "422": "Input refused",
    "503": "A dependency is unavailable; retry",
}
METHODS = {"get", "put", "post", "delete", "patch", "head", "options"}


def document_errors(schema: dict[str, Any]) -> dict[str, Any]:
    """Add the error answers to every operation that does not declare them itself."""
    schema.setdefault("components", {}).setdefault("schemas", {}).setdefault("Error", ERROR_SCHEMA)
    content = {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}
    for item in schema.get("paths", {}).values():
        for method, operation in item.items():
            if method not in METHODS:
                continue
            # django-ninja keys the declared answers by int; JSON keys are strings, and a declared 404
            # beside the added "404" would be served twice
            responses = operation["responses"] = {str(k): v for k, v in operation.get("responses", {}).items()}
            for status, description in ERRORS.items():
                if status == "401" and not operation.get("security"):
                    continue  # auth=None: never asks who you are
                if status in ("413", "415") and "requestBody" not in operation:
                    continue
                responses.setdefault(status, {"description": description, "content": content})
    return schema


class DocumentedErrorsAPI(NinjaAPI):
    """NinjaAPI whose OpenAPI schema documents the error answers (``document_errors``)."""

    def get_openapi_schema(self, *, path_prefix: str | None = None, path_params: dict[str, Any] | None = None):
        return document_errors(super().get_openapi_schema(path_prefix=path_prefix, path_params=path_params))
