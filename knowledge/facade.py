"""The Knowledge Store's public interface: the only thing other apps may import from ``knowledge``.

Frozen dataclasses in and out, never querysets (STYLE: PostHog-style facade); the dataclasses and
constants live in ``knowledge.contracts`` and are re-exported here. Every function takes the
caller's :class:`Identity`; ACL is applied inside SQL, never after the fact. Errors are
``achilles.errors.ApplicationError`` subclasses with a ``code`` (``sql_rejected``, ``sql_timeout``,
``record_not_found``, … — the table is in knowledge/README.md).

Signatures are fixed: tests of other apps stand in for exactly these names.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from achilles.errors import ApplicationError
from achilles.llm import EmbeddingProvider
from achilles.metrics import SEARCH_SECONDS, Timed
from knowledge import bulk, selectors, services
from knowledge.bulk import RecordWrite
from knowledge.contracts import (
    ACCESS_KINDS,
    MAX_GRAPH_DEPTH,
    MAX_K,
    MAX_QUERY_CHARS,
    AccessKind,
    Candidate,
    GraphNode,
    GraphResult,
    Identity,
    SearchResult,
    SqlResult,
    Withheld,
)
from knowledge.graph import graph as _graph
from knowledge.search.embedding import search_embedding_config
from knowledge.search.hybrid import search as _search
from knowledge.source_labels import source_label, source_label_overrides
from knowledge.sql import sql_run

__all__ = [
    "ACCESS_KINDS",
    "MAX_GRAPH_DEPTH",
    "MAX_K",
    "MAX_QUERY_CHARS",
    "AccessKind",
    "Candidate",
    "GraphNode",
    "GraphResult",
    "Identity",
    "RecordWrite",
    "SearchResult",
    "SqlResult",
    "Withheld",
    "delete_record",
    "generation",
    "graph",
    "is_empty",
    "records_access_set",
    "records_acl_set",
    "register_access",
    "search",
    "default_embedder",
    "source_label",
    "source_labels",
    "sql",
    "upsert_record",
    "upsert_records",
    "visible_records",
]


def search(query: str, identity: Identity, k: int = 8) -> SearchResult:
    """Lexical + vector lists, ACL-filtered in SQL, fused by RRF (k=60); withheld after the hint policy."""
    # Coordinates of hidden records reach a caller only through the hint policy (rate, audit).
    with Timed(SEARCH_SECONDS, "search"):
        return services.withheld_release(query=query, identity=identity, result=_search(query, identity, k))


def default_embedder() -> tuple[str, EmbeddingProvider] | None:
    """The default embedding model as (its provider's registry name, the provider), or None; read
    as search reads it (memoised for a few seconds)."""
    config = search_embedding_config()
    return (config.kind, config.provider) if config is not None else None


def graph(record_id: int, identity: Identity, depth: int = 1) -> GraphResult:
    """Records linked to ``record_id`` up to ``depth`` (≤ 2) hops, ACL-filtered."""
    with Timed(SEARCH_SECONDS, "graph"):
        return _graph(record_id, identity, depth)


def sql(query: str, identity: Identity) -> SqlResult:
    """One checked SELECT over the KS views under row-level security."""
    with Timed(SEARCH_SECONDS, "sql"):
        return sql_run(query, identity)


def is_empty() -> bool:
    """True until the first chunk is accepted; cheap."""
    return selectors.is_empty()


def generation() -> int:
    """A number that moves on every change of searchable content or ACLs (caches key on it)."""
    return selectors.generation()


def visible_records(record_ids: Sequence[int | None], identity: Identity) -> frozenset[int]:
    """Those of ``record_ids`` that exist and the identity may see now."""
    return selectors.visible_records(record_ids, identity)


def readable_counts_by_source(identity: Identity) -> dict[str, int]:
    """How many records of each source the identity may read (sources it can read nothing of are absent)."""
    return selectors.readable_counts_by_source(identity)


def source_labels(source_systems: Iterable[str]) -> dict[str, str]:
    """The label people read for each source system («Файлы», «Confluence», an admin's own)."""
    overrides = source_label_overrides()
    return {name: source_label(name, overrides) for name in source_systems}


def register_access(record_id: int, identity: Identity, kind: AccessKind, message_id: str | None = None) -> None:
    """Record an access signal (answer | click) for trust scoring; another kind → ``invalid_access_kind``."""
    services.access_register(record_id=record_id, identity=identity, kind=kind, message_id=message_id)


def upsert_record(
    *,
    source_system: str,
    external_id: str,
    title: str,
    text: str,
    acl: Iterable[str],
    acl_also: Iterable[Iterable[str]] = (),
    url: str = "",
    author_principal_id: str | None = None,
    links: Iterable[tuple[str, str]] = (),
    never_hint: bool = False,
    user_writable: bool = True,
) -> int:
    """Create or replace a record from another app (e.g. the hub's Jira mirror); returns its id.

    ``links``: ``(to_external_id, link_type)`` pairs in the same source system; the record's
    outgoing links become exactly these (targets not stored yet are skipped). ``never_hint``:
    the record is never mentioned in a withheld hint. ``user_writable`` (the default): people can write
    this content (a Jira issue, an upload), so it never counts as evidence for a withheld hint;
    pass False only for content no one but admins can write. ``acl_also``: further any-of lists of
    principals («clauses»); a reader must match ``acl`` and every clause (a Confluence page: the
    space permission in ``acl``, each restricted ancestor's and its own restriction a clause).
    """
    pairs = sorted((str(to), str(kind)) for to, kind in links)
    outcome = services.record_upsert(
        source_system=source_system,
        external_id=external_id,
        title=title,
        text=text,
        acl=list(acl),
        acl_also=[list(clause) for clause in acl_also],
        url=url,
        author_principal_id=author_principal_id,
        origin=f"app:{source_system}",
        links_fingerprint=pairs,
        never_hint=never_hint,
        user_writable=user_writable,
    )
    services.record_links_set(record_id=outcome.record_id, source_system=source_system, links=pairs)
    return outcome.record_id


def upsert_records(records: Sequence[RecordWrite]) -> list[services.UpsertOutcome | ApplicationError]:
    """Create or replace many records at once, each as ``upsert_record`` would (a connector's batch):
    one embedding call and a few statements for the lot, in one transaction. Per record its outcome
    (``record_id``, ``status`` created | updated | unchanged), or the validation error that kept it
    out while the others were written. A database error rolls the whole batch back and is raised."""
    return bulk.records_upsert(records)


def records_acl_set(*, source_system: str, external_ids: Iterable[str], acl: Iterable[str]) -> int:
    """Put the records ``(source_system, external_id)`` for the given ids under ``acl`` at once (in the
    caller's transaction; chunks and the content generation follow); returns how many changed.
    Ids without a record are skipped; a bad principal → ``invalid_principal``; an empty ACL → ``empty_acl``."""
    return services.records_acl_set(source_system=source_system, external_ids=list(external_ids), acl=list(acl))


def records_access_set(
    *, source_system: str, access: Mapping[str, tuple[Iterable[str], Iterable[Iterable[str]]]]
) -> int:
    """Set the access of many records at once: ``access`` maps an external id to ``(acl, acl_also)``.
    In the caller's transaction; only records whose access differs are written (the chunks follow
    by trigger, nothing is embedded again, the content generation moves); returns how many changed.
    Ids without a record are skipped; a bad principal → ``invalid_principal``; an empty list →
    ``empty_acl`` (nothing is written then)."""
    return services.records_access_set(source_system=source_system, access=access)


def delete_record(*, source_system: str, external_id: str) -> None:
    """Delete a record (chunks, links and signals go with it); unknown → ``record_not_found``."""
    services.record_delete(source_system=source_system, external_id=external_id)
