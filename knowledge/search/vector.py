"""The vector candidate list: pgvector cosine similarity over the HNSW index, ACL in the SQL.

One statement. The planner picks the HNSW index for a broad identity (pgvector's iterative scan
keeps walking the graph until N rows pass the ACL) and an exact scan over the ACL's GIN bitmap for
a narrow one — until the store grows: pgvector's cost model does not see how far a filtered walk
goes (N ÷ the ACL's share of the graph, each step a page and dozens of distances), so at 300k
chunks it sends a 1 % identity into the graph, hundreds of ms. When the planner's own plan is such
a walk and it expects few visible rows (``EXACT_MAX_ROWS``), the exact statement is sent instead
(``nearest_plan``): cheaper and exact. A walk the ACL filters gets a wider ``hnsw.ef_search`` as the
store grows and as the ACL's share shrinks (``walk_ef``): at a fixed ef its recall falls with both.
The lexical candidates are re-scored by exact cosine (beside their details) and
compete for the vector list too: an approximate index can miss a close neighbour, the lexical side
often has it (recall@10 +0.07–0.17 on the benchmark).

The nearest-neighbour statement needs nothing from the lexical side, nor does the semantic side
of withheld when its topic is the whole query: outside a transaction each runs on a pooled
connection of its own while the lexical statements run on the request's (``start_beside``);
inside one (``atomic``, a TestCase) another connection could not see the transaction's rows, so
they ride in the last message on the request's connection instead.
"""

from __future__ import annotations

import functools
import json
import math
import os
import re
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Final, NamedTuple

from django.db.backends.utils import CursorWrapper
from psycopg import OperationalError
from psycopg_pool import PoolClosed, PoolTimeout

from achilles.compat import pool_getconn_unchecked
from knowledge.search.batch import Batch, Rows
from knowledge.search.memo import StatisticsMemo

# The nearest visible chunks, by the HNSW index or an exact scan (the planner's choice).
NEAREST_SQL = """
WITH h AS MATERIALIZED (
    SELECT id, 1 - (embedding <=> %(vec)s::vector) AS similarity
    FROM knowledge_chunks
    WHERE embedding IS NOT NULL AND knowledge_acl_allows(acl, acl_also, %(principals)s::text[])
    ORDER BY embedding <=> %(vec)s::vector
    LIMIT %(n)s
)
SELECT id, similarity FROM h
"""
# The same list, exact: every visible chunk's distance (the ACL's GIN bitmap, a top-N sort). The
# order is by similarity, which no index serves, so the planner cannot take the graph; ties by id.
NEAREST_EXACT_SQL = """
WITH h AS MATERIALIZED (
    SELECT id, 1 - (embedding <=> %(vec)s::vector) AS similarity
    FROM knowledge_chunks
    WHERE embedding IS NOT NULL AND knowledge_acl_allows(acl, acl_also, %(principals)s::text[])
    ORDER BY similarity DESC, id
    LIMIT %(n)s
)
SELECT id, similarity FROM h
"""
# What the planner would do with NEAREST_SQL for these principals, under the HNSW settings it runs
# with (pgvector costs the walk by ef_search); the vector does not move the plan: any one will do.
NEAREST_PLAN_SQL = "EXPLAIN (FORMAT JSON) " + NEAREST_SQL
# The semantic side of withheld: the nearest chunks to the topical words, visible or not.
VECTOR_ALL_SQL = """
SELECT id, 1 - (embedding <=> %(topic_vec)s::vector) AS similarity, knowledge_acl_allows(acl, acl_also, %(principals)s::text[]) AS visible
FROM knowledge_chunks
WHERE embedding IS NOT NULL
ORDER BY embedding <=> %(topic_vec)s::vector
LIMIT %(topic_n)s
"""
# Chunks by id; the lexical candidates (``extra``) with their exact similarity when visible.
BY_ID_SQL = """
SELECT {similarity}, {columns}
FROM knowledge_chunks c JOIN knowledge_records r ON r.id = c.record_id
WHERE c.id = ANY(%(by_id)s)
"""
EXTRA_SIMILARITY = (
    "CASE WHEN c.id = ANY(%(extra)s) AND c.embedding IS NOT NULL AND knowledge_acl_allows(c.acl, c.acl_also, %(principals)s::text[]) "
    "THEN 1 - (c.embedding <=> %(vec)s::vector) END"
)
# The HNSW settings, local to the transaction, sent in the same message as the vector statements:
# the statements of one message run as one transaction (also in autocommit), so no BEGIN/COMMIT.
HNSW_SETTINGS_SQL = """
SELECT set_config('hnsw.iterative_scan', 'relaxed_order', true), set_config('hnsw.ef_search', %(ef_search)s, true)
"""
# The same, setting only the ef, for the semantic side after a nearest statement that walked wider.
HNSW_SEMANTIC_SETTINGS_SQL = "SELECT set_config('hnsw.ef_search', %(semantic_ef)s, true)"
JOINED = (
    "SELECT s.similarity, {flag} {columns} FROM ({inner}) AS s JOIN knowledge_chunks c ON c.id = s.id "
    "JOIN knowledge_records r ON r.id = c.record_id"
)


