"""Bearer secrets: one way to mint them and one hash to keep at rest (API tokens, sync-agent tokens)."""

from __future__ import annotations

import hashlib
import secrets


def token_hash(raw: str) -> str:
    # Tokens carry 256 bits of randomness, so a fast unsalted hash is enough at rest.
    return hashlib.sha256(raw.encode()).hexdigest()


def token_mint(*, kind: str) -> tuple[str, str]:
    """A new secret ``<kind><prefix>_<256 random bits>`` and its public ``prefix`` (shown in lists)."""
    prefix = secrets.token_hex(4)
    return prefix, f"{kind}{prefix}_{secrets.token_urlsafe(32)}"
