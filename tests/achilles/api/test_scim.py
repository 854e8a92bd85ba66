"""SCIM 2.0 provisioning over HTTP against the real app (issue 24): the round trip, the dialects
of Entra ID (legacy and ``aadOptscim062020``) and Okta, deactivation with the directory sync's
effects, the token, the error shape, and scim2-tester's compliance checks."""

from __future__ import annotations

import json

import pytest
from django.contrib.auth.models import Group
from django.core.management import call_command
from django.db import IntegrityError, connection, transaction
from django.test import Client

from achilles.models import AuditEvent, ScimGroup, ScimToken, ScimUser, User
from achilles.scim.services import scim_token_create

pytestmark = [pytest.mark.api, pytest.mark.django_db]

BASE = "/scim/v2"
USER_SCHEMA = "urn:ietf:params:scim:schemas:core:2.0:User"
GROUP_SCHEMA = "urn:ietf:params:scim:schemas:core:2.0:Group"
PATCH_SCHEMA = "urn:ietf:params:scim:api:messages:2.0:PatchOp"
ERROR_SCHEMA = "urn:ietf:params:scim:api:messages:2.0:Error"


class Scim:
    """An identity provider's HTTP calls, with its token."""

    def __init__(self, raw: str):
        self.client = Client(HTTP_AUTHORIZATION=f"Bearer {raw}")

    def call(self, method: str, path: str, body=None):
        data = json.dumps(body) if body is not None else None
        kwargs = {"data": data, "content_type": "application/scim+json"} if data is not None else {}
        return self.client.generic(method, f"{BASE}{path}", **kwargs)

    def create_user(self, username: str, **extra) -> dict:
        answer = self.call("POST", "/Users", {"schemas": [USER_SCHEMA], "userName": username, "active": True, **extra})
        assert answer.status_code == 201, answer.content
        return answer.json()

    def patch(self, path: str, *operations: dict):
        return self.call("PATCH", path, {"schemas": [PATCH_SCHEMA], "Operations": list(operations)})

    def find(self, resource: str, scim_filter: str) -> list[dict]:
        answer = self.client.get(f"{BASE}/{resource}", {"filter": scim_filter})
        assert answer.status_code == 200, answer.content
        return answer.json().get("Resources", [])


@pytest.fixture
def scim(db) -> Scim:
    _, raw = scim_token_create(name="entra")
    return Scim(raw)


def group_names(user_id: str) -> set[str]:
    return set(User.objects.get(pk=int(user_id)).groups.values_list("name", flat=True))


def error_of(answer, status: int) -> dict:
    assert answer.status_code == status, (answer.status_code, answer.content)
    assert answer["Content-Type"] == "application/scim+json"
    body = answer.json()
    assert body["schemas"] == [ERROR_SCHEMA] and body["status"] == str(status)
    return body


def test_create_patch_deactivate_and_group_membership_round_trip(scim):
    # given: a person provisioned ahead of their first sign-in
    alice = scim.create_user(
        "alice@example.com",
        externalId="e-1",
        name={"givenName": "Alice", "familyName": "Aliceson"},
        emails=[{"value": "alice@example.com", "primary": True, "type": "work"}],
        phoneNumbers=[{"value": "+7 900 000-00-00", "type": "work"}],
    )
    user = User.objects.get(pk=int(alice["id"]))
    assert (user.source, user.first_name, user.email, user.has_usable_password()) == (
        "scim", "Alice", "alice@example.com", False,
    )  # fmt: skip
    assert scim.call("GET", f"/Users/{alice['id']}").json()["phoneNumbers"] == [
        {"value": "+7 900 000-00-00", "type": "work"}
    ]
    # when: a group with her as a member, then a rename
    group = scim.call(
        "POST", "/Groups", {"schemas": [GROUP_SCHEMA], "displayName": "eng", "members": [{"value": alice["id"]}]}
    )
    assert group.status_code == 201, group.content
    gid = group.json()["id"]
    assert group_names(alice["id"]) == {"eng"}
    assert "group:eng" in User.objects.get(pk=int(alice["id"])).principals
    assert scim.patch(
        f"/Groups/{gid}", {"op": "replace", "path": "displayName", "value": "engineering"}
    ).status_code in (200, 204)
    assert group_names(alice["id"]) == {"engineering"}
    assert scim.call("GET", f"/Users/{alice['id']}").json()["groups"][0]["display"] == "engineering"
    # and: a PATCH of her name, then her deactivation
    assert scim.patch(
        f"/Users/{alice['id']}", {"op": "replace", "path": "name.givenName", "value": "Alicia"}
    ).status_code in (200, 204)
    assert User.objects.get(pk=int(alice["id"])).first_name == "Alicia"
    assert scim.patch(f"/Users/{alice['id']}", {"op": "replace", "path": "active", "value": False}).status_code in (
        200,
        204,
    )
    assert not User.objects.get(pk=int(alice["id"])).is_active
    assert scim.call("GET", f"/Users/{alice['id']}").json()["active"] is False
    # then: every change audited, as SCIM's, by the token's provider
    actions = list(AuditEvent.objects.filter(actor="scim:entra").values_list("action", flat=True))
    assert {
        "scim_user_created",
        "scim_group_created",
        "scim_group_updated",
        "scim_user_updated",
        "user_deactivated",
    } <= set(actions)
    deactivated = AuditEvent.objects.get(action="user_deactivated")
    assert deactivated.details["via"] == "scim"


