"""The audit of identity changes (``achilles.directory.audit.record_identity_change``) and the
admin's «identity events» filter."""

from __future__ import annotations

import pytest
from django.test import Client

from achilles import audit
from achilles.directory.audit import record_identity_change
from achilles.models import AuditEvent, User

pytestmark = pytest.mark.django_db


def test_one_event_per_kind_of_change_and_none_for_no_change():
    user = User.objects.create_user("ivan")
    record_identity_change(user=user, actor="directory_sync", via="oidc")
    assert not AuditEvent.objects.filter(target=f"user:{user.pk}").exists()
    record_identity_change(
        user=user,
        actor=user,
        via="oidc",
        source="oidc",
        groups_added=["b", "a"],
        groups_removed=["c"],
        groups_unknown="overage",
        details={"provider": "entra"},
    )
    events = {e.action: e.details for e in AuditEvent.objects.filter(target=f"user:{user.pk}")}
    assert events[audit.IDENTITY_SOURCE_CHANGED] == {
        "username": "ivan",
        "via": "oidc",
        "provider": "entra",
        "source": "oidc",
    }
    assert events[audit.DIRECTORY_GROUPS_CHANGED]["added"] == ["a", "b"]
    assert events[audit.DIRECTORY_GROUPS_CHANGED]["removed"] == ["c"]
    assert events[audit.IDENTITY_GROUPS_UNKNOWN]["reason"] == "overage"


def test_admin_lists_identity_events_only_under_the_filter():
    admin = User.objects.create_superuser("root", password="x" * 12)
    user = User.objects.create_user("olga")
    record_identity_change(user=user, actor="scim", via="scim", groups_added=["sales"])
    audit.audit_record(actor=admin, action=audit.TOKEN_CREATED, target="token:1")
    client = Client()
    client.force_login(admin)
    page = client.get("/admin/achilles/auditevent/?kind=identity")
    assert page.status_code == 200
    assert [e.action for e in page.context["cl"].result_list] == [audit.DIRECTORY_GROUPS_CHANGED]
    everything = client.get("/admin/achilles/auditevent/")
    assert {e.action for e in everything.context["cl"].result_list} >= {
        audit.DIRECTORY_GROUPS_CHANGED,
        audit.TOKEN_CREATED,
    }
