"""Implementation behind ``knowledge.facade`` (being built: see issue «Knowledge Store»)."""

from __future__ import annotations


def search(query: str, identity, k: int = 8):
    """-> SearchResult: lexical + vector lists, ACL-filtered in SQL, fused by RRF (k=60)."""
    raise NotImplementedError


def graph(record_id: int, identity, depth: int = 1):
    """-> GraphResult: records linked to ``record_id`` up to ``depth`` (≤ 2), ACL-filtered."""
    raise NotImplementedError


def sql(query: str, identity):
    """-> SqlResult: one checked SELECT over the KS views under row-level security."""
    raise NotImplementedError


def is_empty() -> bool:
    """True until the first chunk is accepted; cheap."""
    raise NotImplementedError


def register_access(record_id: int, identity, kind: str, message_id: str | None = None) -> None:
    """Record an access signal (answer | click) for trust scoring."""
    raise NotImplementedError
