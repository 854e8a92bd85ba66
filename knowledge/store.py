"""Implementation behind ``knowledge.facade``: thin entry points over services and selectors.

Imports are inside the functions because ``knowledge.facade`` imports this module at its end,
and the selectors import the facade's dataclasses: this keeps any import order working.
"""

from __future__ import annotations


def search(query: str, identity, k: int = 8):
    """-> SearchResult: lexical + vector lists, ACL-filtered in SQL, fused by RRF (k=60)."""
    from knowledge.selectors import search as _search
    from knowledge.services import withheld_release

    # Coordinates of hidden records reach a caller only through the hint policy (rate, audit).
    return withheld_release(query=query, identity=identity, result=_search(query, identity, k))


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


def generation() -> int:
    """A number that moves on every change of searchable content or ACLs (caches key on it)."""
    from knowledge.selectors import generation as _generation

    return _generation()


def visible_records(record_ids, identity) -> frozenset:
    """Those of ``record_ids`` that exist and the identity may see now."""
    from knowledge.selectors import visible_records as _visible_records

    return _visible_records(record_ids, identity)


def register_access(record_id: int, identity, kind: str, message_id: str | None = None) -> None:
    """Record an access signal (answer | click) for trust scoring."""
    from knowledge.services import access_register

    access_register(record_id=record_id, identity=identity, kind=kind, message_id=message_id)


def upsert_record(*, source_system: str, external_id: str, title: str, text: str, acl, url: str = "",
                  author_principal_id: str | None = None, links=(), never_hint: bool = False) -> int:
    """Create or replace a record from another app (e.g. the hub's Jira mirror); returns its id.

    ``links``: ``(to_external_id, link_type)`` pairs in the same source system; the record's
    outgoing links become exactly these (targets not stored yet are skipped). ``never_hint``:
    the record is never mentioned in a withheld hint.
    """
    from knowledge.services import record_links_set, record_upsert

    links = sorted((str(to), str(kind)) for to, kind in links)
    outcome = record_upsert(source_system=source_system, external_id=external_id, title=title, text=text,
                            acl=list(acl), url=url, author_principal_id=author_principal_id,
                            origin=f"app:{source_system}", links_fingerprint=links, never_hint=never_hint)
    record_links_set(record_id=outcome.record_id, source_system=source_system, links=links)
    return outcome.record_id


def delete_record(*, source_system: str, external_id: str) -> None:
    """Delete a record (chunks, links and signals go with it); unknown → NotFound."""
    from knowledge.services import record_delete

    record_delete(source_system=source_system, external_id=external_id)
