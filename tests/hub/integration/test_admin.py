"""The hub in the Django admin: pages render, actions go through the services, tokens shown once."""

import hashlib

import pytest
from django.contrib.messages import get_messages
from django.core.files.uploadedfile import SimpleUploadedFile

from hub import protocol, services
from hub.models import Command, HubSetting, Publication, SyncAgent

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_client(client, admin_user):
    client.force_login(admin_user)
    return client


def _messages(response) -> list[str]:
    return [str(m) for m in get_messages(response.wsgi_request)]


def test_every_hub_admin_page_renders(admin_client, mirror):
    from django.core.management import call_command

    call_command("demo_hub")
    for name in (
        "mirrorissue",
        "issuenote",
        "batch",
        "command",
        "syncagent",
        "syncagentcontact",
        "ratelimitevent",
        "syncrun",
        "publication",
        "hubsetting",
    ):
        assert admin_client.get(f"/admin/hub/{name}/").status_code == 200, name
    from hub.models import MirrorIssue

    issue = MirrorIssue.objects.get(key="AURORA-9001")
    page = admin_client.get(f"/admin/hub/mirrorissue/{issue.pk}/change/")
    assert page.status_code == 200 and "AURORA-9002" in page.content.decode()


def test_a_sync_agent_added_in_the_admin_shows_its_token_once(admin_client):
    response = admin_client.post("/admin/hub/syncagent/add/", {"name": "dc-agent"}, follow=True)
    assert response.status_code == 200
    token = next(m for m in _messages(response) if "показывается один раз" in m).rsplit(" ", 1)[-1]
    assert token.startswith("achsync_") and protocol.sync_agent_authenticate(token).name == "dc-agent"
    assert SyncAgent.objects.get(name="dc-agent").token_hash == hashlib.sha256(token.encode()).hexdigest()


def test_publication_upload_stores_bytes_and_digest(admin_client):
    artifact = SimpleUploadedFile("syncagent.tar.gz", b"\x1f\x8bpayload", content_type="application/gzip")
    response = admin_client.post(
        "/admin/hub/publication/add/", {"version": 7, "notes": "v7", "artifact_file": artifact}, follow=True
    )
    assert response.status_code == 200
    publication = Publication.objects.get(version=7)
    assert bytes(publication.artifact) == b"\x1f\x8bpayload"
    assert publication.sha256 == hashlib.sha256(b"\x1f\x8bpayload").hexdigest()
    older = SimpleUploadedFile("a.tar.gz", b"x")
    again = admin_client.post("/admin/hub/publication/add/", {"version": 6, "notes": "", "artifact_file": older})
    assert again.status_code == 200 and "новее опубликованной v7" in again.content.decode()
    assert Publication.objects.count() == 1


def test_command_actions_go_through_the_services(admin_client, admin_user, sync_agent):
    batch = services.batch_create(
        user=admin_user, title="t", commands=[{"type": "ensure_comment", "key": "A-1", "body": "x"}]
    )
    claimed = protocol.sync_agent_claim(sync_agent=sync_agent, version=6, launcher_version=None, max_commands=1)[
        "commands"
    ][0]
    plain = admin_client.post(
        "/admin/hub/command/", {"action": "cancel_commands", "_selected_action": [claimed["id"]]}, follow=True
    )
    assert any("уже у агента" in m for m in _messages(plain))
    assert Command.objects.get(pk=claimed["id"]).state == "claimed"
    admin_client.post("/admin/hub/command/", {"action": "force_cancel_commands", "_selected_action": [claimed["id"]]})
    assert Command.objects.get(pk=claimed["id"]).force_cancelled
    admin_client.post("/admin/hub/command/", {"action": "retry_commands", "_selected_action": [claimed["id"]]})
    assert Command.objects.filter(batch__retry_of_id=claimed["id"]).count() == 2
    admin_client.post("/admin/hub/batch/", {"action": "cancel_batches", "_selected_action": [batch.id]})
    assert not Command.objects.filter(batch_id=batch.id, state="queued").exists()


def test_settings_are_validated_and_bump_the_version(admin_client):
    from hub.selectors import settings_version_get

    before = settings_version_get()
    bad = admin_client.post("/admin/hub/hubsetting/add/", {"key": "lease_seconds", "value": "5"})
    assert bad.status_code == 200 and not HubSetting.objects.exists()
    admin_client.post("/admin/hub/hubsetting/add/", {"key": "lease_seconds", "value": "60"})
    assert HubSetting.objects.get(key="lease_seconds").value == 60 and settings_version_get() == before + 1
