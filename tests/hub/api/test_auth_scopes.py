"""Token scopes (HUB-11): a sync agent's token works only on the protocol routes, a person's never there."""

import pytest

from hub import protocol
from hub.models import Batch, SyncAgentContact

pytestmark = pytest.mark.django_db

J = "application/json"
PERSON_ROUTES = [
    ("get", "/api/hub/issues"),
    ("get", "/api/hub/batches"),
    ("get", "/api/hub/agent-status"),
    ("get", "/api/hub/sync-log"),
    ("get", "/api/hub/settings"),
    ("post", "/api/hub/refresh"),
]


@pytest.mark.parametrize("method, url", PERSON_ROUTES)
def test_a_sync_agent_token_is_refused_on_person_routes(client, sync_headers, method, url):
    response = getattr(client, method)(
        url, *([{"full": True}] if method == "post" else []), content_type=J, **sync_headers
    )
    assert response.status_code == 403 and response.json()["code"] == "permission_denied"
    assert Batch.objects.count() == 0


def test_a_sync_agent_token_is_nothing_elsewhere(client, sync_headers):
    assert client.get("/api/me", **sync_headers).status_code == 401


def test_a_person_is_refused_on_the_protocol_routes(client, hub_staff, token_for, client_for):
    headers = token_for(hub_staff)
    response = client.post("/api/hub/sync-agent/claim", {"version": 6}, content_type=J, **headers)
    assert response.status_code == 403 and response.json()["code"] == "permission_denied"
    session = client_for(hub_staff)
    assert session.post("/api/hub/sync-agent/claim", {"version": 6}, content_type=J).status_code == 403
    assert client.post("/api/hub/sync-agent/claim", {"version": 6}, content_type=J).status_code == 401
    bad = {"HTTP_AUTHORIZATION": "Bearer achsync_nope_nope"}
    assert client.post("/api/hub/sync-agent/claim", {"version": 6}, content_type=J, **bad).status_code == 401
    assert not SyncAgentContact.objects.exists()


def test_a_revoked_sync_agent_is_401(client, sync_agent, sync_headers):
    from django.utils import timezone

    type(sync_agent).objects.filter(pk=sync_agent.pk).update(revoked_at=timezone.now())
    assert client.post("/api/hub/sync-agent/claim", {"version": 6}, content_type=J, **sync_headers).status_code == 401


def test_the_hub_permission_gates_people(client, outsider, hub_user, token_for):
    assert client.get("/api/hub/issues").status_code == 401
    denied = client.get("/api/hub/issues", **token_for(outsider))
    assert denied.status_code == 403 and denied.json()["code"] == "permission_denied"
    assert client.get("/api/hub/issues", **token_for(hub_user)).status_code == 200


def test_rest_author_defaults_to_api_and_staff_can_give_it(client, hub_staff, token_for):
    headers = token_for(hub_staff)
    one = client.post(
        "/api/hub/batches", {"title": "t", "commands": [{"type": "refresh", "full": True}]}, content_type=J, **headers
    ).json()
    two = client.post(
        "/api/hub/batches",
        {"title": "t", "commands": [{"type": "refresh", "full": True}], "author": "ci-bot"},
        content_type=J,
        **headers,
    ).json()
    assert Batch.objects.get(pk=one["id"]).author == "api" and Batch.objects.get(pk=two["id"]).author == "ci-bot"
    listed = client.get("/api/hub/batches", **headers).json()["items"]
    assert [b["id"] for b in listed] == [two["id"], one["id"]] and listed[0]["state"] == "queued"


def test_openapi_publishes_the_command_union(client):
    schema = client.get("/api/openapi.json").json()
    batch_in = schema["components"]["schemas"]["BatchIn"]["properties"]["commands"]
    assert "discriminator" in str(batch_in) or "oneOf" in str(batch_in) or "anyOf" in str(batch_in)
    assert "EnsureLink" in schema["components"]["schemas"]
    assert "/api/hub/sync-agent/claim" in schema["paths"]


def test_sync_agent_create_shows_the_token_once(db):
    agent, raw = protocol.sync_agent_create(name="x1")
    assert raw.startswith("achsync_") and agent.token_hash != raw and raw not in str(agent.__dict__)