class NearestRow:
    """Columns of a row of the nearest statements (JOINED without a flag) and of BY_ID_SQL: the
    similarity (NULL in BY_ID_SQL for a chunk that is not a visible lexical candidate), then the
    caller's columns, the chunk id first (``row[NearestRow.CHUNK_ID:]``: the caller's columns)."""

    SIMILARITY: Final = 0
    CHUNK_ID: Final = 1


class SemanticRow:
    """Columns of a row of the semantic side's statement (``semantic_statement``): the similarity,
    the visible flag, then the caller's columns, the chunk id first."""

    SIMILARITY: Final = 0
    VISIBLE: Final = 1
    CHUNK_ID: Final = 2


class SemanticSide(NamedTuple):
    """The semantic side of withheld: the topic's vector, how many nearest chunks, visible or not,
    and the similarity a hidden one must reach (the model's hint floor)."""

    vector: Sequence[float]
    k: int
    floor: float


# Candidate list width of the HNSW scan (pgvector's default is 40). Hash embeddings of short
# queries are a hard case for HNSW; bench/knowledge prints recall and latency for a sweep.
HNSW_EF_SEARCH = 250
# How long a job beside the request waits for a pooled connection before it hands its statement
# back to the request's connection: a pool at its limit must not stall searches (an idle
# connection is taken at once; a growing pool gets this long to open one).
POOL_WAIT_SECONDS = 0.01
PARALLEL_WORKERS = 8
# The most visible rows a graph walk filtered by the ACL may expect before the exact statement is
# sent instead: the exact scan reads each of them (at 300k chunks, ≈ 3 000 rows: ms; bench/knowledge
# measures both), the walk visits ≈ N ÷ share of the graph. Above it the walk is the cheaper one.
EXACT_MAX_ROWS = 10_000
# A walk's recall at a fixed ef falls as the store grows and as the ACL thins the graph
# (bench/knowledge's growth table, ours' recall@8 for an identity reading everything: ef 250 0.963
# at 100k chunks; at 300k ef 250 0.920, 400 0.935, 600 0.950, 800 0.953; an identity reading 10 %:
# 0.88 at ef 250 at 100k). So a walk the ACL filters gets a wider list, by two rules, the larger
# winning (at most EF_MAX, pgvector's own limit for hnsw.ef_search):
#   * the graph: HNSW_EF_SEARCH up to EF_BASE_ROWS chunks, × (chunks ÷ EF_BASE_ROWS)^EF_GROWTH above
#     (600 at 300k, where 0.95 is reached; 1 000 from ≈ 570k);
#   * the ACL: the depth-th visible row sits near rank depth ÷ share among all chunks, and the list
#     must reach past it: EF_VISIBLE_RANKS × depth ÷ share (10 % visible at 100k: ef 418 (×2)
#     0.944, ef 626 (×3) 0.975).
# Neither brings a 10 % identity to 0.95 at 300k (ef 800: 0.90); the exact statement does (1.000)
# at 2.7× the walk's p50 (30k visible rows): see docs/benchmarks/knowledge.md, «How it grows».
EF_BASE_ROWS = 100_000
EF_GROWTH = 0.8
EF_VISIBLE_RANKS = 3.0
EF_MAX = 1000


class NearestPlan(NamedTuple):
    """How the nearest visible chunks are read for a set of principals: exactly, or by the graph
    (the planner's plan) with ``ef`` as ``hnsw.ef_search``."""

    exact: bool
    ef: int