def test_filters_and_paging(scim):
    ids = [
        scim.create_user(f"user{i}", externalId=f"x{i}", emails=[{"value": f"u{i}@example.com"}])["id"]
        for i in range(5)
    ]
    assert [u["id"] for u in scim.find("Users", 'userName eq "USER3"')] == [ids[3]]  # userName is caseExact false
    assert [u["id"] for u in scim.find("Users", 'externalId eq "x1"')] == [ids[1]]
    assert scim.find("Users", 'externalId eq "X1"') == []  # externalId is caseExact
    assert [u["id"] for u in scim.find("Users", 'emails.value eq "u2@example.com"')] == [ids[2]]
    error_of(
        scim.client.get(f"{BASE}/Users", {"filter": 'emails[type eq "work"]'}), 400
    )  # value filters: not supported
    assert len(scim.find("Users", 'userName sw "user" and not (userName eq "user0")')) == 4
    page = scim.client.get(f"{BASE}/Users", {"startIndex": 2, "count": 2}).json()
    assert (page["totalResults"], page["startIndex"], page["itemsPerPage"]) == (5, 2, 2)
    assert [u["id"] for u in page["Resources"]] == ids[1:3]
    scim.call("POST", "/Groups", {"schemas": [GROUP_SCHEMA], "displayName": "Sales"})
    assert [g["displayName"] for g in scim.find("Groups", 'displayName eq "sales"')] == ["Sales"]
    error_of(scim.client.get(f"{BASE}/Users", {"filter": 'title eq "x"'}), 400)
    error_of(scim.client.get(f"{BASE}/Users", {"filter": "userName eq"}), 400)


def test_entra_legacy_dialect(scim):
    """Without ``aadOptscim062020``: capitalised ops, the string "False", members removed by a value list."""
    alice = scim.create_user("alice")
    bob = scim.create_user("bob")
    gid = scim.call("POST", "/Groups", {"schemas": [GROUP_SCHEMA], "displayName": "eng"}).json()["id"]
    assert scim.patch(
        f"/Groups/{gid}", {"op": "Add", "path": "members", "value": [{"value": alice["id"]}, {"value": bob["id"]}]}
    ).status_code in (200, 204)
    assert group_names(bob["id"]) == {"eng"}
    assert scim.patch(
        f"/Groups/{gid}", {"op": "Remove", "path": "members", "value": [{"value": bob["id"]}]}
    ).status_code in (200, 204)
    assert group_names(bob["id"]) == set() and group_names(alice["id"]) == {"eng"}
    assert scim.patch(f"/Users/{alice['id']}", {"op": "Replace", "path": "active", "value": "False"}).status_code in (
        200,
        204,
    )
    assert not User.objects.get(pk=int(alice["id"])).is_active
    assert scim.patch(f"/Users/{alice['id']}", {"op": "Replace", "path": "active", "value": "True"}).status_code in (
        200,
        204,
    )
    assert User.objects.get(pk=int(alice["id"])).is_active


