"""REST for connectors: staff only, the token write-only and encrypted, runs queued after commit
(one active per kind: 409), bad input as 4xx in the error shape; the DB holds the invariants."""

from __future__ import annotations

import pytest
from django.db import IntegrityError, connection, transaction

from achilles.models import AuditEvent
from knowledge.connectors.models import Connector, ConnectorRun
from knowledge.connectors.secrets import credentials_decrypt

pytestmark = [pytest.mark.api, pytest.mark.django_db]

URL = "/api/knowledge/connectors"
TOKEN = "pat-SECRET-0123456789abcdef"
BODY = {"name": "Вики", "base_url": "https://wiki.example.com/", "token": TOKEN, "spaces": ["ENG", "HR"]}


@pytest.fixture
def admin(user_factory):
    return user_factory(username="admin1", is_staff=True)


@pytest.fixture
def staff(client_for, admin):
    return client_for(admin)


def _create(staff, **over):
    return staff.post(URL, {**BODY, **over}, content_type="application/json")


def test_create_stores_the_token_encrypted_and_never_returns_it(staff, django_capture_on_commit_callbacks):
    response = _create(staff)
    assert response.status_code == 201, response.content
    body = response.json()
    assert TOKEN not in response.content.decode()
    assert body["has_credentials"] is True and body["spaces"] == ["ENG", "HR"]
    assert body["base_url"] == "https://wiki.example.com" and body["source_system"] == f"confluence:{body['id']}"
    stored = Connector.objects.get(pk=body["id"])
    assert TOKEN not in stored.credentials_encrypted
    assert credentials_decrypt(stored.credentials_encrypted) == {"token": TOKEN}
    for response in (staff.get(URL), staff.get(f"{URL}/{body['id']}")):
        assert response.status_code == 200 and TOKEN not in response.content.decode()
    # the audit row says what changed, never the token
    event = AuditEvent.objects.get(action="knowledge.connector_create")
    assert TOKEN not in str(event.details) and event.details["scope"] == {"spaces": ["ENG", "HR"]}


def test_update_keeps_the_token_unless_given_and_audits_only_that_it_changed(staff):
    connector_id = _create(staff).json()["id"]
    response = staff.patch(f"{URL}/{connector_id}", {"enabled": False}, content_type="application/json")
    assert response.status_code == 200 and response.json()["enabled"] is False
    assert credentials_decrypt(Connector.objects.get(pk=connector_id).credentials_encrypted)["token"] == TOKEN
    response = staff.patch(f"{URL}/{connector_id}", {"token": "new-token-xyz"}, content_type="application/json")
    assert response.status_code == 200
    assert credentials_decrypt(Connector.objects.get(pk=connector_id).credentials_encrypted)["token"] == "new-token-xyz"
    details = [e.details for e in AuditEvent.objects.filter(action="knowledge.connector_update")]
    assert {"enabled": False} in details and {"credentials": "replaced"} in details
    assert all("new-token-xyz" not in str(d) for d in details)


def test_non_staff_get_403_and_unknown_ids_404(client_for, user_factory, staff):
    connector_id = _create(staff).json()["id"]
    person = client_for(user_factory(username="person"))
    for response in (
        person.get(URL),
        person.post(URL, BODY, content_type="application/json"),
        person.get(f"{URL}/{connector_id}"),
        person.post(f"{URL}/{connector_id}/run"),
    ):
        assert response.status_code == 403 and response.json()["code"]
    response = staff.get(f"{URL}/999999")
    assert response.status_code == 404 and response.json()["code"] == "connector_not_found"
    assert staff.get(f"{URL}/999999/runs").status_code == 404
    assert staff.delete(f"{URL}/999999").status_code == 404


@pytest.mark.parametrize(
    "over,field",
    [
        ({"base_url": "ftp://wiki"}, "base_url"),
        ({"base_url": "javascript:alert(1)"}, "base_url"),
        ({"spaces": ["ok", "bad key"]}, "spaces"),
        ({"spaces": []}, "spaces"),
        ({"name": "   "}, "name"),
        ({"token": ""}, "token"),
        ({"schedule_minutes": 0}, "schedule_minutes"),
        ({"kind": "sharepoint"}, "kind"),
        ({"enabled": "yes"}, "enabled"),
    ],
)
def test_bad_input_is_422_naming_the_field(staff, over, field):
    response = _create(staff, **over)
    assert response.status_code == 422, response.content
    assert field in str(response.json()["detail"])
    assert not Connector.objects.exists()


def test_a_taken_name_is_409(staff):
    assert _create(staff).status_code == 201
    response = _create(staff, base_url="https://other.example.com")
    assert response.status_code == 409 and response.json()["code"] == "connector_name_taken"