# The planner's verdict per set of principals and depth (``memo``: it moves only with ANALYZE).
_exact_plans: StatisticsMemo[NearestPlan] = StatisticsMemo()
# How the jobs beside the request went in this process: run on a connection of their own, or
# handed back for want of one or because theirs was dead (tests and operators read it; plain ints
# under the GIL).
beside_jobs = {"ran": 0, "no_connection": 0, "broken": 0}


def vector_literal(vector: Sequence[float]) -> str:
    """pgvector's text form of ``vector``. A search sends one vector in up to four statements, two
    of them built on the threads beside it (where formatting 384 floats holds the GIL the request's
    thread is waiting for): formatted once, the last few kept."""
    return _vector_literal(tuple(vector))


@functools.lru_cache(maxsize=16)
def _vector_literal(vector: tuple[float, ...]) -> str:
    return "[" + ",".join(f"{float(x):.7g}" for x in vector) + "]"


def ef_search(depth: int) -> int:
    """``hnsw.ef_search`` for a list ``depth`` deep: the scan must hold at least the list."""
    return max(HNSW_EF_SEARCH, depth)


def nearest_exact(cursor: Any, principals: list[str], depth: int) -> bool:
    """Whether the ``depth`` nearest visible chunks for ``principals`` are read exactly
    (``nearest_plan``)."""
    return nearest_plan(cursor, principals, depth).exact


# The store's size as the statistics have it (-1 before the first ANALYZE).
STORE_ROWS_SQL = "SELECT reltuples FROM pg_class WHERE oid = 'knowledge_chunks'::regclass"


def nearest_plan(cursor: Any, principals: list[str], depth: int) -> NearestPlan:
    """How the ``depth`` nearest visible chunks for ``principals`` are read. Exactly
    (NEAREST_EXACT_SQL) when the planner would walk the graph filtering by the ACL — an ordered
    index scan with a filter — and expects at most EXACT_MAX_ROWS rows to pass it; otherwise by the
    planner's plan, a filtered walk with the ef its graph and share call for (``walk_ef``). A
    partial index the ACL implies (``{public}``) needs no filter and keeps the graph and the ef; so
    does a plan that is exact already. Asked once a minute per set of principals and depth
    (EXPLAIN, not run, and the store's size from the statistics; ``memo``), on ``cursor``."""
    ef = ef_search(depth)

    def ask() -> NearestPlan:
        params = {"ef_search": str(ef), "vec": vector_literal([1.0]), "principals": principals, "n": depth}
        batch = (
            Batch(params)
            .add(None, HNSW_SETTINGS_SQL, prepare=False)
            .add("plan", NEAREST_PLAN_SQL, prepare=False)
            .add("store", STORE_ROWS_SQL, prepare=False)
        )
        sets = batch.run(cursor)
        [(plan,)] = sets["plan"]
        [top] = plan if isinstance(plan, list) else json.loads(plan)  # EXPLAIN's JSON: one statement
        visible = _filtered_walk_rows(top["Plan"])
        if visible is None:
            return NearestPlan(False, ef)
        if visible <= EXACT_MAX_ROWS:
            return NearestPlan(True, ef)
        [(store,)] = sets["store"] or [(0.0,)]
        return NearestPlan(False, walk_ef(ef, float(store), visible, depth))

    return _exact_plans.get((str(ef), *principals), ask)


def walk_ef(ef: int, store_rows: float, visible_rows: float, depth: int) -> int:
    """``hnsw.ef_search`` for a walk the ACL filters over a graph of ``store_rows`` chunks of which
    ``visible_rows`` pass: ``ef`` widened by the graph's size and by the ACL's share (see
    EF_BASE_ROWS), at most EF_MAX (and never below ``ef``)."""
    by_graph = ef * max(1.0, store_rows / EF_BASE_ROWS) ** EF_GROWTH
    share = min(1.0, visible_rows / store_rows) if store_rows > 0 and visible_rows > 0 else 1.0
    by_acl = EF_VISIBLE_RANKS * depth / share
    return max(ef, min(EF_MAX, math.ceil(max(by_graph, by_acl))))


_ACL_FILTER = re.compile(r"\bacl && ")


def _filtered_walk_rows(node: dict) -> float | None:
    """The rows the plan expects from an index scan ordered by distance (the graph) whose rows the
    ACL filters, or None when the plan has no such scan. (A filter on the clauses alone, ``acl_also``,
    under the partial index ``{public}`` implies, rejects only rows with clauses: not such a walk.)"""
    if node.get("Node Type") == "Index Scan" and node.get("Order By") and _ACL_FILTER.search(node.get("Filter", "")):
        return float(node["Plan Rows"])
    for child in node.get("Plans", ()):
        rows = _filtered_walk_rows(child)
        if rows is not None:
            return rows
    return None


