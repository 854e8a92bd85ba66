"""Request bodies and error pages under /api/ (issue 10, finding 10).

The probe found: the NUL filter applied only to ``application/json`` (``text/plain`` or no content
type → 500 on ``POST /api/agents`` and ``PUT /api/knowledge/records``); a 3 MB non-JSON body → 500;
errors under /api/ that were Django's HTML pages (400 over 2.5 MB, 404 for ``/api/agents/-1``, a
500 from ``/api/chat``). Every test here failed before the fix.
"""

from __future__ import annotations

import json

import pytest
from django.test import Client

from achilles.errors import INTERNAL_ERROR_DETAIL

pytestmark = [pytest.mark.api, pytest.mark.django_db]

NUL_DETAIL = "Text must not contain NUL (0x00) characters."
BIG = 3 * 1024 * 1024


def _json_error(response) -> dict:
    assert response["Content-Type"].startswith("application/json"), (response.status_code, response.content[:200])
    body = response.json()
    assert set(body) >= {"detail", "code"}
    return body


@pytest.mark.parametrize(
    "content_type", ["text/plain", "application/octet-stream", "application/x-www-form-urlencoded", ""]
)
@pytest.mark.parametrize("method, path", [("post", "/api/agents"), ("put", "/api/knowledge/records")])
def test_nul_is_refused_whatever_the_content_type(client_for, admin_user, method, path, content_type):
    body = json.dumps({"name": "агент", "instructions": "x"}).encode().replace(b"x", b"\x00")
    response = Client(raise_request_exception=False)
    response.force_login(admin_user)
    answer = response.generic(method.upper(), path, data=body, content_type=content_type)
    assert answer.status_code == 422
    assert _json_error(answer) == {"detail": NUL_DETAIL, "code": "validation_error"}


@pytest.mark.parametrize("content_type", ["text/plain", "application/xml", "multipart/form-data; boundary=x", ""])
def test_a_body_that_is_not_json_is_415(client_for, user, content_type):
    client = client_for(user)
    response = client.generic("POST", "/api/agents", data=b"name=agent", content_type=content_type)
    assert response.status_code == 415
    assert _json_error(response)["code"] == "unsupported_media_type"


def test_json_with_a_charset_and_json_suffix_types_are_accepted(client_for, user, model_factory):
    model_factory(name="m", is_default=True)
    client = client_for(user)
    for content_type in ("application/json; charset=utf-8", "application/merge-patch+json"):
        response = client.generic(
            "POST", "/api/agents", data=json.dumps({"name": f"a {content_type}"}), content_type=content_type
        )
        assert response.status_code == 201, response.content


def test_bodyless_posts_need_no_content_type(client_for, user):
    # POST /api/tokens/{id} style actions send no body at all: nothing to refuse
    response = client_for(user).generic("DELETE", "/api/tokens/999999", data=b"", content_type="")
    assert response.status_code == 404
    assert _json_error(response)["code"] == "not_found"


@pytest.mark.parametrize("content_type", ["application/json", "text/plain"])
def test_a_body_over_the_limit_is_413_in_the_json_shape(client_for, user, content_type):
    payload = json.dumps({"name": "x" * BIG}).encode() if content_type == "application/json" else b"x" * BIG
    client = Client(raise_request_exception=False)
    client.force_login(user)
    response = client.generic("POST", "/api/agents", data=payload, content_type=content_type)
    assert response.status_code == 413
    assert _json_error(response)["code"] == "payload_too_large"


def test_an_unmatched_api_path_is_a_json_404(client_for, user):
    client = Client(raise_request_exception=False)
    client.force_login(user)
    for path in ("/api/agents/-1", "/api/no-such-route", "/api/agents/-1/runs"):
        response = client.get(path)
        assert response.status_code == 404, path
        assert _json_error(response) == {"detail": "Not found.", "code": "not_found"}


def test_a_wrong_method_is_a_json_405(client_for, user):
    response = client_for(user).put("/api/me", data="{}", content_type="application/json")
    assert response.status_code == 405
    assert _json_error(response)["code"] == "method_not_allowed"


def test_a_crash_inside_api_chat_is_a_json_500(user, monkeypatch):
    import conversations.views as views

    async def crash(**kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr(views, "prepare_turn", crash)
    client = Client(raise_request_exception=False)
    client.force_login(user)
    response = client.post("/api/chat", data={"content": "привет"}, content_type="application/json")
    assert response.status_code == 500
    assert _json_error(response) == {"detail": INTERNAL_ERROR_DETAIL, "code": "internal_error"}


def test_pages_outside_the_api_keep_their_html_errors(user):
    client = Client(raise_request_exception=False)
    client.force_login(user)
    response = client.get("/no-such-page/")
    assert response.status_code == 404
    assert not response["Content-Type"].startswith("application/json")


@pytest.mark.parametrize("value", [0, 1, "yes", "false", "on"])
@pytest.mark.parametrize(
    "method, path, body",
    [
        ("post", "/api/agents", {"name": "Агент", "instructions": "x", "enabled": None}),
        (
            "put",
            "/api/knowledge/records",
            {
                "source_system": "files",
                "external_id": "a.md",
                "title": "A",
                "text": "Текст.",
                "acl": ["everyone"],
                "never_hint": None,
            },
        ),
        (
            "put",
            "/api/knowledge/records",
            {
                "source_system": "files",
                "external_id": "a.md",
                "title": "A",
                "text": "Текст.",
                "acl": ["everyone"],
                "user_writable": None,
            },
        ),
    ],
    ids=["agent-enabled", "record-never_hint", "record-user_writable"],
)
def test_a_boolean_in_a_body_is_true_or_false_only(admin_user, method, path, body, value):
    """Found by `make fuzz`: ``{"enabled": 0}`` created a disabled agent (201); a number or a word is
    not a boolean in a JSON body, and it is a 422 naming the field."""
    from agents.models import Agent
    from knowledge.models import Record

    field = next(k for k, v in body.items() if v is None)
    client = Client(raise_request_exception=False)
    client.force_login(admin_user)
    answer = getattr(client, method)(path, json.dumps({**body, field: value}), content_type="application/json")
    assert answer.status_code == 422, (answer.status_code, answer.content[:300])
    assert field in json.dumps(_json_error(answer)["detail"])
    assert not Agent.objects.exists() and not Record.objects.exists()