def test_entra_aadoptscim062020_dialect(scim):
    """With the flag: ``members[value eq "id"]`` paths and a path-less replace keyed by attribute paths."""
    alice = scim.create_user("alice", emails=[{"value": "old@example.com", "type": "work", "primary": True}])
    bob = scim.create_user("bob")
    gid = scim.call(
        "POST",
        "/Groups",
        {"schemas": [GROUP_SCHEMA], "displayName": "eng", "members": [{"value": alice["id"]}, {"value": bob["id"]}]},
    ).json()["id"]
    assert scim.patch(f"/Groups/{gid}", {"op": "remove", "path": f'members[value eq "{alice["id"]}"]'}).status_code in (
        200,
        204,
    )
    assert group_names(alice["id"]) == set() and group_names(bob["id"]) == {"eng"}
    answer = scim.patch(
        f"/Users/{alice['id']}",
        {"op": "replace", "value": {"name.givenName": "Alice", "active": False}},
        {"op": "replace", "path": 'emails[type eq "work"].value', "value": "new@example.com"},
    )
    assert answer.status_code in (200, 204), answer.content
    user = User.objects.get(pk=int(alice["id"]))
    assert (user.first_name, user.email, user.is_active) == ("Alice", "new@example.com", False)


def test_okta_dialect(scim):
    """Okta: userName lookups, PUT for the profile, ``active: false`` instead of DELETE, members replaced."""
    assert scim.find("Users", 'userName eq "carol@example.com"') == []
    carol = scim.create_user("carol@example.com", name={"givenName": "Carol", "familyName": "C"})
    dave = scim.create_user("dave@example.com")
    put = scim.call(
        "PUT",
        f"/Users/{carol['id']}",
        {
            "schemas": [USER_SCHEMA],
            "userName": "carol@example.com",
            "name": {"givenName": "Caroline", "familyName": "C"},
            "active": True,
        },
    )
    assert put.status_code == 200, put.content
    assert User.objects.get(pk=int(carol["id"])).first_name == "Caroline"
    gid = scim.call("POST", "/Groups", {"schemas": [GROUP_SCHEMA], "displayName": "okta-eng"}).json()["id"]
    scim.patch(f"/Groups/{gid}", {"op": "replace", "path": "members", "value": [{"value": carol["id"]}]})
    assert group_names(carol["id"]) == {"okta-eng"}
    scim.patch(f"/Groups/{gid}", {"op": "replace", "path": "members", "value": [{"value": dave["id"]}]})
    assert group_names(carol["id"]) == set() and group_names(dave["id"]) == {"okta-eng"}
    scim.patch(f"/Groups/{gid}", {"op": "remove", "path": f'members[value eq "{dave["id"]}"]'})
    assert group_names(dave["id"]) == set()
    assert scim.patch(f"/Users/{carol['id']}", {"op": "replace", "value": {"active": False}}).status_code in (200, 204)
    assert not User.objects.get(pk=int(carol["id"])).is_active


def test_scim_never_touches_groups_it_did_not_make(scim, user_factory):
    alice = scim.create_user("alice")
    user = User.objects.get(pk=int(alice["id"]))
    user.groups.add(Group.objects.create(name="hand-picked"))
    local = user_factory(username="local-person")
    gid = scim.call(
        "POST", "/Groups", {"schemas": [GROUP_SCHEMA], "displayName": "eng", "members": [{"value": alice["id"]}]}
    ).json()["id"]
    Group.objects.get(pk=int(gid)).user_set.add(local)  # an administrator adds a local account by hand
    # when: the provider replaces the members with nobody
    scim.patch(f"/Groups/{gid}", {"op": "replace", "path": "members", "value": []})
    # then: its own member left; the hand-added one and the hand-made group stay
    assert group_names(alice["id"]) == {"hand-picked"}
    assert set(local.groups.values_list("name", flat=True)) == {"eng"}
    assert [g["displayName"] for g in scim.call("GET", "/Groups").json().get("Resources", [])] == ["eng"]
    error_of(scim.call("POST", "/Groups", {"schemas": [GROUP_SCHEMA], "displayName": "hand-picked"}), 409)
    error_of(scim.call("GET", f"/Groups/{Group.objects.get(name='hand-picked').pk}"), 404)
    # a local account is invisible to SCIM and cannot be taken over
    error_of(scim.call("GET", f"/Users/{local.pk}"), 404)
    assert (
        error_of(scim.call("POST", "/Users", {"schemas": [USER_SCHEMA], "userName": "LOCAL-person"}), 409)["scimType"]
        == "uniqueness"
    )
    error_of(scim.patch(f"/Groups/{gid}", {"op": "add", "path": "members", "value": [{"value": str(local.pk)}]}), 400)


