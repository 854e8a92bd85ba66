"""The test suite's flush (``tests/postgres/base.py``: rows deleted, not every table truncated)
leaves the database as the run's began: what a test wrote is gone (guarded tables too), the rows a
migration or ``post_migrate`` seeded are back as they were, and the content generation moved."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.core.management.color import no_style
from django.db import connection
from django.db.backends.postgresql.operations import DatabaseOperations as PostgresOperations
from django.test.utils import CaptureQueriesContext

from achilles.audit import audit_record
from knowledge import facade
from tests.achilles.factories import UserFactory

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def _populate() -> None:
    user = UserFactory(username="flushed")
    audit_record(action="flush.probe", actor=user, target="x")  # append-only: a DELETE trigger refuses
    facade.upsert_record(source_system="uploads", external_id="1", title="t", text="Текст.", acl=["everyone"])


def _counts() -> dict[str, int]:
    tables = connection.introspection.django_table_names(only_existing=True, include_views=False)
    with connection.cursor() as cursor:
        cursor.execute(
            " UNION ALL ".join(f"SELECT '{t}', count(*) FROM {connection.ops.quote_name(t)}" for t in tables)
        )
        return dict(cursor.fetchall())


def _generation() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT n FROM knowledge_generation")
        return cursor.fetchone()[0]


def _rows(table: str) -> list[tuple]:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT * FROM {connection.ops.quote_name(table)} ORDER BY 1")
        return cursor.fetchall()


def test_the_suites_flush_deletes_and_puts_back_what_the_database_began_with():
    tables = connection.introspection.django_table_names(only_existing=True, include_views=False)
    assert connection.ops.sql_flush(no_style(), tables)[0] == "SET LOCAL session_replication_role = replica"
    began = _counts()
    seeded = {table: _rows(table) for table in ("hub_state", "platform_settings", "django_content_type")}
    assert all(seeded.values())  # a migration's singletons, post_migrate's rows

    _populate()
    with connection.cursor() as cursor:  # a test changes a seeded singleton
        cursor.execute("UPDATE platform_settings SET updated_at = now() - interval '1 day'")
    generation = _generation()
    with CaptureQueriesContext(connection) as flushed:
        call_command("flush", interactive=False, verbosity=0, reset_sequences=False)  # as TransactionTestCase does

    assert _counts() == began
    assert {table: _rows(table) for table in seeded} == seeded
    assert _generation() > generation  # as TRUNCATE fires the chunks' statement trigger, the flush fires it
    # post_migrate is not emitted: what it would make again was never gone
    assert not [
        q for q in flushed.captured_queries if q["sql"].startswith("SELECT") and "django_content_type" in q["sql"]
    ]


def test_the_flush_statements_without_superuser_rights_are_djangos():
    tables = ["users", "knowledge_chunks"]
    with connection.cursor() as cursor:
        cursor.execute("SET ROLE pg_read_all_data")  # any role without superuser
        try:
            statements = connection.ops.sql_flush(no_style(), tables)
        finally:
            cursor.execute("RESET ROLE")
    assert statements == PostgresOperations.sql_flush(connection.ops, no_style(), tables)