Statements = list[tuple[str, bool]]  # (statement, prepared?): ``achilles.prepared``


def _limited(sql: str, param: str, n: int) -> str:
    """``sql`` with its ``LIMIT %(param)s`` written in as ``n``: a prepared statement's generic plan
    then knows how few rows it returns (given a parameter, the planner expects a tenth of the table
    and joins the records by a sequential scan)."""
    return sql.replace(f"LIMIT %({param})s", f"LIMIT {int(n)}")


def exact_statement(columns: str, depth: int) -> tuple[str, bool]:
    """NEAREST_EXACT_SQL with its details, to be prepared: its order is total, so no plan changes
    its rows. (NEAREST_SQL never is: a generic plan cannot see how selective the ACL is, nor use the
    partial index the ACL implies — and which scan reads the graph decides its rows.)"""
    return JOINED.format(flag="", columns=columns, inner=_limited(NEAREST_EXACT_SQL, "n", depth)), True


def semantic_statement(columns: str, k: int) -> tuple[str, bool]:
    """VECTOR_ALL_SQL with its details, to be prepared: no ACL decides its plan — the graph, as a
    custom plan takes it (``test_search_prepared.py``)."""
    return JOINED.format(flag="s.visible,", columns=columns, inner=_limited(VECTOR_ALL_SQL, "topic_n", k)), True


def nearest_message(
    vector: Sequence[float], principals: list[str], depth: int, columns: str, *, plan: NearestPlan | None = None
) -> tuple[Statements, dict]:
    """The HNSW settings, then the nearest visible chunks (rows: similarity, ``columns``…); by the
    exact statement or the graph with its ef as ``plan`` says (``nearest_plan``; None: the graph
    at the default ef)."""
    ef = plan.ef if plan is not None else ef_search(depth)
    params = {"ef_search": str(ef), "principals": principals, "vec": vector_literal(vector), "n": depth}
    nearest = (
        exact_statement(columns, depth)
        if plan is not None and plan.exact
        else (JOINED.format(flag="", columns=columns, inner=NEAREST_SQL), False)
    )
    return [(HNSW_SETTINGS_SQL, False), nearest], params


def semantic_message(
    topic_vector: Sequence[float], principals: list[str], depth: int, columns: str, k: int
) -> tuple[Statements, dict]:
    """The HNSW settings, then the ``k`` nearest chunks to the topic, visible or not (rows:
    similarity, visible, ``columns``…)."""
    params = {
        "ef_search": str(ef_search(depth)),
        "principals": principals,
        "topic_vec": vector_literal(topic_vector),
        "topic_n": k,
    }
    return [(HNSW_SETTINGS_SQL, False), semantic_statement(columns, k)], params


def _run_message(cursor: Any, statements: Statements, params: dict, in_transaction: bool | None = None) -> Rows:
    """Rows of the statement of a (settings; statement) message."""
    (settings_sql, settings_prepare), (sql, prepare) = statements
    batch = Batch(params).add(None, settings_sql, prepare=settings_prepare).add("rows", sql, prepare=prepare)
    return list(batch.run(cursor, in_transaction=in_transaction)["rows"])


@dataclass(frozen=True)
class Beside:
    """Messages running on connections of their own (``start_beside``): the nearest visible chunks
    for ``vector``, and the semantic side of withheld for the same vector with ``semantic_k``."""

    vector: tuple[float, ...]
    nearest: Future[Rows | None]
    semantic: Future[Rows | None] | None
    semantic_k: int | None


_executor: ThreadPoolExecutor | None = None
_executor_pid = 0
_executor_lock = threading.Lock()


def _pool_executor() -> ThreadPoolExecutor:
    global _executor, _executor_pid
    with _executor_lock:
        if _executor is None or _executor_pid != os.getpid():  # threads do not survive a fork
            _executor = ThreadPoolExecutor(max_workers=PARALLEL_WORKERS, thread_name_prefix="ks-beside")
            _executor_pid = os.getpid()
        return _executor


Message = Callable[[Any], tuple[Statements, dict]]  # a cursor → the statements and params to run on it