def test_scim_groups_filter_limits_the_names_it_may_create(scim, monkeypatch):
    monkeypatch.setenv("SCIM_GROUPS", "idp-*, all-staff")
    assert scim.call("POST", "/Groups", {"schemas": [GROUP_SCHEMA], "displayName": "idp-eng"}).status_code == 201
    assert scim.call("POST", "/Groups", {"schemas": [GROUP_SCHEMA], "displayName": "all-staff"}).status_code == 201
    error_of(scim.call("POST", "/Groups", {"schemas": [GROUP_SCHEMA], "displayName": "admins"}), 400)


def test_delete_deactivates_keeps_the_account_and_a_return_brings_it_back(scim):
    alice = scim.create_user("alice", externalId="e-1")
    gid = scim.call(
        "POST", "/Groups", {"schemas": [GROUP_SCHEMA], "displayName": "eng", "members": [{"value": alice["id"]}]}
    ).json()["id"]
    assert scim.call("DELETE", f"/Users/{alice['id']}").status_code == 204
    user = User.objects.get(pk=int(alice["id"]))
    assert not user.is_active and group_names(alice["id"]) == set()
    error_of(scim.call("GET", f"/Users/{alice['id']}"), 404)
    assert scim.find("Users", 'userName eq "alice"') == []
    assert AuditEvent.objects.filter(target=f"user:{user.pk}").count() >= 3  # the history stays
    # when: provisioned again
    again = scim.create_user("alice", externalId="e-2")
    assert again["id"] == alice["id"] and User.objects.get(pk=user.pk).is_active
    assert scim.call("DELETE", f"/Groups/{gid}").status_code == 204
    assert not Group.objects.filter(pk=int(gid)).exists()
    assert AuditEvent.objects.filter(action="scim_group_deleted").exists()


def test_deactivation_through_scim_has_the_directory_sync_s_effects(scim, client_for):
    from achilles.services import api_token_create
    from tests.agents.conftest import AgentFactory

    alice = scim.create_user("alice")
    user = User.objects.get(pk=int(alice["id"]))
    _, token = api_token_create(user=user)
    agent = AgentFactory(owner=user, enabled=True)
    session = client_for(user)
    assert Client().get("/api/me", HTTP_AUTHORIZATION=f"Bearer {token}").status_code == 200
    # when
    scim.patch(f"/Users/{alice['id']}", {"op": "replace", "path": "active", "value": False})
    # then
    agent.refresh_from_db()
    assert Client().get("/api/me", HTTP_AUTHORIZATION=f"Bearer {token}").status_code == 401
    assert session.get("/api/me").status_code == 401
    assert not agent.enabled
    # and a reactivation leaves the agent off
    scim.patch(f"/Users/{alice['id']}", {"op": "replace", "path": "active", "value": True})
    agent.refresh_from_db()
    assert User.objects.get(pk=user.pk).is_active and not agent.enabled


@pytest.mark.django_db(transaction=True)
def test_deactivation_through_scim_closes_the_websocket_at_once():
    import asyncio

    from asgiref.sync import async_to_sync
    from channels.testing import WebsocketCommunicator

    from achilles.asgi import application

    _, raw = scim_token_create(name="okta")
    scim = Scim(raw)
    alice = scim.create_user("alice")
    session = Client()
    session.force_login(User.objects.get(pk=int(alice["id"])))
    headers = [
        (b"cookie", f"sessionid={session.cookies['sessionid'].value}".encode()),
        (b"host", b"testserver"),
        (b"origin", b"http://testserver"),
    ]

    def deactivate():
        try:
            scim.patch(f"/Users/{alice['id']}", {"op": "replace", "path": "active", "value": False})
        finally:
            connection.close()

    async def go():
        ws = WebsocketCommunicator(application, "/ws/chat/", headers=headers)
        connected, _ = await ws.connect()
        assert connected
        await asyncio.to_thread(deactivate)
        frame = json.loads(await ws.receive_from(timeout=5))
        closed = await ws.receive_output(timeout=5)
        await ws.wait()
        return frame, closed

    frame, closed = async_to_sync(go)()
    assert frame["code"] == "not_authenticated"
    assert closed == {"type": "websocket.close", "code": 4401}


