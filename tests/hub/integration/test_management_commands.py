"""manage.py hub_sync_agent and hub_publish."""

import hashlib
import io

import pytest
from django.core.management import CommandError, call_command

from hub.models import Publication
from hub.protocol import sync_agent_authenticate

pytestmark = pytest.mark.django_db


def test_hub_sync_agent_prints_a_working_token_once(db):
    out = io.StringIO()
    call_command("hub_sync_agent", "dc-1", stdout=out, stderr=io.StringIO())
    token = out.getvalue().strip()
    assert sync_agent_authenticate(token).name == "dc-1"
    with pytest.raises(CommandError):
        call_command("hub_sync_agent", "dc-1", stdout=io.StringIO(), stderr=io.StringIO())
    rotated = io.StringIO()
    call_command("hub_sync_agent", "dc-1", "--rotate", stdout=rotated, stderr=io.StringIO())
    assert sync_agent_authenticate(token) is None and sync_agent_authenticate(rotated.getvalue().strip()).name == "dc-1"


def test_hub_publish_stores_the_artifact_and_its_sha256(tmp_path):
    artifact = tmp_path / "syncagent-7.tar.gz"
    artifact.write_bytes(b"\x1f\x8b artifact")
    out = io.StringIO()
    call_command("hub_publish", "7", str(artifact), "--notes", "retry loop", stdout=out)
    digest = hashlib.sha256(b"\x1f\x8b artifact").hexdigest()
    assert digest in out.getvalue()
    assert Publication.objects.get(version=7).notes == "retry loop"
    with pytest.raises(CommandError, match="not newer"):
        call_command("hub_publish", "7", str(artifact), stdout=io.StringIO())
    with pytest.raises(CommandError, match="no such file"):
        call_command("hub_publish", "8", str(tmp_path / "missing.tar.gz"), stdout=io.StringIO())
