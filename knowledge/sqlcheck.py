"""The static check of ``sql()`` queries (KS-6). Pure: sqlglot only, no database.

A query passes when it is exactly one SELECT (set operations and CTEs of SELECTs allowed),
reads only the documented ``ks_*`` views (or its own CTEs), calls only allow-listed functions
and casts only to plain types. What runs is sqlglot's re-rendering of the checked tree, without
comments, so what the database sees is what was checked. The database role, row-level security,
the READ ONLY transaction and the timeout are the second line (``knowledge/sql.py``).
"""

from __future__ import annotations

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError
from sqlglot.optimizer.scope import Scope, traverse_scope

from achilles.errors import ValidationFailed

ALLOWED_VIEWS: dict[str, str] = {
    "ks_records": "id, source_system, external_id, title, url, author_principal_id, trust_score, "
    "created_at, updated_at, last_accessed_at",
    "ks_record_links": "from_record_id, to_record_id, link_type, created_at",
    "ks_chunks": "id, record_id, ordinal, heading, text",
}

# sqlglot's names for them (e.g. date_trunc → TIMESTAMP_TRUNC, string_agg → GROUP_CONCAT).
ALLOWED_FUNCTIONS = frozenset(
    {
        "COUNT",
        "SUM",
        "AVG",
        "MIN",
        "MAX",
        "ARRAY_AGG",
        "GROUP_CONCAT",
        "STDDEV",
        "LOGICAL_OR",
        "LOGICAL_AND",
        "LOWER",
        "UPPER",
        "INITCAP",
        "LENGTH",
        "TRIM",
        "CONCAT",
        "LEFT",
        "RIGHT",
        "SUBSTRING",
        "REPLACE",
        "SPLIT_PART",
        "STR_POSITION",
        "COALESCE",
        "NULLIF",
        "GREATEST",
        "LEAST",
        "CASE",
        "IF",
        "ABS",
        "ROUND",
        "FLOOR",
        "CEIL",
        "DATE_TRUNC",
        "TIMESTAMP_TRUNC",
        "EXTRACT",
        "CURRENT_TIMESTAMP",
        "CURRENT_DATE",
        "TIME_TO_STR",
        "CAST",
        "EXISTS",
        "ROW_NUMBER",
        "RANK",
        "DENSE_RANK",
    }
)
ALLOWED_CAST_TYPES = frozenset(
    {
        "TEXT",
        "VARCHAR",
        "CHAR",
        "INT",
        "BIGINT",
        "SMALLINT",
        "DECIMAL",
        "FLOAT",
        "DOUBLE",
        "BOOLEAN",
        "DATE",
        "TIMESTAMP",
        "TIMESTAMPTZ",
        "INTERVAL",
    }
)
_FORBIDDEN_NODES = tuple(
    node
    for node in (
        getattr(exp, name, None)
        for name in (
            "Insert",
            "Update",
            "Delete",
            "Merge",
            "Create",
            "Drop",
            "Alter",
            "AlterTable",
            "TruncateTable",
            "Command",
            "Copy",
            "Into",
            "Lock",
            "Set",
            "SetItem",
            "Transaction",
            "Commit",
            "Rollback",
            "Grant",
            "Use",
            "Pragma",
            "LoadData",
            "Placeholder",
            "Parameter",
            "Describe",
            "Analyze",
            "Kill",
        )
    )
    if isinstance(node, type)
)
MAX_QUERY_CHARS = 10_000


def reject(reason: str) -> ValidationFailed:
    return ValidationFailed(f"sql rejected: {reason}", code="sql_rejected")


# Catalog and statistics relations are refused by name wherever a name appears (a relation, a
# CTE or an alias), before scopes are even looked at: nothing may shadow them or be shadowed.
CATALOG_SCHEMAS = frozenset({"pg_catalog", "information_schema", "pg_toast"})


def _is_catalog_name(node: exp.Expression) -> bool:
    names = [node.alias_or_name, node.name] if not isinstance(node, exp.TableAlias) else [node.name]
    if isinstance(node, exp.Table):
        names += [node.text("db"), node.text("catalog")]
    return any(name and (name.lower().startswith("pg_") or name.lower() in CATALOG_SCHEMAS) for name in names)