@pytest.mark.parametrize("header", [None, "Bearer scim_nope_nope", "Basic dXNlcjpwYXNz", "Bearer "])
@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/Users"),
        ("POST", "/Users"),
        ("GET", "/Users/1"),
        ("PUT", "/Users/1"),
        ("PATCH", "/Groups/1"),
        ("DELETE", "/Groups/1"),
        ("GET", "/Schemas"),
        ("GET", "/ResourceTypes"),
    ],
)
def test_every_scim_route_without_a_valid_token_answers_401_in_the_scim_shape(method, path, header):
    client = Client(HTTP_AUTHORIZATION=header) if header else Client()
    answer = client.generic(method, f"{BASE}{path}", data="{}", content_type="application/scim+json")
    error_of(answer, 401)
    assert answer["WWW-Authenticate"].startswith("Bearer")


def test_a_personal_api_token_or_a_revoked_scim_token_opens_nothing(scim, user, token_for):
    api_headers = token_for(user)
    error_of(Client(**api_headers).get(f"{BASE}/Users"), 401)
    _, raw = scim_token_create(name="keycloak")
    assert Scim(raw).client.get(f"{BASE}/Users").status_code == 200
    call_command("scim_token", "revoke", "keycloak")
    error_of(Scim(raw).client.get(f"{BASE}/Users"), 401)
    # and a SCIM token is no API token
    assert Client(HTTP_AUTHORIZATION=f"Bearer {raw}").get("/api/me").status_code == 401


def test_scim_token_command_shows_the_secret_once_and_stores_its_hash(capsys):
    call_command("scim_token", "create", "entra")
    raw = capsys.readouterr().out.strip().splitlines()[-1]
    stored = ScimToken.objects.get(name="entra")
    assert raw.startswith("scim_") and raw not in (stored.key_hash, stored.prefix)
    call_command("scim_token", "list")
    assert raw not in capsys.readouterr().out
    assert AuditEvent.objects.filter(action="scim_token_created").exists()


def test_bad_input_is_a_scim_error_never_a_500(scim):
    alice = scim.create_user("alice", externalId="e-1")
    error_of(scim.call("POST", "/Users", {"schemas": [USER_SCHEMA]}), 400)  # no userName
    assert (
        error_of(scim.call("POST", "/Users", {"schemas": [USER_SCHEMA], "userName": "ALICE"}), 409)["scimType"]
        == "uniqueness"
    )
    assert (
        error_of(
            scim.call("POST", "/Users", {"schemas": [USER_SCHEMA], "userName": "other", "externalId": "e-1"}), 409
        )["scimType"]
        == "uniqueness"
    )
    error_of(scim.call("GET", "/Users/999999"), 404)
    error_of(scim.call("GET", "/Users/not-a-number"), 404)
    error_of(scim.call("GET", "/Nope"), 404)
    error_of(scim.patch(f"/Users/{alice['id']}", {"op": "explode", "path": "active", "value": True}), 400)
    error_of(scim.patch(f"/Users/{alice['id']}", {"op": "replace", "path": "active", "value": "maybe"}), 400)
    error_of(scim.client.generic("POST", f"{BASE}/Users", data="{not json", content_type="application/scim+json"), 400)
    error_of(scim.call("POST", "/Users", {"schemas": [USER_SCHEMA], "userName": "nul\x00name"}), 400)
    error_of(scim.call("POST", "/Users", {"schemas": [USER_SCHEMA], "userName": "x" * 151}), 400)
    error_of(
        scim.call(
            "POST", "/Groups", {"schemas": [GROUP_SCHEMA], "displayName": "g", "members": [{"value": "42424242"}]}
        ),
        400,
    )
    assert scim.client.generic("POST", f"{BASE}/Users", data="a=b", content_type="text/plain").status_code == 415


def test_discovery_endpoints(scim):
    config = Client().get(f"{BASE}/ServiceProviderConfig")  # needs no token (RFC 7643 §5)
    assert config.status_code == 200 and config["Content-Type"] == "application/scim+json"
    assert config.json()["patch"]["supported"] is True and config.json()["bulk"]["supported"] is False
    types = {r["id"] for r in scim.call("GET", "/ResourceTypes").json()["Resources"]}
    assert types == {"User", "Group"}
    schemas = {s["id"] for s in scim.call("GET", "/Schemas").json()["Resources"]}
    assert {USER_SCHEMA, GROUP_SCHEMA, "urn:ietf:params:scim:schemas:extension:enterprise:2.0:User"} <= schemas


