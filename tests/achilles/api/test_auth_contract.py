"""Auth and error contract of the whole /api/ surface (PLAT-7/8)."""

import re

import pytest
from django.test import Client

from achilles.api import api
from achilles.models import ApiToken

pytestmark = [pytest.mark.api, pytest.mark.django_db]

PLACEHOLDERS = {"int": "1", "uuid": "00000000-0000-0000-0000-000000000001"}


def _routes():
    """Every registered operation of the API, from its OpenAPI schema (new routes join automatically)."""
    schema = api.get_openapi_schema(path_prefix="/api")
    for path, methods in schema["paths"].items():
        for method, operation in methods.items():
            params = {p["name"]: p for p in operation.get("parameters", []) if p["in"] == "path"}

            def fill(match, params=params):
                p = params.get(match.group(1), {})
                fmt = p.get("schema", {}).get("format") or p.get("schema", {}).get("type")
                return PLACEHOLDERS["uuid"] if fmt == "uuid" else PLACEHOLDERS["int"]

            yield method.upper(), re.sub(r"{(\w+)}", fill, path)


ROUTES = list(_routes())


def test_the_route_walk_finds_the_api():
    assert ("GET", "/api/me") in ROUTES


@pytest.mark.parametrize(("method", "path"), ROUTES)
def test_every_api_route_without_credentials_answers_401(method, path):
    # CSRF enforced as over real HTTP: an anonymous write must be 401, not a CSRF 403.
    response = Client(enforce_csrf_checks=True).generic(method, path, data="{}", content_type="application/json")
    assert response.status_code == 401, (method, path, response.content[:200])
    assert response.json()["code"] == "not_authenticated"


def test_me_with_a_session(client_for, user_factory):
    user = user_factory(username="bob", groups=["finance"])
    body = client_for(user).get("/api/me").json()
    assert body["username"] == "bob"
    assert body["is_staff"] is False
    assert set(body["principals"]) >= {f"user:{user.pk}", "group:finance", "everyone"}


def test_me_with_a_bearer_token(user, token_for):
    response = Client().get("/api/me", **token_for(user))
    assert response.status_code == 200
    assert response.json()["username"] == user.username


def test_a_wrong_or_revoked_token_answers_401(user, token_for):
    headers = token_for(user)
    assert Client().get("/api/me", HTTP_AUTHORIZATION="Bearer ach_nope_nope").status_code == 401
    ApiToken.objects.update(revoked_at="2026-01-01T00:00:00Z")
    assert Client().get("/api/me", **headers).status_code == 401


def test_a_token_of_an_inactive_user_answers_401(user, token_for):
    headers = token_for(user)
    user.is_active = False
    user.save()
    assert Client().get("/api/me", **headers).status_code == 401


def test_tokens_are_stored_hashed_and_shown_once(user, client_for):
    client = client_for(user)
    created = client.post("/api/tokens", {"name": "laptop"}, content_type="application/json")
    assert created.status_code == 201
    raw = created.json()["token"]
    stored = ApiToken.objects.get()
    assert raw not in (stored.key_hash, stored.prefix) and stored.key_hash != raw
    listed = client.get("/api/tokens").json()["items"]
    assert listed and "token" not in listed[0]
    assert Client().get("/api/me", HTTP_AUTHORIZATION=f"Bearer {raw}").status_code == 200


def test_validation_errors_are_422_in_the_common_shape(user, client_for):
    response = client_for(user).post("/api/tokens", {"name": ""}, content_type="application/json")
    assert response.status_code == 422
    body = response.json()
    assert body["code"] == "validation_error" and isinstance(body["detail"], list)


def test_malformed_json_is_a_client_error_not_a_500(user, client_for):
    response = client_for(user).post("/api/tokens", "{not json", content_type="application/json")
    assert response.status_code in (400, 422)
    assert "code" in response.json()


def test_revoking_someone_elses_token_is_404(user_factory, client_for):
    owner, other = user_factory(username="owner"), user_factory(username="other")
    token_id = client_for(owner).post("/api/tokens", {"name": "x"}, content_type="application/json").json()["id"]
    response = client_for(other).delete(f"/api/tokens/{token_id}")
    assert response.status_code == 404 and response.json()["code"] == "not_found"


def test_openapi_is_served():
    assert Client().get("/api/openapi.json").status_code == 200
    assert Client().get("/api/docs").status_code == 200


def test_models_lists_the_chat_allow_list_default_first(user, client_for, model_factory):
    model_factory(name="b-model")
    model_factory(name="z-default", is_default=True)
    model_factory(name="emb", kind="embedding")
    names = [m["name"] for m in client_for(user).get("/api/models").json()["items"]]
    assert names == ["z-default", "b-model"]


def test_a_bearer_write_needs_no_csrf_token(user, token_for):
    client = Client(enforce_csrf_checks=True)
    response = client.post("/api/tokens", {"name": "script"}, content_type="application/json", **token_for(user))
    assert response.status_code == 201


def test_a_session_write_without_csrf_token_is_refused(user):
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    response = client.post("/api/tokens", {"name": "x"}, content_type="application/json")
    assert response.status_code == 403 and response.json()["code"] == "permission_denied"


def test_a_session_write_with_the_csrf_token_passes(user):
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    client.get("/tokens/")  # the page sets the CSRF cookie
    token = client.cookies["csrftoken"].value
    response = client.post("/api/tokens", {"name": "x"}, content_type="application/json", HTTP_X_CSRFTOKEN=token)
    assert response.status_code == 201


# Routes outside /api/ that answer in their own shape, each named with where its contract is tested.
# The 401 walk above reads the API's OpenAPI schema, so it cannot see them: this list makes it deliberate.
OWN_CONTRACT = {
    "scim/v2": "SCIM's bearer token and urn:…:Error shape: tests/achilles/api/test_scim.py "
    "(test_every_scim_route_without_a_valid_token_answers_401_in_the_scim_shape)",
}


def test_the_scim_surface_is_outside_the_api_walk_and_has_its_own_contract():
    from achilles.urls import urlpatterns

    scim = [p for p in urlpatterns if "scim" in str(p.pattern)]
    assert len(scim) == 1 and "scim/v2" in OWN_CONTRACT
    assert not any(
        "/scim" in path for _, path in ROUTES
    )  # not in /api/openapi.json: its own schema is /scim/v2/Schemas
    answer = Client().get("/scim/v2/Users")
    assert answer.status_code == 401 and answer.json()["schemas"] == ["urn:ietf:params:scim:api:messages:2.0:Error"]
