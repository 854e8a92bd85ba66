"""sql(): one checked SELECT over the ks_* views, under the reader role and row-level security (KS-6)."""

import pytest
from django.db import connection

from achilles.errors import ValidationFailed
from knowledge import facade
from knowledge.sql import sql_run
from tests.knowledge.conftest import identity_of
from tests.knowledge.unit.test_sqlcheck import ATTACKS

pytestmark = pytest.mark.django_db

EMPLOYEE = identity_of("everyone", "user:1")


@pytest.fixture
def records(make_record):
    return {
        "open": make_record("open.md", "Открытый документ.", acl=["everyone"], author="user:3"),
        "finance": make_record("fin.md", "Бюджет 2026.", acl=["group:finance"]),
        "public": make_record("pub.md", "Тарифы.", acl=["public"]),
    }


def test_rows_are_limited_to_the_identity_acl(records):
    result = facade.sql("SELECT id, title FROM ks_records ORDER BY id", EMPLOYEE)
    assert result.columns == ("id", "title")
    assert [row[0] for row in result.rows] == [records["open"]]
    assert result.truncated is False
    anon = facade.sql("SELECT id FROM ks_records", identity_of("public"))
    assert [row[0] for row in anon.rows] == [records["public"]]


@pytest.mark.p0
def test_every_view_is_under_rls(records, make_record):
    from knowledge.services import record_link_create

    record_link_create(from_record_id=records["open"], to_record_id=records["finance"])
    assert facade.sql("SELECT count(*) FROM ks_record_links", EMPLOYEE).rows == ((0,),)
    assert facade.sql("SELECT count(*) FROM ks_record_links", identity_of("everyone", "group:finance")).rows == ((1,),)
    chunks = facade.sql("SELECT DISTINCT record_id FROM ks_chunks", EMPLOYEE)
    assert {row[0] for row in chunks.rows} == {records["open"]}


def test_aggregates_and_allowed_functions_work(records):
    result = facade.sql(
        "SELECT lower(source_system) AS s, count(*) AS n, max(length(title)) FROM ks_records GROUP BY 1",
        identity_of("everyone", "public", "group:finance"),
    )
    assert result.rows[0][:2] == ("files", 3)


def test_row_cap_truncates(make_record):
    for i in range(5):
        make_record(f"r{i}.md", f"Документ {i}.")
    result = sql_run("SELECT id FROM ks_records", EMPLOYEE, row_cap=3)
    assert len(result.rows) == 3 and result.truncated is True


@pytest.mark.p0
@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_attacks_are_refused_and_return_no_data(records, name):
    with pytest.raises(ValidationFailed) as caught:
        facade.sql(ATTACKS[name], EMPLOYEE)
    assert caught.value.code == "sql_rejected"
    # nothing was changed or dropped
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM knowledge_records")
        assert cursor.fetchone()[0] == 3


@pytest.mark.p0
def test_principals_cannot_be_changed_from_inside(records):
    with pytest.raises(ValidationFailed):
        facade.sql("SELECT set_config('achilles.principals', 'group:finance', true), id FROM ks_records", EMPLOYEE)
    # and the session is back to normal: our role, no principals left behind
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_user, current_setting('achilles.principals', true)")
        role, principals = cursor.fetchone()
    assert role != "achilles_ks_reader" and not principals


@pytest.mark.p0
def test_database_refuses_writes_even_if_the_checker_were_fooled(records, monkeypatch):
    import knowledge.sql as ks_sql

    monkeypatch.setattr(ks_sql, "sql_check", lambda query: query)
    for statement in (
        "DELETE FROM knowledge_records",
        "UPDATE ks_records SET title = 'x'",
        "SELECT * FROM knowledge_records",
        "SELECT * FROM pg_authid",
        "SELECT pg_read_file('/etc/passwd')",
    ):
        with pytest.raises(ValidationFailed):
            sql_run(statement, EMPLOYEE)
    # RLS still applies to the views with the checker gone
    assert {row[0] for row in sql_run("SELECT id FROM ks_records", EMPLOYEE).rows} == {records["open"]}
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM knowledge_records")
        assert cursor.fetchone()[0] == 3


@pytest.mark.p0
def test_a_slow_query_is_cut_by_the_timeout(make_record):
    for i in range(25):
        make_record(f"slow/{i}.md", f"Документ {i}.")
    with pytest.raises(ValidationFailed) as caught:
        sql_run(
            "SELECT count(*) FROM ks_records a, ks_records b, ks_records c, ks_records d, ks_records e, ks_records f",
            EMPLOYEE,
            timeout_ms=200,
        )
    assert caught.value.code == "sql_timeout"
    # the connection is usable afterwards
    assert facade.sql("SELECT count(*) FROM ks_records", EMPLOYEE).rows == ((25,),)


def test_runtime_errors_are_clear_and_not_500(records):
    with pytest.raises(ValidationFailed) as caught:
        facade.sql("SELECT no_such_column FROM ks_records", EMPLOYEE)
    assert caught.value.code == "sql_rejected" and "no_such_column" in str(caught.value.detail)
    with pytest.raises(ValidationFailed):
        facade.sql("SELECT 1 / 0 FROM ks_records", EMPLOYEE)


def test_identity_without_principals_sees_nothing(records):
    assert facade.sql("SELECT id FROM ks_records", identity_of()).rows == ()


@pytest.mark.django_db(transaction=True)
def test_outside_any_transaction_the_session_is_restored(make_record):
    # given a caller in autocommit mode (a Celery task, an ASGI request)
    make_record("a.md", "Текст.")
    # when
    assert facade.sql("SELECT count(*) FROM ks_records", EMPLOYEE).rows == ((1,),)
    with pytest.raises(ValidationFailed):
        facade.sql("SELECT 1 / 0 FROM ks_records", EMPLOYEE)
    # then role, read-only mode, timeout and principals are all back to the defaults
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT current_user, current_setting('transaction_read_only'), "
            "current_setting('statement_timeout'), current_setting('achilles.principals', true)"
        )
        role, read_only, timeout, principals = cursor.fetchone()
    assert role != "achilles_ks_reader" and read_only == "off" and timeout == "0" and not principals
