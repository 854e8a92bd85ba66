"""The lexical candidate list: PostgreSQL full text, ranked by coordination level, ACL in the SQL.

Coordination-level matching: the query's lexemes (stemmed by PostgreSQL, stop words gone) are
matched first all together (AND), then «all but one», … down to any one (OR); a level runs only
while a list is still short of N, and rows of a higher level rank above rows of a lower one
(ts_rank orders within a level). So a precise query ranks a handful of rows, and the costly «any
word» level runs only when nothing better fills the list.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import combinations
from math import comb
from typing import Any

from django.db.backends.utils import CursorWrapper

from knowledge.models import TEXT_SEARCH_CONFIG

MAX_QUERY_TERMS = 32
MAX_LEVEL_CLAUSES = 20

LEXEMES_SQL = f"""
SELECT lexeme FROM unnest(to_tsvector('{TEXT_SEARCH_CONFIG}', %s))
ORDER BY positions[1], lexeme LIMIT {MAX_QUERY_TERMS}
"""
# The first level (all lexemes: exactly plainto_tsquery) and the query's lexemes in one statement.
LEXICAL_FIRST_SQL = f"""
WITH q AS (SELECT plainto_tsquery('{TEXT_SEARCH_CONFIG}', %(query)s) AS query),
m AS MATERIALIZED (
    SELECT c.id, ts_rank(c.tsv, q.query, 1) AS score, c.acl && %(principals)s::text[] AS visible
    FROM knowledge_chunks c, q
    WHERE c.tsv @@ q.query
)
(SELECT true AS filtered, id, visible, NULL::text[] AS lexemes FROM m WHERE visible
 ORDER BY score DESC, id LIMIT %(n_visible)s)
UNION ALL
(SELECT false, id, visible, NULL FROM m ORDER BY score DESC, id LIMIT %(n_all)s)
UNION ALL
SELECT NULL, NULL, NULL,
       ARRAY(SELECT lexeme FROM unnest(to_tsvector('{TEXT_SEARCH_CONFIG}', %(query)s))
             ORDER BY positions[1], lexeme LIMIT {MAX_QUERY_TERMS})
"""

# One scan of a level's matches feeds both lists: visible rows (the candidates) and all rows
# (the unfiltered ranking used for withheld).
LEXICAL_BOTH_SQL = """
WITH m AS MATERIALIZED (
    SELECT c.id, ts_rank(c.tsv, %(q)s::tsquery, 1) AS score, c.acl && %(principals)s::text[] AS visible
    FROM knowledge_chunks c
    WHERE c.tsv @@ %(q)s::tsquery AND NOT (c.id = ANY(%(seen)s))
)
(SELECT true AS filtered, id, visible FROM m WHERE visible ORDER BY score DESC, id LIMIT %(n_visible)s)
UNION ALL
(SELECT false, id, visible FROM m ORDER BY score DESC, id LIMIT %(n_all)s)
"""
# Only the visible list is short: the ACL GIN index narrows the matches first (BitmapAnd).
LEXICAL_VISIBLE_SQL = """
SELECT true AS filtered, c.id, true AS visible
FROM knowledge_chunks c
WHERE c.tsv @@ %(q)s::tsquery AND c.acl && %(principals)s::text[] AND NOT (c.id = ANY(%(seen)s))
ORDER BY ts_rank(c.tsv, %(q)s::tsquery, 1) DESC, c.id
LIMIT %(n_visible)s
"""
# Only the unfiltered list is short.
LEXICAL_ALL_SQL = """
SELECT false AS filtered, c.id, c.acl && %(principals)s::text[] AS visible
FROM knowledge_chunks c
WHERE c.tsv @@ %(q)s::tsquery AND NOT (c.id = ANY(%(seen)s))
ORDER BY ts_rank(c.tsv, %(q)s::tsquery, 1) DESC, c.id
LIMIT %(n_all)s
"""


@dataclass
class SideLists:
    """The lexical side's visible top-N and unfiltered top-k (chunk ids, best first)."""

    visible: list[int]
    unfiltered: list[int]
    hidden: set[int]


def tsquery_literal(lexeme: str) -> str:
    return "'" + lexeme.replace("\\", "\\\\").replace("'", "''") + "'"


