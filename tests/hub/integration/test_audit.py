"""The hub's settings and publications are in the audit trail (issue 10: «the hub's settings and
publications when they land»)."""

from __future__ import annotations

import pytest

from achilles.models import AuditEvent

pytestmark = pytest.mark.django_db


def test_a_hub_setting_change_is_audited(hub_staff):
    from hub.services import settings_set

    version = settings_set(user=hub_staff, key="poll_interval_seconds", value=30)
    event = AuditEvent.objects.get(action="hub_setting_changed")
    assert (event.actor, event.target) == ("hubadmin", "hub_setting:poll_interval_seconds")
    assert event.details == {"value": 30, "settings_version": version}


def test_a_publication_is_audited(hub_staff):
    from hub.protocol import publication_create

    publication = publication_create(version=3, artifact=b"\x1f\x8bpayload", user=hub_staff)
    event = AuditEvent.objects.get(action="hub_publication_created")
    assert (event.actor, event.target, event.details["sha256"]) == ("hubadmin", "publication:v3", publication.sha256)
