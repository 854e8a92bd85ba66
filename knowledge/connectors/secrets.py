"""Connector credentials at rest: Fernet (AES-128-CBC + HMAC-SHA256) with a key from the environment.

``ACHILLES_SECRET_KEY_CONNECTORS`` is a Fernet key (``Fernet.generate_key()``). Without it, a dev
install derives one from ``SECRET_KEY`` (HKDF, so the two keys never coincide); production refuses
to start without it (the system check ``knowledge.E001``). Plain credentials never leave this module
except to the connector's HTTP client.
"""

from __future__ import annotations

import base64
import json

from cryptography.fernet import Fernet, InvalidToken
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from django.conf import settings
from django.core.checks import Error, register

ENV_VAR = "ACHILLES_SECRET_KEY_CONNECTORS"


class CredentialsUnreadable(Exception):
    """The stored credentials do not decrypt with the configured key (the key changed)."""


def _fernet() -> Fernet:
    key = getattr(settings, "CONNECTOR_SECRET_KEY", "")
    if not key:
        derived = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=b"achilles connectors").derive(
            settings.SECRET_KEY.encode()
        )
        key = base64.urlsafe_b64encode(derived).decode()
    return Fernet(key)


def credentials_encrypt(credentials: dict[str, str]) -> str:
    return _fernet().encrypt(json.dumps(credentials, sort_keys=True).encode()).decode()


def credentials_decrypt(token: str) -> dict[str, str]:
    if not token:
        return {}
    try:
        return json.loads(_fernet().decrypt(token.encode()))
    except InvalidToken as exc:
        raise CredentialsUnreadable(f"connector credentials do not decrypt with {ENV_VAR}") from exc


@register()
def connector_key_check(app_configs, **kwargs) -> list[Error]:
    """Production needs its own credentials key; a malformed key is an error anywhere."""
    key = getattr(settings, "CONNECTOR_SECRET_KEY", "")
    if not key:
        if getattr(settings, "PRODUCTION", False):
            return [
                Error(
                    f"{ENV_VAR} is not set: connector credentials cannot be encrypted at rest",
                    hint="Set it to the output of: python -c 'from cryptography.fernet import Fernet; "
                    "print(Fernet.generate_key().decode())'",
                    id="knowledge.E001",
                )
            ]
        return []
    try:
        Fernet(key)
    except (ValueError, TypeError):
        return [Error(f"{ENV_VAR} is not a Fernet key (32 url-safe base64 bytes)", id="knowledge.E002")]
    return []
