"""Implementation behind ``knowledge.facade``: thin entry points over services and selectors.

Imports are inside the functions because ``knowledge.facade`` imports this module at its end,
and the selectors import the facade's dataclasses: this keeps any import order working.
"""

from __future__ import annotations


def search(query: str, identity, k: int = 8):
    """-> SearchResult: lexical + vector lists, ACL-filtered in SQL, fused by RRF (k=60)."""
    from knowledge.selectors import search as _search

    return _search(query, identity, k)


def graph(record_id: int, identity, depth: int = 1):
    """-> GraphResult: records linked to ``record_id`` up to ``depth`` (≤ 2), ACL-filtered."""
    from knowledge.selectors import graph as _graph

    return _graph(record_id, identity, depth)


def sql(query: str, identity):
    """-> SqlResult: one checked SELECT over the KS views under row-level security."""
    from knowledge.sql import sql_run

    return sql_run(query, identity)


def is_empty() -> bool:
    """True until the first chunk is accepted; cheap."""
    from knowledge.selectors import is_empty as _is_empty

    return _is_empty()


def register_access(record_id: int, identity, kind: str, message_id: str | None = None) -> None:
    """Record an access signal (answer | click) for trust scoring."""
    from knowledge.services import access_register

    access_register(record_id=record_id, identity=identity, kind=kind, message_id=message_id)
