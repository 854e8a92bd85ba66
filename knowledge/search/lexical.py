"""The lexical candidate list: PostgreSQL full text, ranked by coordination level, ACL in the SQL.

Coordination-level matching: the query's lexemes (stemmed by PostgreSQL, stop words gone) are
matched first all together (AND), then «all but one», … down to any one (OR); a level runs only
while a list is still short of N, and rows of a higher level rank above rows of a lower one
(ts_rank orders within a level). So a precise query ranks a handful of rows, and the costly «any
word» level runs only when nothing better fills the list.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import combinations
from math import comb
from typing import Any, Final

from django.db.backends.utils import CursorWrapper

from knowledge.models import TEXT_SEARCH_CONFIG
from knowledge.search.memo import StatisticsMemo

MAX_QUERY_TERMS = 32
MAX_LEVEL_CLAUSES = 20
# A selective identity's visible chain reads its levels below the first lower one in one pass
# (``lower_levels_statement``) when the visible chunks holding any query word are expected to be at
# most this many: that pass reads each of them, the chain one GIN scan per level — which for the
# middle levels the planner runs without the ACL's bitmap (it expects few matches), reading every
# match's row. The pass has no stop between levels, so a common word makes it costly: on the
# bench's levels statements with a very common word added, 1 000 such chunks 16.3 → 11.7 ms (p50,
# chain → one pass), 2 900 17.7 → 24.7, 4 800 9.8 → 21.6; the bench's own queries (≈ 30–130)
# p95 −0.5…−2 ms. The estimate: the planner's visible chunks × the query lexemes' summed
# frequencies (ANALYZE's most common lexemes of ``tsv``; one not among them counts as the rarest).
ONE_PASS_MAX_MATCHES = 1_500
# How many chunks the planner expects ``principals`` to see (EXPLAIN, not run) and the lexemes'
# frequencies: kept a minute (``memo``), as they move only with the statistics.
VISIBLE_ROWS_PLAN_SQL = "EXPLAIN (FORMAT JSON) SELECT 1 FROM knowledge_chunks WHERE knowledge_acl_allows(acl, acl_also, %(principals)s::text[])"
LEXEME_FREQUENCIES_SQL = """
SELECT most_common_elems::text::text[], most_common_elem_freqs FROM pg_stats
WHERE schemaname = current_schema() AND tablename = 'knowledge_chunks' AND attname = 'tsv'
"""
_visible_rows: StatisticsMemo[float] = StatisticsMemo()
_lexeme_frequencies: StatisticsMemo[tuple[dict[str, float], float]] = StatisticsMemo()  # (frequencies, rarest)

LEXEMES_SQL = f"""
SELECT lexeme FROM unnest(to_tsvector('{TEXT_SEARCH_CONFIG}', %s))
ORDER BY positions[1], lexeme LIMIT {MAX_QUERY_TERMS}
"""
# The first level (all lexemes: exactly plainto_tsquery) and the query's lexemes in one statement.
LEXICAL_FIRST_SQL = f"""
WITH q AS (SELECT plainto_tsquery('{TEXT_SEARCH_CONFIG}', %(query)s) AS query),
m AS MATERIALIZED (
    SELECT c.id, ts_rank(c.tsv, q.query, 1) AS score, knowledge_acl_allows(c.acl, c.acl_also, %(principals)s::text[]) AS visible
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
    SELECT c.id, ts_rank(c.tsv, %(q)s::tsquery, 1) AS score, knowledge_acl_allows(c.acl, c.acl_also, %(principals)s::text[]) AS visible
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
WHERE c.tsv @@ %(q)s::tsquery AND knowledge_acl_allows(c.acl, c.acl_also, %(principals)s::text[]) AND NOT (c.id = ANY(%(seen)s))
ORDER BY ts_rank(c.tsv, %(q)s::tsquery, 1) DESC, c.id
LIMIT %(n_visible)s
"""
# Only the unfiltered list is short.
LEXICAL_ALL_SQL = """
SELECT false AS filtered, c.id, knowledge_acl_allows(c.acl, c.acl_also, %(principals)s::text[]) AS visible
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


def lower_levels(lexemes: Sequence[str]) -> list[str]:
    """The coordination levels after the first (all lexemes), which runs on its own first."""
    return coordination_levels(lexemes)[1:]  # lint: positional-ok (the levels, not a row)


def query_lexemes(cursor: CursorWrapper, query: str) -> list[str]:
    """The query's lexemes in order of appearance (at most MAX_QUERY_TERMS)."""
    cursor.execute(LEXEMES_SQL, [query])
    return [lexeme for (lexeme,) in cursor.fetchall()]


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
    for level in lower_levels(lexemes):
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


def lexical_one_pass(cursor: Any, principals: list[str], lexemes: Sequence[str]) -> bool:
    """Whether the visible chain of ``principals`` reads its lower levels for ``lexemes`` in one
    pass (``lower_levels_statement``): the visible chunks holding any of them are expected to be at
    most ONE_PASS_MAX_MATCHES. Its two inputs are asked once a minute (the visible chunks per set of
    principals; ``memo``), on ``cursor``."""

    def visible_rows() -> float:
        cursor.execute(VISIBLE_ROWS_PLAN_SQL, {"principals": principals})
        (plan,) = cursor.fetchone()
        [top] = plan if isinstance(plan, list) else json.loads(plan)  # EXPLAIN's JSON: one statement
        return float(top["Plan"]["Plan Rows"])

    def lexeme_frequencies() -> tuple[dict[str, float], float]:
        cursor.execute(LEXEME_FREQUENCIES_SQL)
        row = cursor.fetchone()  # no row before the first ANALYZE
        elems, freqs = row if row else ([], [])
        elems, freqs = elems or [], freqs or []
        frequencies = dict(zip(elems, freqs[: len(elems)], strict=True))
        # no statistics yet: every lexeme counts as in every chunk (the safe side)
        return frequencies, (min(frequencies.values()) if frequencies else 1.0)

    rows = _visible_rows.get(tuple(principals), visible_rows)
    frequencies, rarest = _lexeme_frequencies.get((), lexeme_frequencies)
    share = min(1.0, sum(frequencies.get(lexeme, rarest) for lexeme in set(lexemes)))
    return rows * share <= ONE_PASS_MAX_MATCHES


def lower_levels_statement(
    side: SideLists,
    lexemes: Sequence[str],
    principals: list[str],
    depth: int,
    k: int,
    columns: str,
    similarity: str,
    *,
    one_pass: bool = False,
) -> tuple[str, dict[str, Any]] | None:
    """All lower coordination levels in one statement, for the lists still short after the first.

    Each list is a chain of levels under one LIMIT: PostgreSQL runs a level only while the rows
    before it fall short (an Append under a Limit stops pulling), so it does what ``lexical_levels``
    does in one round trip. Level j leaves out the first level's rows (``seen``) and the matches of
    the level before it: the earlier levels' matches, since their queries are nested (more terms in
    common) and a level is reached only when all of its predecessor's rows were taken. Rows carry
    their level and score (the order is rebuilt from them: ``apply_lower_levels``), ``similarity``
    and ``columns`` over ``c`` the chunk and ``r`` its record. None when no list is short.

    ``one_pass`` (``lexical_one_pass``: few visible chunks hold a query word): the visible chain's levels after its
    first branch are one branch — its visible rows matching the last level («any word») and not
    the first branch's level, each given the first level it matches and that level's rank — one
    scan over the ACL's bitmap instead of one per level; still run only while the list is short,
    and the same rows in the same order, since the levels are nested."""
    levels = lower_levels(lexemes)
    need_visible, need_all = depth - len(side.visible), k - len(side.unfiltered)
    if not levels or (need_visible <= 0 and need_all <= 0):
        return None
    params: dict[str, Any] = {"principals": principals, "lx_seen_visible": side.visible, "lx_seen_all": side.unfiltered}
    params.update({f"lx_{j}": level for j, level in enumerate(levels)})
    # Both lists short: the first lower level's matches are scanned once for both (as
    # LEXICAL_BOTH_SQL does); both lists then hold all of the first level's rows, so «not seen»
    # is «not among the unfiltered ones» for both.
    shared = need_visible > 0 and need_all > 0
    last = len(levels) - 1
    chains = []
    # the LIMITs are parameters, so the text has one shape per (levels, lists short, one pass) and
    # is prepared once per connection (``achilles.prepared``)
    params.update(lx_need_visible=max(need_visible, 0), lx_need_all=max(need_all, 0))
    for filtered, need, seen, acl in (
        (
            True,
            "%(lx_need_visible)s" if need_visible > 0 else "",
            "lx_seen_visible",
            "AND knowledge_acl_allows(c.acl, c.acl_also, %(principals)s::text[])",
        ),
        (False, "%(lx_need_all)s" if need_all > 0 else "", "lx_seen_all", ""),
    ):
        if not need:
            continue
        branches = []
        for j in range(len(levels)):
            if j == 0 and shared:
                branches.append(
                    f"(SELECT 0 AS level, id, score FROM m0 {'WHERE visible' if filtered else ''} "
                    f"ORDER BY score DESC, id LIMIT {need})"
                )
                continue
            if filtered and one_pass and 1 <= j < last:
                branches.append(_one_pass_branch(j, last, acl, seen, need))
                break
            before = f"AND NOT c.tsv @@ %(lx_{j - 1})s::tsquery" if j else ""
            branches.append(
                f"(SELECT {j} AS level, c.id, ts_rank(c.tsv, %(lx_{j})s::tsquery, 1) AS score FROM knowledge_chunks c "
                f"WHERE c.tsv @@ %(lx_{j})s::tsquery {acl} AND NOT (c.id = ANY(%({seen})s)) {before} "
                f"ORDER BY score DESC, c.id LIMIT {need})"
            )
        chains.append(
            f"SELECT {filtered} AS filtered, x.level, x.id, x.score FROM "
            f"({' UNION ALL '.join(branches)}) AS x LIMIT {need}"
        )
    with_m0 = (
        "WITH m0 AS MATERIALIZED (SELECT c.id, ts_rank(c.tsv, %(lx_0)s::tsquery, 1) AS score, "
        "knowledge_acl_allows(c.acl, c.acl_also, %(principals)s::text[]) AS visible FROM knowledge_chunks c "
        "WHERE c.tsv @@ %(lx_0)s::tsquery AND NOT (c.id = ANY(%(lx_seen_all)s))) "
        if shared
        else ""
    )
    sql = (
        f"{with_m0}SELECT l.filtered, l.level, l.score, {similarity}, {columns} "
        f"FROM ({' UNION ALL '.join('(' + chain + ')' for chain in chains)}) AS l "
        "JOIN knowledge_chunks c ON c.id = l.id JOIN knowledge_records r ON r.id = c.record_id"
    )
    return sql, params


def _one_pass_branch(first: int, last: int, acl: str, seen: str, need: str) -> str:
    """Levels ``first`` … ``last`` of a chain in one scan (see ``lower_levels_statement``)."""
    level = " ".join(f"WHEN c.tsv @@ %(lx_{j})s::tsquery THEN {j}" for j in range(first, last))
    rank = " ".join(f"WHEN {j} THEN ts_rank(x.tsv, %(lx_{j})s::tsquery, 1)" for j in range(first, last + 1))
    return (
        f"(SELECT x.level, x.id, CASE x.level {rank} END AS score FROM "
        f"(SELECT c.id, c.tsv, CASE {level} ELSE {last} END AS level FROM knowledge_chunks c "
        f"WHERE c.tsv @@ %(lx_{last})s::tsquery {acl} AND NOT (c.id = ANY(%({seen})s)) "
        f"AND NOT c.tsv @@ %(lx_{first - 1})s::tsquery) AS x "
        f"ORDER BY 1, 3 DESC, 2 LIMIT {need})"
    )


class LevelRow:
    """Columns of a row of ``lower_levels_statement``: which list, the level, the rank within it,
    the similarity expression, then the caller's columns, the chunk id first."""

    FILTERED: Final = 0
    LEVEL: Final = 1
    SCORE: Final = 2
    SIMILARITY: Final = 3
    CHUNK_ID: Final = 4


def _rank_order(row: Sequence[Any]) -> tuple[Any, ...]:
    return (row[LevelRow.LEVEL], -row[LevelRow.SCORE], row[LevelRow.CHUNK_ID])


def apply_lower_levels(side: SideLists, rows: Sequence[Sequence[Any]], visible_at: int) -> None:
    """Append ``lower_levels_statement``'s rows to ``side`` in rank order (level, then score, then
    id — the order of its SQL); ``visible_at``: the index of the visible flag among a row's columns."""
    for row in sorted(rows, key=_rank_order):
        if row[LevelRow.FILTERED]:
            side.visible.append(row[LevelRow.CHUNK_ID])
        else:
            side.unfiltered.append(row[LevelRow.CHUNK_ID])
            if not row[visible_at]:
                side.hidden.add(row[LevelRow.CHUNK_ID])
