"""The credentials key: production without it refuses to start (system check), a bad key is an error,
a changed key makes stored credentials unreadable (never silently empty)."""

import pytest
from cryptography.fernet import Fernet

from knowledge.connectors.secrets import (
    CredentialsUnreadable,
    connector_key_check,
    credentials_decrypt,
    credentials_encrypt,
)

pytestmark = pytest.mark.unit


def test_production_without_the_key_fails_the_system_check(settings):
    settings.PRODUCTION, settings.CONNECTOR_SECRET_KEY = True, ""
    assert [e.id for e in connector_key_check(None)] == ["knowledge.E001"]
    settings.PRODUCTION = False
    assert connector_key_check(None) == []


def test_a_malformed_key_is_an_error_anywhere(settings):
    settings.CONNECTOR_SECRET_KEY = "not-a-key"
    assert [e.id for e in connector_key_check(None)] == ["knowledge.E002"]


def test_round_trip_and_a_changed_key(settings):
    settings.CONNECTOR_SECRET_KEY = Fernet.generate_key().decode()
    assert connector_key_check(None) == []
    token = credentials_encrypt({"token": "pat-123"})
    assert "pat-123" not in token and credentials_decrypt(token) == {"token": "pat-123"}
    settings.CONNECTOR_SECRET_KEY = Fernet.generate_key().decode()
    with pytest.raises(CredentialsUnreadable):
        credentials_decrypt(token)


def test_the_dev_key_is_derived_from_secret_key(settings):
    settings.CONNECTOR_SECRET_KEY = ""
    token = credentials_encrypt({"token": "t"})
    assert credentials_decrypt(token) == {"token": "t"}
