"""Property: the «Знания» page's per-source counts (``facade.readable_counts_by_source``, behind
``GET /api/knowledge/sources``) equal a brute-force count of the records whose ACL — the any-of list
and every «all of» clause (``acl_also``) — meets the identity's principals; a source the identity can
read nothing of is not even named."""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from knowledge import facade
from knowledge.models import Record
from knowledge.selectors import principals_of
from knowledge.services import record_upsert

pytestmark = [pytest.mark.django_db, pytest.mark.p0]

PRINCIPALS = ["everyone", "public", "group:finance", "group:it", "user:1", "user:2"]
SYSTEMS = ["uploads", "confluence", "jira", "files"]

principal_sets = st.sets(st.sampled_from(PRINCIPALS), min_size=1, max_size=3)
records = st.lists(
    st.tuples(principal_sets, st.sampled_from(SYSTEMS), st.lists(principal_sets, max_size=2)),
    max_size=10,
)
identities = st.sets(st.sampled_from(PRINCIPALS), max_size=4)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)
@given(docs=records, principals=identities)
def test_counts_per_source_match_a_brute_force_count(hash_embedder, docs, principals):
    Record.objects.all().delete()
    for i, (acl, system, clauses) in enumerate(docs):
        record_upsert(
            source_system=system,
            external_id=f"d{i}",
            title=f"Документ {i}",
            text="текст",
            acl=sorted(acl),
            acl_also=[sorted(clause) for clause in clauses],
        )
    identity = facade.Identity(principals=frozenset(principals))
    held = set(principals_of(identity))
    expected: dict[str, int] = {}
    for acl, system, clauses in docs:
        if acl & held and all(clause & held for clause in clauses):
            expected[system] = expected.get(system, 0) + 1

    assert facade.readable_counts_by_source(identity) == expected


def test_the_sources_route_names_files_confluence_jira_and_counts_only_the_readable(
    hash_embedder, client_for, user_factory
):
    reader = user_factory(username="reader", groups=["it"])
    record_upsert(source_system="uploads", external_id="a", title="Открытый", text="т", acl=["everyone"])
    record_upsert(source_system="uploads", external_id="b", title="ИТ", text="т", acl=["group:it"])
    record_upsert(source_system="uploads", external_id="c", title="Финансы", text="т", acl=["group:finance"])
    record_upsert(source_system="secret-wiki", external_id="d", title="Закрытый", text="т", acl=["group:finance"])
    record_upsert(source_system="hr", external_id="e", title="Кадры", text="т", acl=["everyone"])

    response = client_for(reader).get("/api/knowledge/sources")

    assert response.status_code == 200
    assert response.json()["items"] == [
        {"source_system": "uploads", "documents": 2},
        {"source_system": "confluence", "documents": 0},
        {"source_system": "jira", "documents": 0},
        {"source_system": "hr", "documents": 1},
    ]
