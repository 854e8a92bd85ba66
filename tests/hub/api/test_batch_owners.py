"""A batch belongs to the person who created it: others' batches are hidden and untouchable unless
staff or ``hub.manage_any_batch`` / ``hub.view_batch``; the free-text author is for staff and service
accounts; ensure_issue carries the base label; a non-hub caller is refused before its body is read;
text fields refuse control and text-direction characters."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group, Permission

from achilles.models import AuditEvent
from hub import protocol, services
from hub.models import Batch, Command, IssueNote
from hub.permissions import hub_group_ensure
from tests.achilles.factories import UserFactory
from tests.hub.conftest import issue_payload

pytestmark = pytest.mark.django_db

J = "application/json"
FULL = [{"type": "refresh", "full": True}]
COMMENT = [{"type": "ensure_comment", "key": "AURORA-1", "body": "готово"}]


def _person(username, *, staff=False, perms=()):
    user = UserFactory(username=username, is_staff=staff)
    user.groups.add(hub_group_ensure())
    if perms:
        group, _ = Group.objects.get_or_create(name=f"{username}-extra")
        for codename in perms:
            group.permissions.add(Permission.objects.get(content_type__app_label="hub", codename=codename))
        user.groups.add(group)
    return user


@pytest.fixture
def alice(db):
    return _person("alice")


@pytest.fixture
def bob(db):
    return _person("bob")


def _post(client, url, body, headers):
    return client.post(url, body, content_type=J, **headers)


def _claim(agent):
    return protocol.sync_agent_claim(sync_agent=agent, version=6, launcher_version=1, max_commands=20)["commands"]


def _fail(agent, claimed):
    protocol.sync_agent_report(
        sync_agent=agent,
        results=[
            {"command_id": c["id"], "lease_token": c["lease_token"], "status": "failed", "error": "Jira 500"}
            for c in claimed
        ],
        rate_limited=[],
    )


# ---------------------------------------------------------------- ownership


def test_bob_cannot_cancel_force_cancel_or_retry_alices_batch(client, alice, bob, token_for, sync_agent):
    # given: alice's batch with one command at the sync agent, another failed, a third queued
    mine = services.batch_create(user=alice, title="alice's", commands=COMMENT + COMMENT)
    claimed = _claim(sync_agent)
    first, second = claimed[0]["id"], claimed[1]["id"]
    _fail(sync_agent, claimed[1:2])
    headers = token_for(bob)
    # when / then: bob sees nothing of it
    assert client.get(f"/api/hub/batches/{mine.id}", **headers).status_code == 404
    assert client.get(f"/api/hub/batches/{mine.id}/wait?timeout_minutes=0.01", **headers).status_code == 404
    assert _post(client, f"/api/hub/batches/{mine.id}/cancel", {}, headers).status_code == 404
    assert _post(client, f"/api/hub/commands/{first}/cancel", {"force": True}, headers).status_code == 404
    assert _post(client, f"/api/hub/commands/{second}/retry", {}, headers).status_code == 404
    assert client.get("/api/hub/batches", **headers).json()["items"] == []
    # and nothing changed
    assert Command.objects.get(pk=first).state == "claimed"
    assert Batch.objects.count() == 1


def test_alice_reads_cancels_and_retries_her_own_batch(client, alice, token_for, sync_agent):
    headers = token_for(alice)
    created = _post(client, "/api/hub/batches", {"title": "мой", "commands": COMMENT}, headers).json()
    claimed = _claim(sync_agent)
    _fail(sync_agent, claimed[:1])
    view = client.get(f"/api/hub/batches/{created['id']}", **headers).json()
    assert view["created_by"] == "alice" and view["author"] == "api"
    listed = client.get("/api/hub/batches", **headers).json()["items"]
    assert [(b["id"], b["created_by"]) for b in listed] == [(created["id"], "alice")]
    retried = _post(client, f"/api/hub/commands/{claimed[0]['id']}/retry", {}, headers)
    assert retried.status_code == 201
    assert Batch.objects.get(pk=retried.json()["id"]).created_by == alice
    assert _post(client, f"/api/hub/batches/{retried.json()['id']}/cancel", {}, headers).status_code == 200


def test_staff_and_manage_any_batch_act_on_anyones_batch(client, alice, token_for, sync_agent):
    mine = services.batch_create(user=alice, title="alice's", commands=COMMENT + COMMENT)
    claimed = _claim(sync_agent)
    _fail(sync_agent, claimed[1:2])
    staff = _person("root2", staff=True)
    manager = _person("carol", perms=["manage_any_batch"])
    # the permission is enough: carol force-cancels, staff retries
    view = client.get(f"/api/hub/batches/{mine.id}", **token_for(manager)).json()
    assert view["created_by"] == "alice"
    forced = _post(client, f"/api/hub/commands/{claimed[0]['id']}/cancel", {"force": True}, token_for(manager))
    assert forced.status_code == 200 and forced.json()["state"] == "cancelled"
    retried = _post(client, f"/api/hub/commands/{claimed[1]['id']}/retry", {}, token_for(staff))
    assert retried.status_code == 201
    assert Batch.objects.get(pk=retried.json()["id"]).created_by == staff
    listed = client.get("/api/hub/batches", **token_for(staff)).json()["items"]
    assert {b["created_by"] for b in listed} == {"alice", "root2"}


def test_view_batch_reads_anyones_batch_but_may_not_change_it(client, alice, token_for):
    mine = services.batch_create(user=alice, title="alice's", commands=COMMENT)
    auditor = _person("dave", perms=["view_batch"])
    headers = token_for(auditor)
    assert client.get(f"/api/hub/batches/{mine.id}", **headers).status_code == 200
    assert [b["id"] for b in client.get("/api/hub/batches", **headers).json()["items"]] == [mine.id]
    refused = _post(client, f"/api/hub/batches/{mine.id}/cancel", {}, headers)
    assert refused.status_code == 403 and refused.json()["code"] == "permission_denied"
    assert not Command.objects.filter(state="cancelled").exists()


def test_deleting_a_user_keeps_their_batches_with_no_owner(alice):
    """The FK is ON DELETE SET NULL in the database: raw SQL deleting the user leaves the batch."""
    from django.db import connection

    created = services.batch_create(user=alice, title="alice's", commands=FULL)
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM users_groups WHERE user_id = %s", [alice.pk])
        cursor.execute("DELETE FROM users WHERE id = %s", [alice.pk])
    batch = Batch.objects.get(pk=created.id)
    assert batch.created_by_id is None


# ---------------------------------------------------------------- the free-text author


def test_a_non_staff_caller_may_not_name_the_author(client, bob, token_for):
    headers = token_for(bob)
    body = {"title": "t", "commands": FULL, "author": "claude"}
    refused = _post(client, "/api/hub/batches", body, headers)
    assert refused.status_code == 403 and refused.json()["code"] == "permission_denied"
    assert "author" in refused.json()["detail"]
    assert _post(client, "/api/hub/refresh", {"full": True, "author": "claude"}, headers).status_code == 403
    assert _post(client, "/api/hub/commands/1/retry", {"author": "claude"}, headers).status_code == 403
    # the surface's own name is no claim to anything
    assert _post(client, "/api/hub/refresh", {"full": True, "author": "api"}, headers).status_code == 201
    assert Batch.objects.count() == 1
    # omitted, it is `api`
    created = _post(client, "/api/hub/batches", {"title": "t", "commands": FULL}, headers).json()
    assert Batch.objects.get(pk=created["id"]).author == "api"


def test_staff_and_service_accounts_may_name_the_author(client, token_for):
    staff = _person("ops", staff=True)
    service = _person("ci", perms=["name_batch_author"])
    one = _post(client, "/api/hub/batches", {"title": "t", "commands": FULL, "author": "ci-bot"}, token_for(staff))
    two = _post(client, "/api/hub/refresh", {"full": True, "author": "nightly"}, token_for(service))
    assert one.status_code == 201 and two.status_code == 201
    assert Batch.objects.get(pk=one.json()["id"]).author == "ci-bot"
    assert Batch.objects.get(pk=two.json()["id"]).author == "nightly"


# ---------------------------------------------------------------- the base label


def test_ensure_issue_without_the_base_label_is_a_422(client, bob, token_for):
    headers = token_for(bob)
    command = {"type": "ensure_issue", "project": "AURORA", "summary": "Без метки"}
    refused = _post(client, "/api/hub/batches", {"title": "t", "commands": [command]}, headers)
    assert refused.status_code == 422 and refused.json()["code"] == "validation_error"
    assert "command 1 (ensure_issue): labels: must include the base label «AWPCA»" in refused.json()["detail"]
    other = _post(client, "/api/hub/batches", {"title": "t", "commands": [command | {"labels": ["other"]}]}, headers)
    assert other.status_code == 422
    assert Batch.objects.count() == 0
    ok = _post(client, "/api/hub/batches", {"title": "t", "commands": [command | {"labels": ["AWPCA"]}]}, headers)
    assert ok.status_code == 201


def test_the_base_label_is_the_setting(bob):
    from achilles.errors import ValidationFailed
    from hub.models import HubSetting

    HubSetting.objects.create(key="base_label", value="HUBMADE")
    command = {"type": "ensure_issue", "project": "AURORA", "summary": "s", "labels": ["AWPCA"]}
    with pytest.raises(ValidationFailed, match="HUBMADE"):
        services.batch_create(user=bob, title="t", commands=[command])
    services.batch_create(user=bob, title="t", commands=[command | {"labels": ["HUBMADE"]}])


def test_retrying_an_unlabelled_ensure_issue_is_a_422(client, bob, token_for, sync_agent):
    # given: a failed ensure_issue stored before the rule (or under another base label)
    created = services.batch_create(
        user=bob,
        title="t",
        commands=[{"type": "ensure_issue", "project": "AURORA", "summary": "s", "labels": ["AWPCA"]}],
    )
    command = Command.objects.get(batch_id=created.id, seq=1)
    Command.objects.filter(pk=command.pk).update(payload={**command.payload, "labels": []})
    claimed = _claim(sync_agent)
    _fail(sync_agent, claimed)
    # when
    refused = _post(client, f"/api/hub/commands/{command.pk}/retry", {}, token_for(bob))
    # then
    assert refused.status_code == 422 and "base label" in refused.json()["detail"]
    assert Batch.objects.count() == 1


# ---------------------------------------------------------------- permission before the body


@pytest.mark.parametrize(
    "method, url, body",
    [
        ("post", "/api/hub/batches", {"title": 5}),
        ("post", "/api/hub/refresh", {"keys": "nope", "extra": 1}),
        ("post", "/api/hub/commands/1/cancel", {"force": "maybe"}),
        ("post", "/api/hub/commands/1/retry", {"author": 5}),
        ("put", "/api/hub/settings/poll_interval_seconds", {"nope": 1}),
        ("patch", "/api/hub/issues/AURORA-1/notes", "not an object"),
        ("post", "/api/hub/publications", {"version": "x"}),
    ],
)
def test_a_non_hub_user_is_refused_before_the_body_is_read(client, outsider, token_for, client_for, method, url, body):
    for send in (
        lambda: getattr(client, method)(url, body, content_type=J, **token_for(outsider)),
        lambda: getattr(client_for(outsider), method)(url, body, content_type=J),
    ):
        response = send()
        assert response.status_code == 403, response.content
        assert response.json()["code"] == "permission_denied"
    anonymous = getattr(client, method)(url, body, content_type=J)
    assert anonymous.status_code == 401 and anonymous.json()["code"] == "not_authenticated"


# ---------------------------------------------------------------- control and text-direction characters


@pytest.mark.parametrize(
    "title", ["abc\u202eexe.txt", "a\u2066b", "line\nbreak", "bell\x07", "c1\x85x", "c1\x9bx", "tab\there"], ids=repr
)
def test_a_batch_title_with_control_or_bidi_characters_is_a_422(client, bob, token_for, title):
    refused = _post(client, "/api/hub/batches", {"title": title, "commands": FULL}, token_for(bob))
    assert refused.status_code == 422, refused.content
    assert refused.json()["detail"][0]["loc"] == ["body", "title"]
    assert "text-direction" in refused.json()["detail"][0]["msg"]
    assert Batch.objects.count() == 0


@pytest.mark.parametrize(
    "command, where",
    [
        ({"type": "ensure_issue", "project": "AURORA", "summary": "x\u202ey", "labels": ["AWPCA"]}, "summary"),
        ({"type": "ensure_fields", "key": "AURORA-1", "fields": {"summary": "x\u202dy"}}, "fields.summary"),
        ({"type": "ensure_fields", "key": "AURORA-1", "fields": {"description": "a\u2067b"}}, "fields.description"),
        ({"type": "ensure_fields", "key": "AURORA-1", "fields": {"description": "a\x1b[2Jb"}}, "fields.description"),
        ({"type": "ensure_comment", "key": "AURORA-1", "body": "ok\u202e"}, "body"),
    ],
)
def test_command_texts_with_control_or_bidi_characters_are_a_422(client, bob, token_for, command, where):
    refused = _post(client, "/api/hub/batches", {"title": "t", "commands": [command]}, token_for(bob))
    assert refused.status_code == 422, refused.content
    assert f": {where}: must not contain control or text-direction characters" in refused.json()["detail"]
    assert Batch.objects.count() == 0


def test_multi_line_command_texts_keep_newlines_and_tabs(client, bob, token_for):
    commands = [
        {"type": "ensure_fields", "key": "AURORA-1", "fields": {"description": "строка 1\r\nстрока 2\n\tпункт"}},
        {"type": "ensure_comment", "key": "AURORA-1", "body": "абзац 1\n\nабзац 2"},
    ]
    assert _post(client, "/api/hub/batches", {"title": "t", "commands": commands}, token_for(bob)).status_code == 201


def test_notes_with_control_or_bidi_characters_are_a_422(client, bob, token_for, mirror):
    mirror(issue_payload("AURORA-1"))
    headers = token_for(bob)
    for field, value in (
        ("note", "x\u202ey"),
        ("fact_status", "в\nработе"),
        ("owner", "a\u2069"),
        ("next_step", "\x1b[2J"),
    ):
        refused = client.patch("/api/hub/issues/AURORA-1/notes", {field: value}, content_type=J, **headers)
        assert refused.status_code == 422, (field, refused.content)
        assert refused.json()["detail"][0]["loc"] == ["body", field]
    assert not IssueNote.objects.exists()
    ok = client.patch("/api/hub/issues/AURORA-1/notes", {"note": "1.\n2.\tготово"}, content_type=J, **headers)
    assert ok.status_code == 200 and ok.json()["note"] == "1.\n2.\tготово"


# ---------------------------------------------------------------- the audit trail


def test_create_cancel_retry_and_refresh_are_audited(alice, sync_agent):
    created = services.batch_create(user=alice, title="мой", commands=COMMENT + COMMENT)
    claimed = _claim(sync_agent)
    _fail(sync_agent, claimed[1:2])
    services.command_cancel(user=alice, command_id=claimed[0]["id"], force=True)
    retried = services.command_retry(user=alice, command_id=claimed[1]["id"])
    services.batch_cancel(user=alice, batch_id=retried.id)
    refreshed = services.refresh(user=alice, full=True)
    events = list(AuditEvent.objects.order_by("id").values_list("actor", "action", "target"))
    assert events == [
        ("alice", "hub_batch_created", f"hub_batch:{created.id}"),
        ("alice", "hub_command_cancelled", f"hub_command:{claimed[0]['id']}"),
        ("alice", "hub_command_retried", f"hub_command:{claimed[1]['id']}"),
        ("alice", "hub_batch_cancelled", f"hub_batch:{retried.id}"),
        ("alice", "hub_batch_created", f"hub_batch:{refreshed.id}"),
    ]
    first = AuditEvent.objects.filter(action="hub_batch_created").order_by("id").first()
    assert first.details == {
        "title": "мой",
        "author": "api",
        "command_count": 3,
        "types": ["ensure_comment"] * 2 + ["refresh"],
    }
    forced = AuditEvent.objects.get(action="hub_command_cancelled")
    assert forced.details == {"batch_id": created.id, "force": True, "was": "claimed", "owner": "alice"}
    retry = AuditEvent.objects.get(action="hub_command_retried")
    assert retry.details["batch_id"] == retried.id and retry.details["owner"] == "alice"


def test_acting_on_someone_elses_batch_names_the_owner(alice):
    created = services.batch_create(user=alice, title="alice's", commands=FULL)
    manager = _person("carol", perms=["manage_any_batch"])
    services.batch_cancel(user=manager, batch_id=created.id)
    event = AuditEvent.objects.get(action="hub_batch_cancelled")
    assert (event.actor, event.details["owner"]) == ("carol", "alice")


def test_a_refused_create_leaves_no_audit_event(bob):
    from achilles.errors import ValidationFailed

    with pytest.raises(ValidationFailed):
        services.batch_create(
            user=bob, title="t", commands=[{"type": "ensure_issue", "project": "AURORA", "summary": "s"}]
        )
    assert not AuditEvent.objects.exists()
