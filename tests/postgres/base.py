"""The platform's backend (``achilles.postgres``) with a cheaper flush, for the test suite only.

A transactional test (``transactional_db``, ``live_url``, ``django_db(transaction=True)``) ends
with Django's ``flush``: one ``TRUNCATE`` of every table, which gives each of them and each of their
indexes a new file — 0.55–0.7 s on the quiet machine for the ~70 tables, 1–3 s under load, whatever
the test left in them (measured: ``DELETE`` of the same nearly empty tables, 0.05 s). Here the flush
deletes the rows instead, and puts back the rows the test database began with (``seed_snapshot``,
taken when the run's database is set up: the singletons migrations seed — ``hub_state``,
``platform_settings`` — and what ``post_migrate`` made; 0.02 s), so a test that runs after a transactional
one finds the database as a fresh one, whatever the order the workers run them in. Sequences are
untouched (Django's ``TRUNCATE`` without ``reset_sequences`` leaves them too). As ``TRUNCATE`` does,
the flush skips the foreign keys' checks and the tables' row triggers (``session_replication_role =
replica``, a superuser's setting: the embedded server's role; another role keeps Django's
``TRUNCATE``), and a table's own statement-level DELETE triggers fire once afterwards, as its
TRUNCATE would fire them (the content generation moves: ``knowledge/migrations/0006``).
``reset_sequences`` keeps Django's statement."""

from __future__ import annotations

from django.db.backends.postgresql.operations import DatabaseOperations as PostgresOperations

from achilles.postgres import base

# pg_trigger.tgtype bits: ROW 1, DELETE 8 (PostgreSQL's include/catalog/pg_trigger.h)
STATEMENT_DELETE_TRIGGERS_SQL = """
SELECT DISTINCT c.relname FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
WHERE NOT t.tgisinternal AND t.tgenabled <> 'D' AND t.tgtype & 1 = 0 AND t.tgtype & 8 <> 0
  AND c.relname = ANY(%s)
"""
QUOTE = "$test_seed$"  # the rows' JSON travels dollar-quoted in the flush's statements

# table → its rows as JSON, as the run's database began (``seed_snapshot``); kept in this process,
# not in the database (a schema of its own would be in every backup a test makes)
_seeded: dict[str, str] = {}


def seed_snapshot(connection) -> None:
    """Keep the rows of every table that has any, as the flush puts them back. Called once the
    test database is set up."""
    tables = connection.introspection.django_table_names(only_existing=True, include_views=False)
    quote = connection.ops.quote_name
    _seeded.clear()
    with connection.cursor() as cursor:
        for table in tables:
            cursor.execute(f"SELECT json_agg(t)::text FROM {quote(table)} AS t")
            rows = cursor.fetchone()[0]
            if rows is not None:
                assert QUOTE not in rows, table
                _seeded[table] = rows


def post_migrate_after_flush(emit):
    """Django's ``flush`` command emits ``post_migrate`` after the flush, so that content types,
    permissions and the declared periodic jobs are made again; after this flush they were never
    gone (the seed rows are put back as they were), so it is skipped — 0.15–0.35 s a test on the
    quiet machine, ~80 queries. After Django's own ``TRUNCATE`` (the fallback) it is emitted.
    ``tests/conftest.py`` wraps the command's function with it."""

    def emit_unless_restored(*args, **kwargs):
        if _restored.pop(kwargs.get("db", args[2] if len(args) > 2 else "default"), False):
            return None
        return emit(*args, **kwargs)

    return emit_unless_restored


# database alias → the last flush put the seed rows back (read once by ``post_migrate_after_flush``)
_restored: dict[str, bool] = {}


class DatabaseOperations(PostgresOperations):
    def sql_flush(self, style, tables, *, reset_sequences=False, allow_cascade=False):
        if not tables or reset_sequences or not self._may_skip_triggers():
            _restored[self.connection.alias] = False
            return super().sql_flush(style, tables, reset_sequences=reset_sequences, allow_cascade=allow_cascade)
        with self.connection.cursor() as cursor:
            cursor.execute(STATEMENT_DELETE_TRIGGERS_SQL, [list(tables)])
            observed = sorted(row[0] for row in cursor.fetchall())

        def delete(table: str) -> str:
            return f"{style.SQL_KEYWORD('DELETE FROM')} {style.SQL_FIELD(self.quote_name(table))}"

        def restore(table: str) -> str:
            name = self.quote_name(table)
            return (
                f"INSERT INTO {name} OVERRIDING SYSTEM VALUE "
                f"SELECT * FROM json_populate_recordset(NULL::{name}, {QUOTE}{_seeded[table]}{QUOTE})"
            )

        _restored[self.connection.alias] = bool(_seeded)
        return [
            "SET LOCAL session_replication_role = replica",
            *(delete(table) for table in tables),
            *(restore(table) for table in tables if table in _seeded),
            "SET LOCAL session_replication_role = origin",
            *(delete(table) for table in observed if table not in _seeded),  # empty: their triggers fire
        ]

    def _may_skip_triggers(self) -> bool:
        with self.connection.cursor() as cursor:
            cursor.execute("SELECT current_setting('is_superuser') = 'on'")
            return bool(cursor.fetchone()[0])


class DatabaseWrapper(base.DatabaseWrapper):
    ops_class = DatabaseOperations
