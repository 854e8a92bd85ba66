"""``sql(query, identity)`` (KS-6): a checked SELECT run under the reader role and RLS.

Order inside one transaction (always rolled back, so nothing it did can outlive it):
1. ``transaction_read_only``, ``statement_timeout`` and ``achilles.principals`` via
   ``set_config(..., is_local => true)`` while still the application role;
2. ``SET LOCAL ROLE achilles_ks_reader`` — from here on row-level security applies and only
   the ``ks_*`` views are granted;
3. the checked statement; at most ``ROW_CAP + 1`` rows are fetched.
The checker refuses ``set_config``/``current_setting``, so the query cannot change who it runs as.
"""

from __future__ import annotations

import json

import psycopg.errors
from django.db import DatabaseError, connection, transaction
from django.db.backends.utils import CursorWrapper

from achilles.errors import ValidationFailed
from knowledge.contracts import Identity, SqlResult
from knowledge.selectors import principals_of
from knowledge.sqlcheck import sql_check

READER_ROLE = "achilles_ks_reader"
PRINCIPAL_SEPARATOR = "\x1f"
ROW_CAP = 200
STATEMENT_TIMEOUT_MS = 3000


# The relations the ks_* views read (security_invoker views are expanded in the plan).
PLAN_RELATIONS = frozenset({"knowledge_records", "knowledge_chunks", "knowledge_record_links"})


class _Rollback(Exception):
    pass


def _plan_relations(node: object) -> set[tuple[str, str]]:
    found: set[tuple[str, str]] = set()
    if isinstance(node, dict):
        if "Relation Name" in node:
            found.add((node.get("Schema", ""), node["Relation Name"]))
        for value in node.values():
            found |= _plan_relations(value)
    elif isinstance(node, list):
        for item in node:
            found |= _plan_relations(item)
    return found


def _check_plan(cursor: CursorWrapper, statement: str) -> None:
    """The database's own account of what the statement reads (EXPLAIN, not run): any relation
    outside the three tables behind the views — a catalog, a statistics view — is refused, whatever
    the static check believed. PostgreSQL grants catalog reads to PUBLIC, so no role can be shut
    out of them individually; this is the database-side line for the reader role."""
    cursor.execute(f"EXPLAIN (FORMAT JSON, VERBOSE) {statement}")
    plan = cursor.fetchone()[0]
    if isinstance(plan, str):
        plan = json.loads(plan)
    outside = sorted(
        f"{schema}.{name}" if schema else name
        for schema, name in _plan_relations(plan)
        if name not in PLAN_RELATIONS or schema in ("pg_catalog", "information_schema")
    )
    if outside:
        raise ValidationFailed(
            f"sql rejected: reads {', '.join(outside)}; only the ks_* views may be read", code="sql_rejected"
        )


def sql_run(query: str, identity: Identity, *, row_cap: int | None = None, timeout_ms: int | None = None) -> SqlResult:
    principals = [p for p in principals_of(identity) if PRINCIPAL_SEPARATOR not in p]
    statement = sql_check(query)
    cap = row_cap or ROW_CAP
    timeout = timeout_ms or STATEMENT_TIMEOUT_MS
    result: SqlResult | None = None
    try:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(
                "SELECT set_config('transaction_read_only', 'on', true),"
                " set_config('statement_timeout', %s, true),"
                " set_config('achilles.principals', %s, true)",
                [str(int(timeout)), PRINCIPAL_SEPARATOR.join(principals)],
            )
            cursor.execute(f"SET LOCAL ROLE {READER_ROLE}")
            _check_plan(cursor, statement)
            cursor.execute(statement)
            columns = tuple(column.name for column in cursor.description or ())
            rows = cursor.fetchmany(cap + 1)
            result = SqlResult(columns=columns, rows=tuple(tuple(row) for row in rows[:cap]), truncated=len(rows) > cap)
            raise _Rollback  # role, settings and any side effect end here
    except _Rollback:
        pass
    except DatabaseError as exc:
        cause = exc.__cause__
        if isinstance(cause, psycopg.errors.QueryCanceled):
            raise ValidationFailed(f"sql timed out after {timeout} ms", code="sql_timeout") from exc
        message = str(cause or exc).strip().splitlines()[0][:300]
        raise ValidationFailed(f"sql failed: {message}", code="sql_rejected") from exc
    assert result is not None
    return result
