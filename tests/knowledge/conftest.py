"""Fixtures of the Knowledge Store tests: records through the real service, the hash embedder."""

from __future__ import annotations

import pytest

from knowledge.facade import Identity


@pytest.fixture
def hash_embedder(model_factory):
    """Make the deterministic hash embedder the default embedding model (vector search on)."""
    return model_factory(name="hash-384", provider="hash", kind="embedding", is_default=True, options={"dim": 384})


@pytest.fixture
def make_record(db):
    """``make_record(external_id, text, acl=[...], **fields)`` → record id, via ``record_upsert``
    (curated, as an admin's ingest writes it, unless ``user_writable=True``)."""
    from knowledge.services import record_upsert

    def make(
        external_id: str,
        text: str,
        *,
        acl=("everyone",),
        title=None,
        source_system="files",
        author=None,
        url="",
        origin="test",
        user_writable=False,
    ) -> int:
        outcome = record_upsert(
            source_system=source_system,
            external_id=external_id,
            title=title or external_id,
            text=text,
            acl=list(acl),
            url=url,
            author_principal_id=author,
            origin=origin,
            user_writable=user_writable,
        )
        return outcome.record_id

    return make


def identity_of(*principals: str, user_id: int | None = None) -> Identity:
    return Identity(principals=frozenset(principals), user_id=user_id)