def _taken(pool: Any) -> Any:
    """A pooled connection without the pool's health check (an empty query: a round trip on the
    path of every search, since the request waits for these jobs — p95 −0.2…−0.6 ms at 100k). A
    connection that turns out dead fails its statement instead, which ``_job`` hands back."""
    return pool_getconn_unchecked(pool, POOL_WAIT_SECONDS)


def _job(pool: Any, message: Message) -> Rows | None:
    try:
        conn = _taken(pool)
    except (PoolTimeout, PoolClosed):  # at its limit, or closing (shutdown)
        beside_jobs["no_connection"] += 1
        return None
    try:
        with conn.cursor() as cursor:
            rows = _run_message(cursor, *message(cursor), in_transaction=not conn.autocommit)
        beside_jobs["ran"] += 1
        return rows
    except OperationalError:
        # a connection the server closed (restart, idle timeout): the request's connection runs the
        # statement; the pool drops this one when it is handed back
        beside_jobs["broken"] += 1
        return None
    finally:
        pool.putconn(conn)


def start_beside(
    pool: Any, vector: Sequence[float], principals: list[str], depth: int, columns: str, semantic_k: int | None
) -> Beside:
    """``nearest_message`` and (with ``semantic_k``) ``semantic_message`` for ``vector``, each on a
    connection of ``pool``, started now; a future's rows are None when the pool had none to spare."""
    executor = _pool_executor()
    vector_literal(vector)  # formatted here, before the threads need it
    nearest = executor.submit(_job, pool, _nearest(vector, principals, depth, columns))
    semantic = None
    if semantic_k is not None:
        message = semantic_message(vector, principals, depth, columns, semantic_k)
        semantic = executor.submit(_job, pool, lambda _cursor: message)
    return Beside(tuple(vector), nearest, semantic, semantic_k)


def _nearest(vector: Sequence[float], principals: list[str], depth: int, columns: str) -> Message:
    """``nearest_message`` for the cursor it will run on, which asks the planner when it must."""
    return lambda cursor: nearest_message(
        vector, principals, depth, columns, plan=nearest_plan(cursor, principals, depth)
    )


def vector_list(
    cursor: CursorWrapper,
    vector: Sequence[float],
    principals: list[str],
    depth: int,
    floor: float,
    extra: Sequence[int] = (),
) -> list[int]:
    """The ``depth`` most similar visible chunks among the HNSW candidates and ``extra`` ids."""
    return ranked_by_similarity(vector_message(cursor, vector, principals, depth, extra).similarity, floor, depth)


def ranked_by_similarity(similarity: dict[int, float], floor: float, depth: int) -> list[int]:
    """The vector list: the ``depth`` most similar candidates reaching ``floor``, ties by id."""
    # relaxed_order may return neighbours slightly out of order, and extras come unordered: sort
    reaching = sorted((-value, chunk_id) for chunk_id, value in similarity.items() if value >= floor)
    return [chunk_id for _, chunk_id in reaching[:depth]]


@dataclass
class VectorRows:
    """What ``vector_message`` read: the vector list's candidates (id → similarity, to rank with
    ``ranked_by_similarity``), the semantic side of withheld, details, and the rows of ``more`` by
    the names they were given."""

    similarity: dict[int, float]
    hidden: list[int]
    found: dict[int, tuple[Any, ...]]
    more: dict[str, Rows]


# The result sets ``vector_message`` appends after the caller's ``more`` (names the caller must not use).
NEAREST, SEMANTIC, BY_ID = "vector:nearest", "vector:semantic", "vector:by_id"


def reads_semantic_beside(semantic: SemanticSide | None, beside: Beside | None) -> bool:
    """Whether ``beside`` reads the semantic side for this very vector and k."""
    return (
        semantic is not None
        and beside is not None
        and beside.semantic is not None
        and tuple(semantic.vector) == beside.vector
        and beside.semantic_k == semantic.k
    )