def test_the_database_refuses_duplicate_or_empty_external_ids(scim):
    alice, bob = scim.create_user("alice", externalId="e-1"), scim.create_user("bob")
    for sql, params in (
        ("UPDATE scim_users SET external_id = %s WHERE user_id = %s", ["e-1", int(bob["id"])]),
        ("UPDATE scim_users SET external_id = '' WHERE user_id = %s", [int(bob["id"])]),
        (
            "INSERT INTO scim_tokens (name, prefix, key_hash, created_at, updated_at) VALUES ('', 'p', 'h', now(), now())",
            [],
        ),
        ("UPDATE users SET source = 'nowhere' WHERE id = %s", [int(alice["id"])]),
    ):
        with pytest.raises(IntegrityError), transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(sql, params)
    # a group deleted by anyone takes its SCIM record along (ON DELETE CASCADE in the database)
    gid = scim.call("POST", "/Groups", {"schemas": [GROUP_SCHEMA], "displayName": "eng"}).json()["id"]
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM auth_group WHERE id = %s", [int(gid)])
    assert not ScimGroup.objects.filter(pk=int(gid)).exists()
    assert ScimUser.objects.count() == 2


# Checks of the tester that fail by design, each with its reason (matched on check, type and message).
EXCLUDED = {
    ("check_add_attribute", "Group", "Attribute 'members'"): "members.display is the member's userName, "
    "the platform's own value, not an echo of what the provider sent (RFC 7643 §4.2: display is readOnly)",
    ("check_replace_attribute", "Group", "Attribute 'members'"): "the same members.display",
}


def _excluded(result) -> bool:
    return any(
        result.title == title
        and getattr(result, "resource_type", "") == kind
        and (result.reason or "").startswith(prefix)
        for title, kind, prefix in EXCLUDED
    )


PATCH_TAGS = {"patch:add", "patch:remove", "patch:replace"}


def run_tester(**options) -> list:
    from django.core import signals
    from django.core.handlers.wsgi import WSGIHandler
    from django.db import close_old_connections
    from scim2_client.engines.wsgi import WSGISCIMClient
    from scim2_tester import Status, check_server

    _, raw = scim_token_create(name="tester")
    client = WSGISCIMClient(
        WSGIHandler(), base_url="http://testserver/scim/v2", headers={"Authorization": f"Bearer {raw}"}
    )
    # As Django's test client does: the test's transaction must survive the requests it makes.
    signals.request_started.disconnect(close_old_connections)
    signals.request_finished.disconnect(close_old_connections)
    try:
        results = check_server(client, **options)
    finally:
        signals.request_started.connect(close_old_connections)
        signals.request_finished.connect(close_old_connections)
    assert results
    return [
        (r.title, r.resource_type, r.reason)
        for r in results
        if r.status not in (Status.SUCCESS, Status.SKIPPED) and not _excluded(r)
    ]


def test_scim2_tester_compliance_checks_pass():
    """The outside compliance tester against the real app: discovery, create/read/update/delete,
    misc for both types, and the attribute-by-attribute PATCH checks for Group. The same PATCH
    checks for User (≈ 150 requests over every attribute of User and the enterprise extension,
    ≈ 30 s here) run with SCIM_TESTER_FULL=1 (docs/scim.md: they pass). The only failures
    allowed are those in EXCLUDED, with their reasons."""
    import os

    failed = run_tester(exclude_tags=PATCH_TAGS)
    if os.environ.get("SCIM_TESTER_FULL"):
        failed += run_tester(include_tags=PATCH_TAGS)
    else:
        failed += run_tester(include_tags=PATCH_TAGS, resource_types=["Group"])
    assert not failed, "\n".join(map(repr, failed))


def test_an_administrator_sees_and_revokes_a_scim_token_in_the_admin(admin_user, client_for):
    token, raw = scim_token_create(name="okta")
    admin = client_for(admin_user)
    page = admin.get("/admin/achilles/scimtoken/")
    assert page.status_code == 200 and token.prefix in page.content.decode() and raw not in page.content.decode()
    answer = admin.post("/admin/achilles/scimtoken/", {"action": "revoke", "_selected_action": [token.pk]})
    assert answer.status_code == 302
    error_of(Scim(raw).client.get(f"{BASE}/Users"), 401)
    assert AuditEvent.objects.filter(action="scim_token_revoked", actor=admin_user.username).exists()
