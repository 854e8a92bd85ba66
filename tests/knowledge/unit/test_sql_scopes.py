"""SQL allow-list by scope (issue 10, finding 4): a CTE name covers only its own scope, and catalog
and statistics relations are refused outright, however they are named, shadowed or aliased."""

import pytest

from achilles.errors import ValidationFailed
from knowledge.sqlcheck import sql_check

# The probe's queries: each read a catalog past the allow-list before the fix (the outer pg_*
# reference was taken for the CTE defined inside the subquery).
PROBE = {
    "roles": "SELECT rolname FROM (WITH pg_roles AS (SELECT 1 AS x) SELECT x FROM pg_roles) zz, pg_roles",
    "class": "SELECT relname, reltuples FROM (WITH pg_class AS (SELECT 1 AS x) SELECT x FROM pg_class) zz, pg_class",
    "proc": "SELECT proname FROM (WITH pg_proc AS (SELECT 1 AS x) SELECT x FROM pg_proc) zz, pg_proc",
    "policies": "SELECT policyname, qual FROM (WITH pg_policies AS (SELECT 1 AS x) SELECT x FROM pg_policies) zz, pg_policies",
    "stat_user_tables": "SELECT relname, n_live_tup FROM (WITH pg_stat_user_tables AS (SELECT 1 AS x) "
    "SELECT x FROM pg_stat_user_tables) zz, pg_stat_user_tables",
    "settings": "SELECT name, setting FROM (WITH pg_settings AS (SELECT 1 AS x) SELECT x FROM pg_settings) zz, pg_settings",
}

# Twenty-plus variations of CTE / subquery / alias shadowing: every one reaches a relation that is
# neither a documented view nor a CTE visible where it is referenced.
VARIATIONS = {
    "cte_in_where_subquery": "SELECT id FROM ks_records WHERE id IN (WITH pg_roles AS (SELECT 1 AS x) SELECT x FROM pg_roles) "
    "AND EXISTS (SELECT 1 FROM pg_roles)",
    "cte_in_exists_outer_ref": "SELECT 1 FROM ks_records WHERE EXISTS (WITH pg_authid AS (SELECT 1 AS a) SELECT a FROM pg_authid) "
    "UNION SELECT 1 FROM pg_authid",
    "sibling_subqueries": "SELECT * FROM (WITH secret AS (SELECT id FROM ks_records) SELECT * FROM secret) a, "
    "(SELECT * FROM secret) b",
    "cte_inside_union_branch": "SELECT id FROM (WITH knowledge_records AS (SELECT 1 AS id) SELECT id FROM knowledge_records) a "
    "UNION ALL SELECT id FROM knowledge_records",
    "base_table_shadow_outer": "SELECT acl FROM (WITH knowledge_chunks AS (SELECT 1 AS x) SELECT x FROM knowledge_chunks) zz, "
    "knowledge_chunks",
    "deep_nesting": "SELECT * FROM (SELECT * FROM (WITH users AS (SELECT 1 AS x) SELECT x FROM users) a) b, users",
    "lateral": "SELECT * FROM ks_records r, LATERAL (WITH pg_user AS (SELECT 1 AS x) SELECT x FROM pg_user) u, "
    "LATERAL (SELECT usename FROM pg_user) v",
    "join_on_subquery": "SELECT * FROM ks_records r JOIN (WITH api_tokens AS (SELECT 1 AS id) SELECT id FROM api_tokens) t "
    "ON t.id = r.id JOIN api_tokens k ON k.id = r.id",
    "scalar_subquery": "SELECT (SELECT count(*) FROM pg_class) FROM ks_records",
    "scalar_subquery_in_cte": "WITH c AS (SELECT (SELECT count(*) FROM pg_database) AS n) SELECT n FROM c",
    "alias_named_like_a_view": "SELECT * FROM users AS ks_records",
    "alias_of_a_catalog": "SELECT * FROM pg_shadow AS t",
    "cte_alias_catalog_name": "WITH pg_roles AS (SELECT id FROM ks_records) SELECT id FROM pg_roles",
    "derived_alias_catalog_name": "SELECT * FROM (SELECT id FROM ks_records) AS pg_stat_activity",
    "later_cte_reads_real_table": "WITH a AS (SELECT 1 AS x), b AS (SELECT * FROM users) SELECT * FROM a, b",
    "cte_scope_does_not_leak_up": "SELECT * FROM (WITH t AS (SELECT 1 AS x) SELECT x FROM t) s WHERE EXISTS (SELECT 1 FROM t)",
    "recursive_cte_plus_outer": "WITH RECURSIVE r AS (SELECT 1 AS n UNION ALL SELECT n + 1 FROM r WHERE n < 3) "
    "SELECT * FROM r, agent_runs",
    "quoted_identifier": 'SELECT * FROM "pg_roles"',
    "upper_case_catalog": "SELECT * FROM PG_ROLES",
    "information_schema_in_subquery": "SELECT * FROM ks_records WHERE title IN (SELECT table_name FROM information_schema.tables)",
    "schema_qualified_in_cte": "WITH x AS (SELECT * FROM pg_catalog.pg_roles) SELECT * FROM x",
    "stat_view_in_union": "SELECT id::text FROM ks_records UNION SELECT relname FROM pg_stat_all_tables",
    "large_object_catalog": "SELECT * FROM pg_largeobject",
    "toast_schema": "SELECT * FROM pg_toast.pg_toast_2619",
    "in_subquery_alias_shadow": "SELECT * FROM ks_records WHERE id IN (SELECT id FROM (WITH users AS (SELECT 1 AS id) "
    "SELECT id FROM users) u) AND id IN (SELECT id FROM users)",
}

STILL_ACCEPTED = [
    "WITH t AS (SELECT id FROM ks_records) SELECT * FROM (SELECT id FROM t) s",  # a CTE seen from a nested scope
    "SELECT * FROM (WITH t AS (SELECT id FROM ks_records) SELECT id FROM t) s",
    "WITH ks_records AS (SELECT id FROM ks_chunks) SELECT id FROM ks_records",  # shadowing a view with a view
    "WITH RECURSIVE r AS (SELECT 1 AS n UNION ALL SELECT n + 1 FROM r WHERE n < 3) SELECT * FROM r",
    "SELECT r.id FROM ks_records AS r WHERE EXISTS (SELECT 1 FROM ks_chunks c WHERE c.record_id = r.id)",
]


@pytest.mark.p0
@pytest.mark.parametrize("name", sorted(PROBE))
def test_the_probes_cte_shadowing_is_refused(name):
    """Failed before the fix: sql_check accepted each of these (CTE names were collected for the
    whole tree, so the outer catalog reference passed as «a CTE»)."""
    with pytest.raises(ValidationFailed) as info:
        sql_check(PROBE[name])
    assert info.value.code == "sql_rejected"


@pytest.mark.parametrize("name", sorted(VARIATIONS))
def test_shadowing_variations_are_refused(name):
    with pytest.raises(ValidationFailed) as info:
        sql_check(VARIATIONS[name])
    assert info.value.code == "sql_rejected"


@pytest.mark.parametrize("query", STILL_ACCEPTED)
def test_scoped_ctes_still_work(query):
    assert sql_check(query)


def test_there_are_at_least_twenty_variations():
    assert len(VARIATIONS) >= 20
