"""New migrations may not lock a large table while they build an index (docs/deployment.md
«Upgrades»): ``CREATE INDEX`` without ``CONCURRENTLY`` holds a lock that blocks every write to the
table for as long as the build takes — minutes on a store of millions of chunks. On the tables
below a new migration uses ``AddIndexConcurrently`` / ``RemoveIndexConcurrently``
(``django.contrib.postgres.operations``, in a migration with ``atomic = False``) or ``RunSQL`` with
``CONCURRENTLY``; a unique constraint is built as a unique index concurrently first and then attached
(``ALTER TABLE … ADD CONSTRAINT … USING INDEX``). The migrations that exist today are grandfathered:
they ran while the tables were small."""

from __future__ import annotations

import re

import pytest
from django.apps import apps
from django.contrib.postgres.operations import AddIndexConcurrently, RemoveIndexConcurrently
from django.db import migrations, models
from django.db.migrations.loader import MigrationLoader
from django.db.migrations.state import ProjectState

pytestmark = pytest.mark.unit

# Tables that grow with use (per message, chunk, run, event, mirrored issue): an index built on them
# in a transaction stops the platform writing to them.
LARGE_TABLES = frozenset(
    {
        "knowledge_records",
        "knowledge_chunks",
        "knowledge_record_links",
        "knowledge_access_signals",
        "knowledge_documents",
        "messages",
        "message_citations",
        "retrieval_trace",
        "conversations",
        "agent_runs",
        "audit_events",
        "hub_issues",
        "hub_issue_comments",
        "hub_issue_links",
        "hub_commands",
        "hub_batches",
    }
)

# Every migration that existed when this check was introduced.
GRANDFATHERED = frozenset(
    {
        "achilles.0001_initial",
        "achilles.0002_database_invariants",
        "achilles.0003_bump_updated_at_statement_time",
        "achilles.0004_agent_run_token_cap",
        "achilles.0004_audit_events",
        "achilles.0005_merge_token_cap_audit",
        "achilles.0006_agent_run_token_cap_db_default",
        "achilles.0007_platform_settings_row",
        "achilles.0008_allowed_model",
        "achilles.0009_user_source",
        "achilles.0010_model_prices",
        "achilles.0011_user_source_oidc",
        "achilles.0012_scim",
        "agents.0001_initial",
        "agents.0002_database_invariants",
        "agents.0003_run_worker_and_reasons",
        "agents.0004_next_run_notify",
        "agents.0005_drop_duplicate_fk_indexes",
        "agents.0006_run_owner",
        "agents.0007_run_owner_checked_per_statement",
        "agents.0008_agent_runs_fillfactor",
        "agents.0009_drop_agent_model_index",
        "agents.0010_spend_split",
        "conversations.0001_initial",
        "conversations.0002_database_invariants",
        "conversations.0003_citation_markers",
        "conversations.0004_refused_sentences",
        "conversations.0005_spend_split",
        "hub.0001_initial",
        "hub.0002_database_invariants",
        "hub.0003_filter_indexes",
        "hub.0004_batch_owners",
        "knowledge.0001_initial",
        "knowledge.0002_database_invariants",
        "knowledge.0003_chunk_storage",
        "knowledge.0004_public_embedding_index",
        "knowledge.0005_denser_embedding_index",
        "knowledge.0006_content_generation",
        "knowledge.0007_record_url_http",
        "knowledge.0008_withheld_opt_out",
        "knowledge.0009_search_as_user_permission",
        "knowledge.0010_chunk_gin_fastupdate_off",
        "knowledge.0011_record_user_writable",
        "knowledge.0012_uploaded_documents",
        "knowledge.0013_acl_clauses",
        "knowledge.0014_connectors",
        "usage.0001_initial",
        "usage.0002_rollup_triggers",
        "usage.0003_monthly_rollup",
        "usage.0004_weekly_rollup",
    }
)

_BLOCKING_SQL = re.compile(
    r"\bCREATE\s+(?:UNIQUE\s+)?INDEX\s+(?!CONCURRENTLY)(?:IF\s+NOT\s+EXISTS\s+)?\S+\s+ON\s+(?:ONLY\s+)?\"?(\w+)", re.I
)


def _table(app_label: str, model_name: str) -> str | None:
    try:
        return apps.get_model(app_label, model_name)._meta.db_table
    except LookupError:
        return None


def _sql_texts(operation: migrations.RunSQL) -> list[str]:
    sql = operation.sql
    items = sql if isinstance(sql, list | tuple) else [sql]
    return [item if isinstance(item, str) else item[0] for item in items]


def _db_shape(field: models.Field) -> tuple:
    """What of a field reaches the database: its deconstruction without the attributes Django's schema
    editor never alters a column for (``Field.non_db_attrs``: labels, help texts, choices…)."""
    _name, path, args, kwargs = field.deconstruct()
    return path, args, {k: v for k, v in kwargs.items() if k not in field.non_db_attrs}


def _alters_only_labels(operation, before: ProjectState | None, app_label: str) -> bool:
    """An ``AlterField`` that changes what no column holds (a label, a help text) builds nothing."""
    if before is None or not isinstance(operation, migrations.AlterField):
        return False
    model = before.models.get((app_label, operation.model_name))
    old = model and model.fields.get(operation.name)
    return old is not None and _db_shape(old) == _db_shape(operation.field)


