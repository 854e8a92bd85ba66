"""`manage.py connectors_demo` (run by `make run`): the demo connector is made once, follows the
environment's URL and token on the next start, and each start queues one content sync."""

import pytest
from django.core.management import CommandError, call_command

from knowledge.connectors.models import Connector, ConnectorRun
from knowledge.connectors.secrets import credentials_decrypt

pytestmark = [pytest.mark.django_db, pytest.mark.integration]


def test_the_demo_connector_is_made_once_and_follows_the_environment(monkeypatch):
    monkeypatch.setenv("CONFLUENCE_URL", "http://127.0.0.1:8390/confluence")
    monkeypatch.setenv("CONFLUENCE_TOKEN", "first-pat")
    call_command("connectors_demo")
    monkeypatch.setenv("CONFLUENCE_URL", "http://127.0.0.1:8490/confluence")
    monkeypatch.setenv("CONFLUENCE_TOKEN", "second-pat")
    call_command("connectors_demo")

    connector = Connector.objects.get()
    assert connector.base_url == "http://127.0.0.1:8490/confluence"
    assert "second-pat" in credentials_decrypt(connector.credentials_encrypted).values()
    assert connector.scope["spaces"] == ["KB"]
    # the first start's sync is still queued, so the second queues none of its own
    assert ConnectorRun.objects.filter(connector=connector, kind="content").count() == 1


def test_without_a_site_it_says_what_is_missing(monkeypatch):
    monkeypatch.delenv("CONFLUENCE_URL", raising=False)
    with pytest.raises(CommandError, match="CONFLUENCE_URL"):
        call_command("connectors_demo")
    assert not Connector.objects.exists()
