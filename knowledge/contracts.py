"""The Knowledge Store's contract: the frozen dataclasses and constants its facade speaks in.

Plain data, no ORM: the implementation modules (selectors, search, graph, sql, services) import
this module, and ``knowledge.facade`` re-exports it for other apps — so nothing in the store
imports the facade back.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, get_args

from achilles.identity import PUBLIC, principals_for

if TYPE_CHECKING:
    from django.contrib.auth.models import AbstractBaseUser, AnonymousUser

# ``search`` refuses longer queries (``query_too_long``); callers that build queries clip to it.
MAX_QUERY_CHARS = 2000
# ``search``'s ``k`` is 1…MAX_K (``invalid_k``); ``graph``'s ``depth`` 1…MAX_GRAPH_DEPTH (``invalid_depth``).
MAX_K = 50
MAX_GRAPH_DEPTH = 2

# What a use of a record was (KS-8): cited in an answer, or its citation clicked.
AccessKind = Literal["answer", "click"]
ACCESS_KINDS: tuple[AccessKind, ...] = get_args(AccessKind)


@dataclass(frozen=True)
class Identity:
    """Whose rights a KS call runs under: a set of principals (SPEC PLAT-3)."""

    principals: frozenset[str]
    user_id: int | None = None

    @classmethod
    def for_user(cls, user: AbstractBaseUser | AnonymousUser) -> Identity:
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
    """``search``'s answer: visible candidates, hidden coordinates, and whether the store is empty."""

    candidates: tuple[Candidate, ...]
    withheld: tuple[Withheld, ...]
    is_empty: bool


@dataclass(frozen=True)
class GraphNode:
    """A record reached from the root by ``depth`` links, none of them through a hidden record."""

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
    """``graph``'s answer: the root and the records linked to it."""

    root_record_id: int
    nodes: tuple[GraphNode, ...]


@dataclass(frozen=True)
class SqlResult:
    """``sql``'s answer: column names and at most the row cap of rows (``truncated`` beyond)."""

    columns: tuple[str, ...]
    rows: tuple[tuple[Any, ...], ...]
    truncated: bool
