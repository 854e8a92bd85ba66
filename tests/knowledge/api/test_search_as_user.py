"""Search as another user (issue 10, finding 12): a dedicated permission, and every preview audited."""

from __future__ import annotations

import json

import pytest
from django.contrib.auth.models import Permission

from achilles.models import AuditEvent

pytestmark = pytest.mark.django_db


def _preview(client, as_user_id, query="бюджет отпуска"):
    return client.post(
        "/api/knowledge/search",
        data=json.dumps({"query": query, "as_user_id": as_user_id}),
        content_type="application/json",
    )


@pytest.fixture
def finance(make_record, user_factory):
    fin = user_factory(username="fin", groups=["finance"])
    make_record("fin.md", "Бюджет на отпуска 5 млн.", acl=["group:finance"])
    return fin


def test_staff_without_the_permission_cannot_search_as_someone_else(client_for, user_factory, finance):
    """Failed before the fix: any is_staff account got 200 and someone else's results, untraced."""
    staff = user_factory(username="helpdesk", is_staff=True)
    response = _preview(client_for(staff), finance.pk)
    assert response.status_code == 403
    assert response.json()["code"] == "permission_denied"
    assert not AuditEvent.objects.exists()


def test_the_permission_allows_it_and_the_preview_is_audited(client_for, user_factory, finance):
    staff = user_factory(username="auditor", is_staff=True)
    staff.user_permissions.add(Permission.objects.get(codename="search_as_user", content_type__app_label="knowledge"))
    response = _preview(client_for(staff), finance.pk)
    assert response.status_code == 200
    assert "Бюджет на отпуска 5 млн." in [c["text"] for c in response.json()["candidates"]]
    event = AuditEvent.objects.get(action="search_as_user")
    assert (event.actor, event.target, event.details["query"]) == ("auditor", f"user:{finance.pk}", "бюджет отпуска")
    assert event.request_id  # the request's X-Request-ID


def test_the_admin_preview_needs_the_permission_and_is_audited(client_for, user_factory, admin_user, finance):
    staff = user_factory(username="helpdesk", is_staff=True)
    staff.user_permissions.add(Permission.objects.get(codename="view_record", content_type__app_label="knowledge"))
    url = f"/admin/knowledge/record/search-preview/?query=бюджет&user={finance.pk}&k=5"
    denied = client_for(staff).get(url)
    assert denied.status_code == 200 and "Бюджет на отпуска" not in denied.content.decode()
    assert not AuditEvent.objects.exists()

    allowed = client_for(admin_user).get(url)
    assert allowed.status_code == 200 and "Бюджет на отпуска" in allowed.content.decode()
    assert AuditEvent.objects.get(action="search_as_user").actor == "root"