def blocking_index_builds(
    app_label: str, migration: migrations.Migration, before: ProjectState | None = None
) -> list[str]:
    """What in ``migration`` builds an index on a large table inside a lock, one line each (``before``:
    the project's state the migration starts from, when known)."""
    problems = []
    for operation in migration.operations:
        where = f"{app_label}.{migration.name}: {operation.describe()}"
        if isinstance(operation, AddIndexConcurrently | RemoveIndexConcurrently):
            continue
        if _alters_only_labels(operation, before, app_label):
            continue
        builds_index = (
            isinstance(operation, migrations.AddIndex)
            or (
                isinstance(operation, migrations.AddConstraint)
                and isinstance(operation.constraint, models.UniqueConstraint)
            )
            # a ForeignKey's db_index is True unless switched off
            or (
                isinstance(operation, migrations.AddField | migrations.AlterField)
                and (operation.field.db_index or operation.field.unique)
            )
        )
        if builds_index:
            table = _table(app_label, operation.model_name)
        elif isinstance(operation, migrations.RunSQL):
            tables = {m.group(1) for text in _sql_texts(operation) for m in _BLOCKING_SQL.finditer(text)}
            problems += [f"{where} (CREATE INDEX on {t} without CONCURRENTLY)" for t in sorted(tables & LARGE_TABLES)]
            continue
        else:
            continue
        if table in LARGE_TABLES:
            problems.append(f"{where} (an index on {table} built under a lock: use AddIndexConcurrently)")
    return problems


def test_new_migrations_build_no_index_on_a_large_table_under_a_lock():
    loader = MigrationLoader(None, ignore_no_migrations=True)
    ours = {
        app.label
        for app in apps.get_app_configs()
        if not app.name.startswith(("django.", "django_", "axes", "allauth"))
    }
    problems = []
    for (app_label, name), migration in loader.disk_migrations.items():
        if app_label in ours and f"{app_label}.{name}" not in GRANDFATHERED:
            before = loader.project_state((app_label, name), at_end=False)
            problems += blocking_index_builds(app_label, migration, before)
    assert not problems, "\n".join(problems)


def test_the_grandfathered_migrations_exist():
    """The list names real migrations (a renamed app would silently exempt nothing or everything)."""
    loader = MigrationLoader(None, ignore_no_migrations=True)
    on_disk = {f"{app}.{name}" for app, name in loader.disk_migrations}
    assert on_disk >= GRANDFATHERED, GRANDFATHERED - on_disk


def _migration(*operations) -> migrations.Migration:
    migration = migrations.Migration("0999_new", "knowledge")
    migration.operations = list(operations)
    return migration


@pytest.mark.parametrize(
    "operation",
    [
        migrations.AddIndex("chunk", models.Index(fields=["ordinal"], name="knowledge_chunk_ordinal")),
        migrations.RunSQL("CREATE INDEX knowledge_chunks_x ON knowledge_chunks (ordinal)"),
        migrations.RunSQL("create unique index if not exists x on messages (id)"),
        migrations.AlterField("record", "title", models.CharField(max_length=500, db_index=True)),
    ],
    ids=["AddIndex", "RunSQL", "RunSQL-unique", "AlterField-db_index"],
)
def test_an_index_built_under_a_lock_on_a_large_table_is_flagged(operation):
    assert blocking_index_builds("knowledge", _migration(operation))


@pytest.mark.parametrize(
    "operation",
    [
        AddIndexConcurrently("chunk", models.Index(fields=["ordinal"], name="knowledge_chunk_ordinal")),
        migrations.RunSQL("CREATE INDEX CONCURRENTLY knowledge_chunks_x ON knowledge_chunks (ordinal)"),
        migrations.RunSQL("CREATE INDEX small_x ON knowledge_source_policies (source_system)"),
    ],
    ids=["AddIndexConcurrently", "RunSQL-concurrently", "a-small-table"],
)
def test_a_concurrent_build_or_a_small_table_passes(operation):
    assert not blocking_index_builds("knowledge", _migration(operation))


def test_the_large_tables_are_tables_of_the_platform():
    tables = {model._meta.db_table for model in apps.get_models()}
    assert tables >= LARGE_TABLES, LARGE_TABLES - tables


def test_a_changed_label_on_an_indexed_field_builds_nothing():
    # given the platform's state today: chunks.record is a foreign key (indexed) on a large table
    now = MigrationLoader(None, ignore_no_migrations=True).project_state()
    relabelled = models.ForeignKey(
        "knowledge.record", on_delete=models.DO_NOTHING, related_name="chunks", verbose_name="запись", help_text="?"
    )
    # then a new label alone passes, a new index on the same kind of field does not
    assert not blocking_index_builds("knowledge", _migration(migrations.AlterField("chunk", "record", relabelled)), now)
    indexed = models.CharField("заголовок", max_length=500, db_index=True)
    assert blocking_index_builds("knowledge", _migration(migrations.AlterField("record", "title", indexed)), now)