def vector_message(
    cursor: CursorWrapper,
    vector: Sequence[float] | None,
    principals: list[str],
    depth: int,
    extra: Sequence[int] = (),
    semantic: SemanticSide | None = None,
    details: tuple[str, Sequence[int]] | None = None,
    beside: Beside | None = None,
    wrap_errors: Callable[[], Any] | None = None,
    more: dict[str, tuple[str, dict[str, Any], bool]] | None = None,
) -> VectorRows:
    """One message: the HNSW settings, the vector list's candidates (when ``vector``: the ``depth``
    nearest visible chunks and the ``extra`` ids, each with its similarity) and the semantic side
    of withheld (when ``semantic``: the hidden chunks among the k nearest, visible or not, whose
    similarity reaches its floor), and the ``more`` statements (name → (SQL, params, whether to
    prepare it: ``achilles.prepared``); their rows are returned as read, by the same names).

    ``details`` = (columns over ``c`` the chunk and ``r`` its record, starting with ``c.id``; more
    ids): every row of both lists carries those columns, and a last statement fetches them for the
    other ids — returned as {chunk id: columns}, so no round trip is needed for them afterwards.

    ``beside``: the nearest-neighbour statement already started on another connection
    (``start_beside``, same ``vector``, ``depth`` and columns); it is left out of the message and
    its rows awaited after it (``wrap_errors``: a context manager for the wait, to raise its
    errors as the request connection's would). So is the semantic side when ``beside`` reads it
    for the same vector and k. A job that found no connection is run here after the message."""
    columns, known = details if details else ("c.id", ())
    semantic_there = reads_semantic_beside(semantic, beside)
    extra = extra if vector is not None else ()
    batch = _vector_batch(
        cursor,
        vector if beside is None else None,
        principals,
        depth,
        columns,
        semantic=None if semantic_there else semantic,
        by_id=list(dict.fromkeys([*known, *extra])),
        extra=extra,
        more=more or {},
    )
    if vector is not None:
        batch.params.update(vec=vector_literal(vector), n=depth, extra=list(extra))
    sets = batch.run(cursor) if batch else {}
    if beside is not None:
        _read_beside(
            sets, cursor, beside, vector, semantic if semantic_there else None, principals, depth, columns, wrap_errors
        )
    found: dict[int, tuple[Any, ...]] | None = {} if details else None
    similarity = _nearest_similarity(sets.pop(NEAREST, []), found)
    hidden = _semantic_hidden(sets.pop(SEMANTIC, []), semantic.floor, found) if semantic else []
    _by_id_similarity(sets.pop(BY_ID, []), similarity, found)
    return VectorRows(similarity, hidden, found if found is not None else {}, sets)


def _read_beside(
    sets: dict[str, Rows],
    cursor: CursorWrapper,
    beside: Beside,
    vector: Sequence[float] | None,
    semantic: SemanticSide | None,
    principals: list[str],
    depth: int,
    columns: str,
    wrap_errors: Callable[[], Any] | None,
) -> None:
    """The result sets read beside, awaited into ``sets`` under the names they would have had in
    the message: the nearest chunks (with ``vector``), the semantic side (with ``semantic``)."""
    if vector is not None:
        sets[NEAREST] = _awaited(beside.nearest, wrap_errors, cursor, _nearest(vector, principals, depth, columns))
    if semantic is not None and beside.semantic is not None:
        message = semantic_message(semantic.vector, principals, depth, columns, semantic.k)
        sets[SEMANTIC] = _awaited(beside.semantic, wrap_errors, cursor, lambda _cursor: message)


def _vector_batch(
    cursor: CursorWrapper,
    vector: Sequence[float] | None,
    principals: list[str],
    depth: int,
    columns: str,
    *,
    semantic: SemanticSide | None,
    by_id: list[int],
    extra: Sequence[int],
    more: dict[str, tuple[str, dict[str, Any], bool]],
) -> Batch:
    """``vector_message``'s statements, each recorded with its result set's name: the caller's
    ``more``; the HNSW settings when the nearest statement (``vector``) or the semantic side
    (``semantic``) runs in it; the nearest chunks (NEAREST), the semantic side (SEMANTIC); the
    chunks ``by_id`` (BY_ID), the ``extra`` ones with their similarity. Prepared: see
    ``exact_statement`` and ``semantic_statement``; details by id are plan-independent."""
    batch = Batch({"ef_search": str(ef_search(depth)), "principals": principals})
    for name, (sql, params, prepare) in more.items():
        batch.add(name, sql, prepare=prepare, params=params)
    if vector is not None or semantic is not None:
        batch.add(None, HNSW_SETTINGS_SQL, prepare=False)
    if vector is not None:
        plan = nearest_plan(cursor, principals, depth)
        nearest, prepare = (
            exact_statement(columns, depth)
            if plan.exact
            else (JOINED.format(flag="", columns=columns, inner=NEAREST_SQL), False)
        )
        batch.add(NEAREST, nearest, prepare=prepare)
        batch.params["ef_search"] = str(plan.ef)
    if semantic is not None:
        if batch.params["ef_search"] != str(ef_search(depth)):
            # the semantic side walks at the default ef, as it does on a connection of its own
            batch.add(None, HNSW_SEMANTIC_SETTINGS_SQL, prepare=False, params={"semantic_ef": str(ef_search(depth))})
        sql, prepare = semantic_statement(columns, semantic.k)
        batch.add(
            SEMANTIC, sql, prepare=prepare, params={"topic_vec": vector_literal(semantic.vector), "topic_n": semantic.k}
        )
    if by_id:
        similarity = EXTRA_SIMILARITY if extra else "NULL::float8"
        batch.add(
            BY_ID, BY_ID_SQL.format(similarity=similarity, columns=columns), prepare=True, params={"by_id": by_id}
        )
    return batch