def _check_relations(tree: exp.Expression) -> None:
    """Every table reference is resolved in its own scope (sqlglot's scope analysis): a CTE name
    covers only the scope that defines it and the scopes inside, so «(WITH pg_roles AS (…) …) zz,
    pg_roles» reads the real pg_roles in the outer scope — which is refused. A reference that is
    not a visible CTE must be one of the documented views; anything left unresolved is refused."""
    resolved: set[int] = set()
    for scope in traverse_scope(tree):
        for table in scope.tables:
            if table.args.get("db") or table.args.get("catalog") or not isinstance(table.this, exp.Identifier):
                raise reject(f"only the views {', '.join(sorted(ALLOWED_VIEWS))} may be read")
            source = scope.sources.get(table.alias_or_name)
            if isinstance(source, Scope):  # a CTE visible from this scope
                resolved.add(id(table))
                continue
            if source is not table or table.name.lower() not in ALLOWED_VIEWS:
                raise reject(f"«{table.name}» is not readable; allowed views: {', '.join(sorted(ALLOWED_VIEWS))}")
            resolved.add(id(table))
    for table in tree.find_all(exp.Table):
        if id(table) not in resolved:  # a construct scope analysis did not cover: refuse, never guess
            raise reject(f"«{table.name}» is not readable here")


def _function_name(node: exp.Func) -> str:
    return node.name.upper() if isinstance(node, exp.Anonymous) else node.sql_name().upper()


def sql_check(query: str) -> str:
    """The SQL to execute for ``query``, or ``ValidationFailed(code="sql_rejected")`` saying why."""
    try:
        return _check(query)
    except ValidationFailed:
        raise
    except Exception as exc:  # an unexpected tree shape is a refusal, never a 500
        raise reject(f"unsupported query ({exc.__class__.__name__})") from exc


def _check(query: str) -> str:
    if not isinstance(query, str) or not query.strip():
        raise reject("empty query")
    if len(query) > MAX_QUERY_CHARS:
        raise reject(f"longer than {MAX_QUERY_CHARS} characters")
    if "\x00" in query:
        raise reject("NUL byte")
    try:
        statements = [s for s in sqlglot.parse(query, read="postgres") if s is not None]
    except SqlglotError as exc:
        raise reject(f"cannot parse ({str(exc).splitlines()[0][:200]})") from exc
    if len(statements) != 1:
        raise reject(f"exactly one statement is allowed, got {len(statements)}")
    tree = statements[0]
    if not isinstance(tree, exp.Select | exp.Union | exp.Intersect | exp.Except):
        raise reject(f"only SELECT is allowed, not {tree.key.upper()}")

    for node in tree.walk():
        if isinstance(node, _FORBIDDEN_NODES):
            raise reject(f"{node.key.upper()} is not allowed")
        if isinstance(node, exp.CTE) and not isinstance(node.this, exp.Select | exp.Union | exp.Intersect | exp.Except):
            raise reject("a CTE must be a SELECT")
        if isinstance(node, exp.Table | exp.TableAlias | exp.CTE) and _is_catalog_name(node):
            raise reject(f"catalog and statistics relations are never readable («{node.alias_or_name or node.name}»)")
    _check_relations(tree)
    for node in tree.walk():
        if isinstance(node, exp.Func) and not isinstance(node, exp.Binary | exp.Connector | exp.Unary):
            # (sqlglot models AND/OR and some operators as Func subclasses; they are operators here)
            name = _function_name(node)
            if name not in ALLOWED_FUNCTIONS:
                raise reject(f"function {name.lower()}() is not allowed")
            if isinstance(node, exp.Cast):
                kind = node.to.this if isinstance(node.to, exp.DataType) else None
                target = kind.name if isinstance(kind, exp.DataType.Type) else f"{kind}"
                if target not in ALLOWED_CAST_TYPES or node.to.expressions:
                    raise reject(f"cast to {node.to.sql('postgres')} is not allowed")
    try:
        return tree.sql(dialect="postgres", comments=False)
    except SqlglotError as exc:
        raise reject(f"cannot render ({exc})") from exc
