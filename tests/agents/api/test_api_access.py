"""Roles and authentication on every agents route (httpx + ASGI for the anonymous walk)."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from achilles.api import api as ninja_api
from agents.services import agent_create

pytestmark = [pytest.mark.api, pytest.mark.django_db]


def _agents_routes():
    schema = ninja_api.get_openapi_schema(path_prefix="/api")
    for path, methods in schema["paths"].items():
        if "/agents" in path:
            for method in methods:
                yield method.upper(), path.replace("{agent_id}", "1")


ROUTES = sorted(set(_agents_routes()))
ADMIN_ROUTES = [r for r in ROUTES if r[1].startswith("/api/admin/")]


@pytest.mark.p1
def test_the_route_walk_finds_every_agents_route():
    assert len(ROUTES) == 10 and len(ADMIN_ROUTES) == 3


def _asgi(method, path, headers=None):
    from achilles.asgi import application

    async def go():
        transport = httpx.ASGITransport(app=application)
        async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as client:
            return await client.request(method, path, json={}, headers=headers or {})

    return asyncio.run(go())


# Over real HTTP (CSRF enforced) too: an anonymous write is 401, never a CSRF 403.
ASGI_ROUTES = ROUTES


@pytest.mark.p0
@pytest.mark.parametrize(("method", "path"), ASGI_ROUTES)
def test_every_route_without_credentials_is_401_unauthorized(method, path):
    response = _asgi(method, path)
    assert response.status_code == 401
    assert response.json()["code"] == "not_authenticated"


@pytest.mark.p0
@pytest.mark.parametrize(("method", "path"), ROUTES)
def test_every_route_without_credentials_is_401_unauthorized_through_the_django_handler(method, path):
    from django.test import Client

    response = Client().generic(method, path, data="{}", content_type="application/json")
    assert response.status_code == 401
    assert response.json()["code"] == "not_authenticated"


@pytest.mark.p0
@pytest.mark.parametrize(("method", "path"), ADMIN_ROUTES)
def test_non_admin_on_admin_routes_is_403_forbidden(owner, client_for, token_for, chat_model, method, path):
    agent = agent_create(owner=owner, name="x")
    path = path.replace("/1/", f"/{agent.pk}/")
    for response in (client_for(owner).generic(method, path), owner and _bearer(method, path, token_for(owner))):
        assert response.status_code == 403
        assert response.json()["code"] == "admin_only"
    agent.refresh_from_db()
    assert agent.admin_paused is False


def _bearer(method, path, headers):
    from django.test import Client

    return Client().generic(method, path, **headers)


@pytest.mark.p1
def test_a_bad_revoked_or_deactivated_token_is_401(owner, token_for, chat_model):
    from django.test import Client

    from achilles.models import ApiToken

    assert Client().get("/api/agents", HTTP_AUTHORIZATION="Bearer ach_nonsense").status_code == 401
    headers = token_for(owner)
    assert Client().get("/api/agents", **headers).status_code == 200
    ApiToken.objects.filter(user=owner).update(revoked_at="2026-01-01T00:00Z")
    assert Client().get("/api/agents", **headers).status_code == 401
    headers = token_for(owner)
    owner.is_active = False
    owner.save()
    assert Client().get("/api/agents", **headers).status_code == 401


@pytest.mark.p1
def test_bearer_token_reaches_the_same_agents_as_the_session(owner, token_for, client_for, chat_model):
    from django.test import Client

    agent = agent_create(owner=owner, name="shared")
    by_token = Client().get("/api/agents", **token_for(owner)).json()
    by_session = client_for(owner).get("/api/agents").json()
    assert [a["id"] for a in by_token] == [a["id"] for a in by_session] == [agent.pk]
