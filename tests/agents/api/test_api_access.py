"""Roles and authentication on every agents route, through the ASGI application (httpx)."""

from __future__ import annotations

import pytest

from achilles.api import api as ninja_api
from agents.services import agent_create

pytestmark = [pytest.mark.api, pytest.mark.django_db]


def _agents_routes():
    schema = ninja_api.get_openapi_schema(path_prefix="/api")
    for path, methods in schema["paths"].items():
        if "/agents" in path:
            for method in methods:
                yield method.upper(), path.replace("{agent_id}", "1").replace("{subscription_id}", "1")


ROUTES = sorted(set(_agents_routes()))
ADMIN_ROUTES = [r for r in ROUTES if r[1].startswith("/api/admin/")]


@pytest.mark.p1
def test_the_route_walk_finds_every_agents_route():
    assert len(ROUTES) == 13 and len(ADMIN_ROUTES) == 3


# Over the ASGI application (CSRF enforced): an anonymous write is 401, never a CSRF 403.
@pytest.mark.p0
@pytest.mark.parametrize(("method", "path"), ROUTES)
def test_every_route_without_credentials_is_401_unauthorized(asgi_client, method, path):
    response = asgi_client().request(method, path, json={})
    assert response.status_code == 401
    assert response.json()["code"] == "not_authenticated"


@pytest.mark.p0
@pytest.mark.parametrize(("method", "path"), ROUTES)
def test_every_route_without_credentials_is_401_unauthorized_through_the_django_handler(method, path):
    """The same walk through Django's own request handler (the one management commands and the
    admin's test views use): the 401 is the API's, not the server's."""
    from django.test import Client

    response = Client().generic(method, path, data="{}", content_type="application/json")
    assert response.status_code == 401
    assert response.json()["code"] == "not_authenticated"


@pytest.mark.p0
@pytest.mark.parametrize(("method", "path"), ADMIN_ROUTES)
def test_non_admin_on_admin_routes_is_403_forbidden(owner, asgi_client, chat_model, method, path):
    agent = agent_create(owner=owner, name="x")
    path = path.replace("/1/", f"/{agent.pk}/")
    for client in (asgi_client(owner, session=True), asgi_client(owner)):
        response = client.request(method, path)
        assert response.status_code == 403
        assert response.json()["code"] == "admin_only"
    agent.refresh_from_db()
    assert agent.admin_paused is False


@pytest.mark.p1
def test_a_bad_revoked_or_deactivated_token_is_401(owner, asgi_client, chat_model):
    from achilles.models import ApiToken

    assert asgi_client(headers={"Authorization": "Bearer ach_nonsense"}).get("/api/agents").status_code == 401
    client = asgi_client(owner)
    assert client.get("/api/agents").status_code == 200
    ApiToken.objects.filter(user=owner).update(revoked_at="2026-01-01T00:00Z")
    assert client.get("/api/agents").status_code == 401
    client = asgi_client(owner)
    owner.is_active = False
    owner.save()
    assert client.get("/api/agents").status_code == 401


@pytest.mark.p1
def test_bearer_token_reaches_the_same_agents_as_the_session(owner, asgi_client, chat_model):
    agent = agent_create(owner=owner, name="shared")
    by_token = asgi_client(owner).get("/api/agents").json()["items"]
    by_session = asgi_client(owner, session=True).get("/api/agents").json()["items"]
    assert [a["id"] for a in by_token] == [a["id"] for a in by_session] == [agent.pk]