def _nearest_similarity(rows: Rows, found: dict[int, tuple[Any, ...]] | None) -> dict[int, float]:
    """The vector list's candidates (id → similarity) of the nearest rows (``NearestRow``); their
    columns (from the id on) go to ``found``."""
    pairs: dict[int, float] = {}
    for row in rows:
        chunk_id = row[NearestRow.CHUNK_ID]
        if found is not None:
            found[chunk_id] = row[NearestRow.CHUNK_ID :]
        pairs[chunk_id] = row[NearestRow.SIMILARITY]
    return pairs


def _by_id_similarity(rows: Rows, pairs: dict[int, float], found: dict[int, tuple[Any, ...]] | None) -> None:
    """The rows by id (``NearestRow``): a visible lexical candidate's similarity joins ``pairs``
    (the nearest rows' own stays); every row's columns go to ``found``."""
    for row in rows:
        chunk_id = row[NearestRow.CHUNK_ID]
        if found is not None:
            found[chunk_id] = row[NearestRow.CHUNK_ID :]
        if row[NearestRow.SIMILARITY] is not None:
            pairs.setdefault(chunk_id, row[NearestRow.SIMILARITY])


def _semantic_hidden(rows: Rows, floor: float, found: dict[int, tuple[Any, ...]] | None) -> list[int]:
    """The hidden chunks of the semantic side's rows (``SemanticRow``) reaching ``floor``; their
    columns (from the id on) go to ``found``."""
    nearest_all = []  # (-similarity, id, visible): in similarity order, ties by id
    for row in rows:
        chunk_id = row[SemanticRow.CHUNK_ID]
        if found is not None:
            found[chunk_id] = row[SemanticRow.CHUNK_ID :]
        nearest_all.append((-row[SemanticRow.SIMILARITY], chunk_id, row[SemanticRow.VISIBLE]))
    # in similarity order, ties by id: the relaxed-order scan and the graph's state (dead tuples
    # of rolled-back rows stay in it until vacuum) must not decide the order of the hints
    nearest_all.sort()
    return [chunk_id for distance, chunk_id, visible in nearest_all if not visible and -distance >= floor]


def semantic_after(
    cursor: CursorWrapper,
    semantic: SemanticSide,
    principals: list[str],
    depth: int,
    columns: str,
    beside: Beside | None,
    wrap_errors: Callable[[], Any] | None = None,
) -> tuple[list[int], dict[int, tuple[Any, ...]]]:
    """The semantic side of withheld on its own (see ``vector_message``): read beside when ``beside``
    reads it for this vector and k, else one message here. Returns (hidden ids, their columns)."""
    message = semantic_message(semantic.vector, principals, depth, columns, semantic.k)
    if reads_semantic_beside(semantic, beside) and beside is not None and beside.semantic is not None:
        rows = _awaited(beside.semantic, wrap_errors, cursor, lambda _cursor: message)
    else:
        rows = _run_message(cursor, *message)
    found: dict[int, tuple[Any, ...]] = {}
    return _semantic_hidden(rows, semantic.floor, found), found


def _awaited(future: Future[Rows | None], wrap_errors: Callable[[], Any] | None, cursor: Any, message: Message) -> Rows:
    """A job's rows; when it found no connection to spare, its message run here (one more round trip)."""
    with wrap_errors() if wrap_errors else _no_wrap():
        rows = future.result()
    return rows if rows is not None else _run_message(cursor, *message(cursor))


class _no_wrap:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None