def test_run_is_queued_after_commit_and_a_second_one_is_409(staff, django_capture_on_commit_callbacks, monkeypatch):
    sent = []
    monkeypatch.setattr("knowledge.connectors.runs.current_app.send_task", lambda name, args: sent.append((name, args)))
    connector_id = _create(staff).json()["id"]
    with django_capture_on_commit_callbacks(execute=True):
        response = staff.post(f"{URL}/{connector_id}/run")
    assert response.status_code == 202, response.content
    run = response.json()
    assert run["state"] == "queued" and run["kind"] == "content"
    assert sent == [("knowledge.tasks.connector_run_task", [run["id"]])]
    again = staff.post(f"{URL}/{connector_id}/run")
    assert again.status_code == 409 and again.json()["code"] == "already_running"
    # a permission sync is another kind: it may run beside the content sync
    perms = staff.post(f"{URL}/{connector_id}/run?kind=permissions")
    assert perms.status_code == 202 and perms.json()["kind"] == "permissions"
    runs = staff.get(f"{URL}/{connector_id}/runs").json()
    assert [r["kind"] for r in runs["items"]] == ["permissions", "content"]
    one = staff.get(f"{URL}/{connector_id}/runs/{run['id']}").json()
    assert one["errors"] == [] and one["rate"] is None and one["eta_seconds"] is None


def test_cancel_a_queued_run_then_it_is_never_taken_up_and_a_new_one_may_start(staff, admin, monkeypatch):
    from knowledge.connectors.runs import run_execute

    monkeypatch.setattr("knowledge.connectors.runs.current_app.send_task", lambda name, args: None)
    connector_id = _create(staff).json()["id"]
    run_id = staff.post(f"{URL}/{connector_id}/run").json()["id"]
    # when
    response = staff.post(f"{URL}/{connector_id}/runs/{run_id}/cancel")
    # then
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["state"] == "cancelled" and body["finished_at"] and "admin1" in body["error"]
    assert run_execute(run_id, lambda run: pytest.fail("a cancelled run must not be taken up")) == "skipped"
    again = staff.post(f"{URL}/{connector_id}/runs/{run_id}/cancel")
    assert again.status_code == 409 and again.json()["code"] == "run_finished"
    assert staff.post(f"{URL}/{connector_id}/runs/999999/cancel").status_code == 404
    assert staff.post(f"{URL}/{connector_id}/run").status_code == 202  # the active slot is free again
    assert AuditEvent.objects.filter(action="knowledge.connector_run_cancel", actor=admin).count() == 1


def test_delete_removes_the_connector_its_runs_and_its_records(staff):
    from knowledge import facade

    connector = Connector.objects.get(pk=_create(staff).json()["id"])
    ConnectorRun.objects.create(connector=connector)
    facade.upsert_record(source_system=connector.source_system, external_id="1", title="T", text="x", acl=["everyone"])
    facade.upsert_record(source_system="other", external_id="1", title="T", text="x", acl=["everyone"])
    assert staff.delete(f"{URL}/{connector.pk}").status_code == 204
    from knowledge.models import Record

    assert not Connector.objects.exists() and not ConnectorRun.objects.exists()
    assert list(Record.objects.values_list("source_system", flat=True)) == ["other"]


# ------------------------------------------------------------------ the database says no


def _raw(sql: str, params=()) -> None:
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(sql, params)


@pytest.mark.parametrize(
    "column,value",
    [("kind", "'sharepoint'"), ("name", "'  '"), ("base_url", "'javascript:x'"), ("schedule_minutes", "0")],
)
def test_connector_checks_hold_in_the_database(column, value):
    connector = Connector.objects.create(kind="confluence", name="c", base_url="https://w.example.com")
    with pytest.raises(IntegrityError):
        _raw(f"UPDATE knowledge_connectors SET {column} = {value} WHERE id = %s", [connector.pk])


def test_run_invariants_hold_in_the_database():
    connector = Connector.objects.create(kind="confluence", name="c", base_url="https://w.example.com")
    run = ConnectorRun.objects.create(connector=connector)
    for sql in (
        "UPDATE knowledge_connector_runs SET state = 'succeeded' WHERE id = %s",  # no finished_at
        "UPDATE knowledge_connector_runs SET finished_at = now() WHERE id = %s",  # queued yet finished
        "UPDATE knowledge_connector_runs SET state = 'lost' WHERE id = %s",
        "UPDATE knowledge_connector_runs SET seen = -1 WHERE id = %s",
    ):
        with pytest.raises(IntegrityError):
            _raw(sql, [run.pk])
    with pytest.raises(IntegrityError):  # a second active content run
        _raw(
            "INSERT INTO knowledge_connector_runs (connector_id, kind, state, seen, changed, deleted, failed,"
            " checkpoint, error, attempts) VALUES (%s, 'content', 'running', 0, 0, 0, 0, '{}', '', 0)",
            [connector.pk],
        )
    # the cascade is the database's: a raw DELETE of the connector takes its runs
    _raw("DELETE FROM knowledge_connectors WHERE id = %s", [connector.pk])
    assert not ConnectorRun.objects.exists()
