"""The audit trail (issue 10): append-only in the database, retention as the only delete path."""

from __future__ import annotations

import pytest
from django.db import DatabaseError, connection, transaction

from achilles.audit import audit_prune, audit_record
from achilles.models import AuditEvent

pytestmark = pytest.mark.django_db


def _backdate(event_id: int, days: int) -> None:
    # The trigger refuses UPDATE: backdating for the test goes around it as the table owner.
    with connection.cursor() as cursor:
        cursor.execute("ALTER TABLE audit_events DISABLE TRIGGER audit_events_append_only")
        cursor.execute(
            "UPDATE audit_events SET created_at = now() - make_interval(days => %s) WHERE id = %s", [days, event_id]
        )
        cursor.execute("ALTER TABLE audit_events ENABLE TRIGGER audit_events_append_only")


def test_audit_record_keeps_actor_action_target_details_time_and_request_id(user):
    from achilles.middleware import request_id_var

    token = request_id_var.set("req-42")
    try:
        audit_record(actor=user, action="token_created", target="token:7", details={"name": "laptop"})
    finally:
        request_id_var.reset(token)
    event = AuditEvent.objects.get()
    assert (event.actor_id, event.actor, event.action, event.target, event.details, event.request_id) == (
        user.pk,
        "alice",
        "token_created",
        "token:7",
        {"name": "laptop"},
        "req-42",
    )
    assert event.created_at is not None


@pytest.mark.parametrize(
    "statement",
    [
        "UPDATE audit_events SET action = 'nothing_happened'",
        "UPDATE audit_events SET created_at = now() - interval '10 years'",
        "DELETE FROM audit_events",
    ],
)
def test_raw_sql_cannot_rewrite_or_delete_the_trail(user, statement):
    audit_record(actor=user, action="token_revoked", target="token:1")
    with pytest.raises(DatabaseError, match="append-only"), transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(statement)
    assert AuditEvent.objects.filter(action="token_revoked").count() == 1


def test_the_retention_setting_alone_does_not_open_recent_rows(user):
    audit_record(actor=user, action="token_revoked", target="token:1")
    with pytest.raises(DatabaseError, match="append-only"), transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SELECT set_config('achilles.audit_retention_days', '1', true)")
        cursor.execute("DELETE FROM audit_events")
    with pytest.raises(DatabaseError, match="append-only"), transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SELECT set_config('achilles.audit_retention_days', '0', true)")
        cursor.execute("DELETE FROM audit_events")
    assert AuditEvent.objects.count() == 1


def test_retention_deletes_only_what_is_older_than_the_horizon(user):
    audit_record(actor=user, action="old", target="a")
    audit_record(actor=user, action="recent", target="b")
    _backdate(AuditEvent.objects.get(action="old").pk, 400)
    _backdate(AuditEvent.objects.get(action="recent").pk, 10)

    assert audit_prune(older_than_days=365) == 1
    assert list(AuditEvent.objects.values_list("action", flat=True)) == ["recent"]
    with pytest.raises(ValueError):
        audit_prune(older_than_days=0)


def test_the_retention_task_uses_the_setting(user, settings):
    from achilles.tasks import audit_retention_task

    audit_record(actor=user, action="old", target="a")
    _backdate(AuditEvent.objects.get().pk, 3)
    settings.AUDIT_RETENTION_DAYS = 5
    assert audit_retention_task() == 0
    settings.AUDIT_RETENTION_DAYS = 2
    assert audit_retention_task() == 1


def test_the_retention_job_is_scheduled():
    from django.conf import settings

    assert settings.PLATFORM_PERIODIC_JOBS["platform.audit_retention"]["task"] == "achilles.tasks.audit_retention_task"


def test_admin_shows_the_trail_read_only_with_filters(client_for, admin_user):
    audit_record(actor=admin_user, action="agent_admin_paused", target="agent:3")
    client = client_for(admin_user)
    listing = client.get("/admin/achilles/auditevent/?action=agent_admin_paused")
    assert listing.status_code == 200 and b"agent:3" in listing.content
    event = AuditEvent.objects.get()
    assert client.get("/admin/achilles/auditevent/add/").status_code == 403
    assert client.post(f"/admin/achilles/auditevent/{event.pk}/delete/", {"post": "yes"}).status_code == 403
    assert client.post(f"/admin/achilles/auditevent/{event.pk}/change/", {"action": "x"}).status_code == 403
    assert AuditEvent.objects.get().action == "agent_admin_paused"
