"""The connector admin: the token write-only (never in the page), saved through the services."""

import pytest

from knowledge.connectors.models import Connector
from knowledge.connectors.secrets import credentials_decrypt

pytestmark = [pytest.mark.api, pytest.mark.django_db]


def test_admin_creates_a_connector_and_never_shows_its_token(client_for, user_factory):
    client = client_for(user_factory(username="root", is_staff=True, is_superuser=True))
    data = {
        "kind": "confluence",
        "name": "wiki",
        "base_url": "https://wiki.example.com",
        "token": "adm-SECRET-1",
        "spaces": "ENG, HR",
        "schedule_minutes": 60,
        "permission_sync_minutes": 15,
        "enabled": "on",
        "runs-TOTAL_FORMS": 0,
        "runs-INITIAL_FORMS": 0,
    }
    response = client.post("/admin/knowledge/connector/add/", data)
    assert response.status_code == 302, response.content[:2000]
    connector = Connector.objects.get()
    assert connector.scope == {"spaces": ["ENG", "HR"]}
    assert credentials_decrypt(connector.credentials_encrypted) == {"token": "adm-SECRET-1"}
    page = client.get(f"/admin/knowledge/connector/{connector.pk}/change/")
    assert page.status_code == 200 and b"adm-SECRET-1" not in page.content
    assert connector.credentials_encrypted.encode() not in page.content


def test_the_admin_action_cancels_the_connectors_active_runs(client_for, user_factory):
    from django.utils import timezone

    from knowledge.connectors.models import ConnectorRun
    from knowledge.connectors.services import ConnectorFields, connector_create

    client = client_for(user_factory(username="root", is_staff=True, is_superuser=True))
    connector = connector_create(
        actor=None,
        fields=ConnectorFields(
            kind="confluence", name="wiki", base_url="https://w.example.com", token="t", spaces=["E"]
        ),
    )
    active = ConnectorRun.objects.create(connector=connector, kind="content")
    done = ConnectorRun.objects.create(
        connector=connector, kind="permissions", state="succeeded", finished_at=timezone.now()
    )
    # when
    response = client.post(
        "/admin/knowledge/connector/", {"action": "cancel_runs", "_selected_action": [connector.pk]}, follow=True
    )
    # then
    assert response.status_code == 200
    active.refresh_from_db()
    done.refresh_from_db()
    assert active.state == "cancelled" and "root" in active.error and done.state == "succeeded"
