"""The Knowledge Store's public interface: the only thing other apps may import from ``knowledge``.

Frozen dataclasses in and out, never querysets (STYLE: PostHog-style facade). Every function
takes the caller's :class:`Identity`; ACL is applied inside SQL, never after the fact.
Errors are ``achilles.errors.ApplicationError`` subclasses with a ``code``
(``sql_rejected``, ``sql_timeout``, ``not_found``, …).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Literal

from achilles.identity import PUBLIC, principals_for


@dataclass(frozen=True)
class Identity:
    """Whose rights a KS call runs under: a set of principals (SPEC PLAT-3)."""

    principals: frozenset[str]
    user_id: int | None = None

    @classmethod
    def for_user(cls, user) -> Identity:
        principals = frozenset(principals_for(user))
        user_id = user.pk if getattr(user, "is_authenticated", False) else None
        return cls(principals=principals, user_id=user_id)

    @classmethod
    def anonymous(cls) -> Identity:
        return cls(principals=frozenset({PUBLIC}), user_id=None)

    def cache_key(self) -> str:
        """A stable digest of the principal set (equal identities → equal keys)."""
        return hashlib.sha256("\x1f".join(sorted(self.principals)).encode()).hexdigest()[:32]


@dataclass(frozen=True)
class Candidate:
    """One retrieved chunk the identity may see, in RRF order (rank 1 = best)."""

    record_id: int
    chunk_id: int
    title: str
    url: str
    source_system: str
    text: str
    score: float
    rank: int


@dataclass(frozen=True)
class Withheld:
    """A relevant record the identity may NOT see: coordinates only, never id/title/url/text."""

    source_system: str
    author_principal_id: str | None


@dataclass(frozen=True)
class SearchResult:
    candidates: tuple[Candidate, ...]
    withheld: tuple[Withheld, ...]
    is_empty: bool


@dataclass(frozen=True)
class GraphNode:
    record_id: int
    title: str
    url: str
    source_system: str
    depth: int
    link_type: str
    via_record_id: int
    # Added: the link's direction as seen from ``via_record_id`` ("out": via → this node).
    direction: Literal["out", "in"] = "out"


@dataclass(frozen=True)
class GraphResult:
    root_record_id: int
    nodes: tuple[GraphNode, ...]


@dataclass(frozen=True)
class SqlResult:
    columns: tuple[str, ...]
    rows: tuple[tuple, ...]
    truncated: bool


AccessKind = Literal["answer", "click"]

# ``search`` refuses longer queries (``query_too_long``); callers that build queries clip to it.
MAX_QUERY_CHARS = 2000

# The implementation lives in knowledge/services.py and knowledge/selectors.py; these names
# are the contract (signatures fixed; tests of other apps stub exactly these).
# Added: the content generation, for caches of search results (the Query Engine's candidate cache).
# Added: which records an identity may see now (stored citations are shown only for those).
# Added: writes for apps that feed the store (the hub's Jira mirror → source_system="jira").
from knowledge.store import (  # noqa: E402,F401  # noqa: E402,F401
    delete_record,
    generation,  # noqa: E402,F401
    graph,
    is_empty,
    register_access,
    search,
    sql,
    upsert_record,
    visible_records,  # noqa: E402,F401
)