def coordination_levels(lexemes: Sequence[str]) -> list[str]:
    """tsquery texts for «all n terms», «any n-1», … «any one»; levels with too many clauses are skipped."""
    quoted = [tsquery_literal(lexeme) for lexeme in lexemes]
    n = len(quoted)
    levels = []
    for m in range(n, 0, -1):
        if m == 1:
            levels.append(" | ".join(quoted))
        elif comb(n, m) <= MAX_LEVEL_CLAUSES:
            levels.append(" | ".join("(" + " & ".join(combo) + ")" for combo in combinations(quoted, m)))
    return levels


def query_lexemes(cursor: CursorWrapper, query: str) -> list[str]:
    """The query's lexemes in order of appearance (at most MAX_QUERY_TERMS)."""
    cursor.execute(LEXEMES_SQL, [query])
    return [row[0] for row in cursor.fetchall()]


def lexical_lists(cursor: CursorWrapper, query: str, principals: list[str], depth: int, k: int) -> SideLists | None:
    """Visible top-``depth`` and unfiltered top-``k`` (for withheld), level by level; None when
    the query has no lexemes. (``search`` sends the first level with other statements: see
    ``lexical_first`` and ``lexical_levels``.)"""
    cursor.execute(LEXICAL_FIRST_SQL, {"query": query, "principals": principals, "n_visible": depth, "n_all": k})
    side, lexemes = lexical_first(cursor.fetchall())
    if not lexemes:
        return None
    return lexical_levels(cursor, side, lexemes, principals, depth, k)


def lexical_first(rows: Sequence[tuple[Any, ...]]) -> tuple[SideLists, list[str]]:
    """The first level's lists and the query's lexemes, from LEXICAL_FIRST_SQL's rows."""
    side = SideLists([], [], set())
    lexemes: list[str] = []
    for filtered, chunk_id, visible, row_lexemes in rows:
        if filtered is None:
            lexemes = list(row_lexemes or [])
        elif filtered:
            side.visible.append(chunk_id)
        else:
            side.unfiltered.append(chunk_id)
            if not visible:
                side.hidden.add(chunk_id)
    return side, lexemes


def lexical_levels(
    cursor: CursorWrapper, side: SideLists, lexemes: Sequence[str], principals: list[str], depth: int, k: int
) -> SideLists:
    """The lower coordination levels after the first, each only while a list is still short."""
    for level in coordination_levels(lexemes)[1:]:  # the all-lexemes level ran first
        need_visible, need_all = depth - len(side.visible), k - len(side.unfiltered)
        if need_visible <= 0 and need_all <= 0:
            break
        params: dict[str, Any] = {
            "q": level,
            "principals": principals,
            "n_visible": max(need_visible, 0),
            "n_all": max(need_all, 0),
            "seen": list(set(side.visible) | set(side.unfiltered)),
        }
        if need_visible > 0 and need_all > 0:
            cursor.execute(LEXICAL_BOTH_SQL, params)
        elif need_visible > 0:
            params["seen"] = side.visible
            cursor.execute(LEXICAL_VISIBLE_SQL, params)
        else:
            params["seen"] = side.unfiltered
            cursor.execute(LEXICAL_ALL_SQL, params)
        for filtered, chunk_id, visible in cursor.fetchall():
            if filtered:
                side.visible.append(chunk_id)
            else:
                side.unfiltered.append(chunk_id)
                if not visible:
                    side.hidden.add(chunk_id)
    return side


def unfiltered_top(
    cursor: CursorWrapper, lexemes: Sequence[str], principals: list[str], k: int
) -> tuple[list[int], set[int]]:
    """The lexical top ``k`` over all chunks (no ACL), level by level, and which of them are hidden."""
    ranked: list[int] = []
    hidden: set[int] = set()
    for level in coordination_levels(lexemes):
        need = k - len(ranked)
        if need <= 0:
            break
        cursor.execute(LEXICAL_ALL_SQL, {"q": level, "principals": principals, "n_all": need, "seen": ranked})
        for _, chunk_id, visible in cursor.fetchall():
            ranked.append(chunk_id)
            if not visible:
                hidden.add(chunk_id)
    return ranked, hidden
