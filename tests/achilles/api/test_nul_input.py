"""NUL (0x00) characters in API input: PostgreSQL text cannot hold them, so they are refused with a
422 at the door (found by schemathesis: each such request used to end in a 500 somewhere deeper)."""

from __future__ import annotations

import json

import pytest

pytestmark = [pytest.mark.api, pytest.mark.django_db]


@pytest.mark.parametrize(
    "method, path, body",
    [
        ("post", "/api/tokens", {"name": "ноут\x00бук"}),
        ("post", "/api/agents", {"name": "агент\x00", "instructions": "x"}),
        ("post", "/api/chat", {"content": "при\x00вет"}),
        ("delete", "/api/knowledge/records?source_system=files&external_id=a%00b", None),
        ("get", "/api/conversations?cursor=%00", None),
    ],
)
def test_nul_in_a_body_or_a_query_is_422_in_the_api_error_shape(client_for, admin_user, method, path, body):
    client = client_for(admin_user)
    kwargs = {"data": json.dumps(body), "content_type": "application/json"} if body is not None else {}
    response = getattr(client, method)(path, **kwargs)
    assert response.status_code == 422
    assert response.json() == {"detail": "Text must not contain NUL (0x00) characters.", "code": "validation_error"}


def test_an_escaped_backslash_before_u0000_is_ordinary_text(client_for, user):
    # "\\u0000" in JSON is a backslash followed by the letters u0000, not a NUL
    response = client_for(user).post("/api/tokens", data='{"name": "path\\\\u0000"}', content_type="application/json")
    assert response.status_code in (200, 201)
    assert response.json()["name"] == "path\\u0000"
