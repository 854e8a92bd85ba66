"""The static checker of sql(): one SELECT over the ks_* views, allow-listed functions (KS-6)."""

import pytest

from achilles.errors import ValidationFailed
from knowledge.sqlcheck import sql_check

ACCEPTED = [
    "SELECT id, title FROM ks_records",
    "select count(*) from ks_records where source_system = 'files'",
    "SELECT source_system, count(*) AS n FROM ks_records GROUP BY source_system ORDER BY n DESC LIMIT 5",
    "SELECT date_trunc('month', created_at) AS m, count(*) FROM ks_records GROUP BY 1",
    "SELECT r.title, l.link_type FROM ks_records r JOIN ks_record_links l ON l.from_record_id = r.id",
    "WITH t AS (SELECT record_id, count(*) AS n FROM ks_chunks GROUP BY record_id) SELECT * FROM t WHERE n > 1",
    "SELECT lower(title), upper(url), length(title), coalesce(author_principal_id, '-') FROM ks_records",
    "SELECT id FROM ks_records UNION SELECT record_id FROM ks_chunks",
    "SELECT title FROM ks_records WHERE title ILIKE '%отпуск%' AND created_at > now() - interval '7 days'",
    "SELECT id::text, CAST(trust_score AS numeric) FROM ks_records",
    "SELECT title FROM ks_records WHERE id IN (SELECT to_record_id FROM ks_record_links)",
]

ATTACKS = {
    "ddl": "DROP TABLE knowledge_records",
    "dml_delete": "DELETE FROM ks_records",
    "dml_update": "UPDATE ks_records SET title = 'x'",
    "dml_insert": "INSERT INTO ks_records (title) VALUES ('x')",
    "several_statements": "SELECT 1 FROM ks_records; DROP TABLE knowledge_records",
    "second_select": "SELECT id FROM ks_records; SELECT id FROM ks_records",
    "pg_sleep": "SELECT pg_sleep(10)",
    "pg_sleep_in_where": "SELECT id FROM ks_records WHERE pg_sleep(1) IS NULL",
    "pg_read_file": "SELECT pg_read_file('/etc/passwd')",
    "catalog_pg_roles": "SELECT * FROM pg_catalog.pg_roles",
    "catalog_unqualified": "SELECT * FROM pg_authid",
    "information_schema": "SELECT * FROM information_schema.tables",
    "base_table": "SELECT acl FROM knowledge_records",
    "schema_qualified_view": "SELECT * FROM public.ks_records",
    "set_config": "SELECT set_config('achilles.principals', 'everyone', false)",
    "set_config_in_cte": "WITH x AS (SELECT set_config('achilles.principals', 'group:finance', true)) SELECT * FROM ks_records, x",
    "current_setting": "SELECT current_setting('achilles.principals')",
    "set_statement": "SET achilles.principals = 'everyone'",
    "set_role": "SET ROLE postgres",
    "reset_role": "RESET ROLE",
    "cte_delete": "WITH x AS (DELETE FROM knowledge_records RETURNING *) SELECT * FROM x",
    "cte_update": "WITH x AS (UPDATE knowledge_records SET acl = '{everyone}' RETURNING id) SELECT * FROM x",
    "select_into": "SELECT * INTO stolen FROM ks_records",
    "for_update": "SELECT * FROM ks_records FOR UPDATE",
    "comment_hides_statement": "SELECT id FROM ks_records /* ; */ ; DROP TABLE knowledge_records --",
    "line_comment_trick": "SELECT id FROM ks_records -- harmless\n; DELETE FROM knowledge_records",
    "string_trick": "SELECT 'a'';DROP TABLE knowledge_records;--' FROM ks_records; DROP TABLE x",
    "dollar_quote_trick": "SELECT $$;$$ FROM ks_records; DROP TABLE knowledge_records",
    "copy": "COPY knowledge_records TO '/tmp/x'",
    "explain": "EXPLAIN ANALYZE SELECT * FROM ks_records",
    "generate_series": "SELECT * FROM generate_series(1, 100000000)",
    "lo_import": "SELECT lo_import('/etc/passwd')",
    "dblink": "SELECT * FROM dblink('host=x', 'select 1') AS t(a int)",
    "regclass_cast": "SELECT 'knowledge_records'::regclass",
    "transaction_control": "COMMIT",
    "values": "VALUES (1)",
    "empty": "   ",
    "garbage": "SELEC id FRM",
    "placeholder": "SELECT id FROM ks_records WHERE id = %s",
    "version": "SELECT version()",
}


@pytest.mark.parametrize("query", ACCEPTED)
def test_allowed_selects_pass(query):
    assert sql_check(query)


@pytest.mark.p0
@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_attacks_are_rejected_with_a_clear_code(name):
    with pytest.raises(ValidationFailed) as caught:
        sql_check(ATTACKS[name])
    assert caught.value.code == "sql_rejected"
    assert str(caught.value.detail).startswith("sql rejected:")


def test_comments_are_dropped_from_what_runs():
    assert "harmless" not in sql_check("SELECT id /* harmless */ FROM ks_records -- harmless")


def test_rejection_names_the_reason():
    with pytest.raises(ValidationFailed, match="pg_sleep"):
        sql_check("SELECT pg_sleep(1)")
    with pytest.raises(ValidationFailed, match="knowledge_records"):
        sql_check("SELECT * FROM knowledge_records")
