"""The vector candidate list: pgvector cosine similarity over the HNSW index, ACL in the SQL.

One statement. The planner picks the HNSW index for a broad identity (pgvector's iterative scan
keeps walking the graph until N rows pass the ACL) and an exact scan over the ACL's GIN bitmap for
a narrow one — until the store grows: pgvector's cost model does not see how far a filtered walk
goes (N ÷ the ACL's share of the graph, each step a page and dozens of distances), so at 300k
chunks it sends a 1 % identity into the graph, hundreds of ms. When the planner's own plan is such
a walk and it expects few visible rows (``EXACT_MAX_ROWS``), the exact statement is sent instead
(``nearest_exact``): cheaper and exact. The lexical candidates are re-scored by exact cosine (beside their details) and
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
import os
import re
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from django.db.backends.utils import CursorWrapper
from psycopg import OperationalError
from psycopg_pool import PoolClosed, PoolTimeout

from achilles import prepared
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
JOINED = (
    "SELECT s.similarity, {flag} {columns} FROM ({inner}) AS s JOIN knowledge_chunks c ON c.id = s.id "
    "JOIN knowledge_records r ON r.id = c.record_id"
)
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
# The planner's verdict per set of principals and ef (``memo``: it moves only with ANALYZE).
_exact_plans: StatisticsMemo[bool] = StatisticsMemo()
# How the jobs beside the request went in this process: run on a connection of their own, or
# handed back for want of one or because theirs was dead (tests and operators read it; plain ints
# under the GIL).
beside_jobs = {"ran": 0, "no_connection": 0, "broken": 0}

Rows = list[tuple[Any, ...]]


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
    (NEAREST_EXACT_SQL): the planner would walk the graph filtering by the ACL — an ordered index
    scan with a filter — and expects at most EXACT_MAX_ROWS rows to pass it. A partial index the
    ACL implies (``{public}``) needs no filter and keeps the graph; so does a plan that is exact
    already. Asked once a minute per set of principals and ef (EXPLAIN, not run; ``memo``), on
    ``cursor``."""
    ef = ef_search(depth)

    def ask() -> bool:
        params = {"ef_search": str(ef), "vec": vector_literal([1.0]), "principals": principals, "n": depth}
        cursor.execute(HNSW_SETTINGS_SQL + ";" + NEAREST_PLAN_SQL, params)
        cursor.nextset()
        plan = cursor.fetchone()[0]
        exact = _filtered_walk_rows(plan[0]["Plan"] if isinstance(plan, list) else json.loads(plan)[0]["Plan"])
        return exact is not None and exact <= EXACT_MAX_ROWS

    return _exact_plans.get((str(ef), *principals), ask)


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
    vector: Sequence[float], principals: list[str], depth: int, columns: str, *, exact: bool = False
) -> tuple[Statements, dict]:
    """The HNSW settings, then the nearest visible chunks (rows: similarity, ``columns``…); by the
    exact statement when ``exact`` (``nearest_exact``)."""
    params = {"ef_search": str(ef_search(depth)), "principals": principals, "vec": vector_literal(vector), "n": depth}
    nearest = (
        exact_statement(columns, depth)
        if exact
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
    """Rows of the second statement of a (settings; statement) message."""
    prepared.execute(cursor, statements, params, in_transaction=in_transaction)
    cursor.nextset()
    return list(cursor.fetchall())


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
    unchecked = getattr(pool, "_getconn_unchecked", None)  # psycopg_pool's own, pinned in requirements
    if unchecked is None or pool.closed:
        return pool.getconn(timeout=POOL_WAIT_SECONDS)
    return unchecked(POOL_WAIT_SECONDS)


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
        vector, principals, depth, columns, exact=nearest_exact(cursor, principals, depth)
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
    reaching = sorted((p for p in similarity.items() if p[1] >= floor), key=lambda p: (-p[1], p[0]))
    return [chunk_id for chunk_id, _ in reaching[:depth]]


@dataclass
class VectorRows:
    """What ``vector_message`` read: the vector list's candidates (id → similarity, to rank with
    ``ranked_by_similarity``), the semantic side of withheld, details, and the rows of ``more``."""

    similarity: dict[int, float]
    hidden: list[int]
    found: dict[int, tuple[Any, ...]]
    more: list[list[tuple[Any, ...]]]


def vector_message(
    cursor: CursorWrapper,
    vector: Sequence[float] | None,
    principals: list[str],
    depth: int,
    extra: Sequence[int] = (),
    semantic: tuple[Sequence[float], int, float] | None = None,
    details: tuple[str, Sequence[int]] | None = None,
    beside: Beside | None = None,
    wrap_errors: Callable[[], Any] | None = None,
    more: Sequence[tuple[str, dict[str, Any], bool]] = (),
) -> VectorRows:
    """One message: the HNSW settings, the vector list's candidates (when ``vector``: the ``depth``
    nearest visible chunks and the ``extra`` ids, each with its similarity) and the semantic side
    of withheld (when ``semantic`` = (topic vector, k, floor): the hidden chunks among the k
    nearest, visible or not, whose similarity reaches that floor), and the ``more`` statements
    (SQL, params, whether to prepare it: ``achilles.prepared``; their rows are returned as read).

    ``details`` = (columns over ``c`` the chunk and ``r`` its record, starting with ``c.id``; more
    ids): every row of both lists carries those columns, and a last statement fetches them for the
    other ids — returned as {chunk id: columns}, so no round trip is needed for them afterwards.

    ``beside``: the nearest-neighbour statement already started on another connection
    (``start_beside``, same ``vector``, ``depth`` and columns); it is left out of the message and
    its rows awaited after it (``wrap_errors``: a context manager for the wait, to raise its
    errors as the request connection's would). So is the semantic side when ``beside`` reads it
    for the same vector and k. A job that found no connection is run here after the message."""
    columns = details[0] if details else "c.id"
    # (statement, prepared?): see exact_statement and semantic_statement; details by id are
    # plan-independent
    statements: list[tuple[str, bool]] = [(sql, prepare) for sql, _, prepare in more]
    params: dict[str, Any] = {"ef_search": str(ef_search(depth)), "principals": principals}
    for _, more_params, _ in more:
        params.update(more_params)
    near_here = vector is not None and beside is None
    # the semantic rows read beside serve when they are for this very vector and k
    semantic_there = (
        semantic is not None
        and beside is not None
        and beside.semantic is not None
        and tuple(semantic[0]) == beside.vector
        and beside.semantic_k == semantic[1]
    )
    semantic_here = semantic is not None and not semantic_there
    hnsw = near_here or semantic_here
    if hnsw:
        statements.append((HNSW_SETTINGS_SQL, False))
    if near_here:
        exact = nearest_exact(cursor, principals, depth)
        statements.append(
            exact_statement(columns, depth)
            if exact
            else (JOINED.format(flag="", columns=columns, inner=NEAREST_SQL), False)
        )
    if vector is not None:
        params.update(vec=vector_literal(vector), n=depth, extra=list(extra))
    if semantic_here:
        assert semantic is not None
        statements.append(semantic_statement(columns, semantic[1]))
        params.update(topic_vec=vector_literal(semantic[0]), topic_n=semantic[1])
    by_id = list(dict.fromkeys([*(details[1] if details else ()), *(extra if vector is not None else ())]))
    if by_id:
        similarity = EXTRA_SIMILARITY if vector is not None and extra else "NULL::float8"
        statements.append((BY_ID_SQL.format(similarity=similarity, columns=columns), True))
        params["by_id"] = by_id
    more_rows: list[list[tuple[Any, ...]]] = []
    nearest_rows: list[tuple[Any, ...]] = []
    semantic_rows: list[tuple[Any, ...]] = []
    by_id_rows: list[tuple[Any, ...]] = []
    if statements:
        prepared.execute(cursor, statements, params)
        for position in range(len(more)):
            if position:
                cursor.nextset()
            more_rows.append(cursor.fetchall())
        if more:
            cursor.nextset()
        if hnsw:
            cursor.nextset()
        if near_here:
            nearest_rows = cursor.fetchall()
            cursor.nextset()
        if semantic_here:
            semantic_rows = cursor.fetchall()
            cursor.nextset()
        if by_id:
            by_id_rows = cursor.fetchall()
    if beside is not None and vector is not None:
        nearest_rows = _awaited(beside.nearest, wrap_errors, cursor, _nearest(vector, principals, depth, columns))
    if semantic_there and beside is not None and beside.semantic is not None and semantic is not None:
        message = semantic_message(semantic[0], principals, depth, columns, semantic[1])
        semantic_rows = _awaited(beside.semantic, wrap_errors, cursor, lambda _cursor: message)
    found: dict[int, tuple[Any, ...]] = {}
    pairs: dict[int, float] = {}  # the vector list's candidates: id → similarity
    for row in nearest_rows:
        if details:
            found[row[1]] = row[1:]
        pairs[row[1]] = row[0]
    hidden = _semantic_hidden(semantic_rows, semantic[2], found if details else None) if semantic else []
    for row in by_id_rows:
        if details:
            found[row[1]] = row[1:]
        if row[0] is not None:
            pairs.setdefault(row[1], row[0])
    return VectorRows(pairs, hidden, found, more_rows)


def _semantic_hidden(rows: Rows, floor: float, found: dict[int, tuple[Any, ...]] | None) -> list[int]:
    """The hidden chunks of the semantic side's rows (similarity, visible, id, …) reaching ``floor``;
    their columns (from the id on) go to ``found``."""
    nearest_all = []  # (id, similarity, visible)
    for row in rows:
        if found is not None:
            found[row[2]] = row[2:]
        nearest_all.append((row[2], row[0], row[1]))
    # in similarity order, ties by id: the relaxed-order scan and the graph's state (dead tuples
    # of rolled-back rows stay in it until vacuum) must not decide the order of the hints
    return [
        chunk_id
        for chunk_id, similarity, visible in sorted(nearest_all, key=lambda r: (-r[1], r[0]))
        if not visible and similarity >= floor
    ]


def semantic_after(
    cursor: CursorWrapper,
    semantic: tuple[Sequence[float], int, float],
    principals: list[str],
    depth: int,
    columns: str,
    beside: Beside | None,
    wrap_errors: Callable[[], Any] | None = None,
) -> tuple[list[int], dict[int, tuple[Any, ...]]]:
    """The semantic side of withheld on its own (see ``vector_message``): read beside when ``beside``
    reads it for this vector and k, else one message here. Returns (hidden ids, their columns)."""
    message = semantic_message(semantic[0], principals, depth, columns, semantic[1])
    if (
        beside is not None
        and beside.semantic is not None
        and tuple(semantic[0]) == beside.vector
        and beside.semantic_k == semantic[1]
    ):
        rows = _awaited(beside.semantic, wrap_errors, cursor, lambda _cursor: message)
    else:
        rows = _run_message(cursor, *message)
    found: dict[int, tuple[Any, ...]] = {}
    return _semantic_hidden(rows, semantic[2], found), found


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
