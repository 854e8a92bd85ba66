"""sql() on the real database (issue 10, finding 4): the probe's catalog reads, through the facade
and through an agent's SQL tool, return nothing but a refusal; the plan check is the second line."""

import pytest

from achilles.errors import ValidationFailed
from achilles.llm.types import ToolCall
from agents.tools import KnowledgeTools
from knowledge import facade
from knowledge.sql import sql_run
from tests.knowledge.conftest import identity_of
from tests.knowledge.unit.test_sql_scopes import PROBE, VARIATIONS

pytestmark = pytest.mark.django_db

EMPLOYEE = identity_of("everyone", "user:1")
LEAKS = ("achilles_ks_reader", "postgres", "knowledge_records", "n_live_tup", "statement_timeout", "ks_reader_records")


@pytest.fixture
def records(make_record):
    make_record("open.md", "Открытый документ.", acl=["everyone"])
    make_record("fin.md", "Бюджет 2026.", acl=["group:finance"])


@pytest.mark.p0
@pytest.mark.parametrize("name", sorted(PROBE))
def test_the_probes_queries_are_refused_by_the_facade(records, name):
    """Failed before the fix: «… zz, pg_roles» returned every role of the cluster (likewise pg_class,
    pg_proc, pg_policies, pg_stat_user_tables' true row counts, pg_settings)."""
    with pytest.raises(ValidationFailed) as info:
        facade.sql(PROBE[name], EMPLOYEE)
    assert info.value.code == "sql_rejected"


@pytest.mark.parametrize("name", sorted(PROBE) + ["lateral", "sibling_subqueries", "join_on_subquery"])
def test_the_agents_sql_tool_gets_a_refusal_and_no_catalog_data(records, name):
    query = PROBE.get(name) or VARIATIONS[name]
    observation = KnowledgeTools(EMPLOYEE).call(ToolCall(id="1", name="sql", arguments={"query": query}))
    assert observation.startswith("error (sql_rejected)")
    assert not any(leak in observation for leak in LEAKS)


@pytest.mark.p0
def test_the_plan_check_refuses_catalogs_even_if_the_checker_were_fooled(records, monkeypatch):
    import knowledge.sql as ks_sql

    monkeypatch.setattr(ks_sql, "sql_check", lambda query: query)
    for statement in (
        PROBE["roles"],
        PROBE["stat_user_tables"],
        "SELECT count(*) FROM pg_class",
        "SELECT id FROM ks_records WHERE EXISTS (SELECT 1 FROM pg_roles)",
        "SELECT table_name FROM information_schema.tables",
    ):
        with pytest.raises(ValidationFailed) as info:
            sql_run(statement, EMPLOYEE)
        assert info.value.code == "sql_rejected"
        assert "pg_catalog." in info.value.detail or "information_schema" in info.value.detail
    # the views themselves still pass the plan check (their tables are the allowed relations)
    assert (
        len(
            sql_run(
                "SELECT r.id FROM ks_records r JOIN ks_chunks c ON c.record_id = r.id "
                "LEFT JOIN ks_record_links l ON l.from_record_id = r.id",
                EMPLOYEE,
            ).rows
        )
        == 1
    )


def test_the_reader_role_holds_only_the_views_and_belongs_to_no_role():
    """What the role may read besides PUBLIC's catalog grants (which PostgreSQL gives every role,
    hence the plan check): the three views, the needed columns of their tables, no role membership
    (no pg_read_all_stats, pg_monitor, …), no login."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("""SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
                          WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'v', 'm', 'p')
                            AND has_table_privilege('achilles_ks_reader', c.oid, 'SELECT')""")
        assert sorted(row[0] for row in cursor.fetchall()) == ["ks_chunks", "ks_record_links", "ks_records"]
        cursor.execute("""SELECT count(*) FROM pg_auth_members m JOIN pg_roles r ON r.oid = m.member
                          WHERE r.rolname = 'achilles_ks_reader'""")
        assert cursor.fetchone()[0] == 0
        cursor.execute(
            "SELECT rolcanlogin, rolsuper, rolcreaterole, rolbypassrls FROM pg_roles "
            "WHERE rolname = 'achilles_ks_reader'"
        )
        assert cursor.fetchone() == (False, False, False, False)
