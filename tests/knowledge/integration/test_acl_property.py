"""Property: over random ACLs, principals, links and queries, nothing outside the identity's ACL
ever comes back — not from search, graph or sql — and withheld carries coordinates only (P0)."""

import dataclasses

import pytest
from django.db import connection
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from knowledge import facade
from knowledge.models import Record
from knowledge.services import record_link_create, record_upsert

pytestmark = [pytest.mark.django_db, pytest.mark.p0]

PRINCIPALS = ["everyone", "public", "group:finance", "group:it", "user:1", "user:2"]
WORDS = ["отпуск", "бюджет", "сервер", "пароль", "премия", "договор", "отчёт", "доступ"]
SYSTEMS = ["files", "confluence", "jira"]

acls = st.sets(st.sampled_from(PRINCIPALS), min_size=1, max_size=3)
documents = st.lists(
    st.tuples(
        acls,
        st.lists(st.sampled_from(WORDS), min_size=1, max_size=6),
        st.sampled_from(SYSTEMS),
        st.one_of(st.none(), st.sampled_from(["user:1", "user:2", "user:3"])),
    ),
    min_size=1,
    max_size=8,
)
identities = st.sets(st.sampled_from(PRINCIPALS), min_size=0, max_size=4)
queries = st.lists(st.sampled_from(WORDS), min_size=1, max_size=3).map(" ".join)
links = st.lists(st.tuples(st.integers(0, 7), st.integers(0, 7)), max_size=10)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)
@given(docs=documents, principals=identities, query=queries, edges=links, k=st.integers(1, 10))
def test_nothing_outside_the_acl_ever_comes_back(hash_embedder, docs, principals, query, edges, k):
    Record.objects.all().delete()
    ids, acl_of, coordinates_of = [], {}, {}
    for i, (acl, words, system, author) in enumerate(docs):
        outcome = record_upsert(
            source_system=system,
            external_id=f"doc-{i}",
            title=f"Документ {i}",
            text=" ".join(words),
            acl=sorted(acl),
            author_principal_id=author,
            origin="prop",
        )
        ids.append(outcome.record_id)
        acl_of[outcome.record_id] = set(acl)
        coordinates_of[outcome.record_id] = (system, author)
    for a, b in edges:
        if a < len(ids) and b < len(ids) and a != b:
            record_link_create(from_record_id=ids[a], to_record_id=ids[b])
    identity = facade.Identity(principals=frozenset(principals))
    visible = {rid for rid, acl in acl_of.items() if acl & principals}

    # search
    result = facade.search(query, identity, k)
    assert len(result.candidates) <= k
    assert {c.record_id for c in result.candidates} <= visible
    hidden_coordinates = {coordinates_of[rid] for rid in set(ids) - visible}
    for item in result.withheld:
        assert [f.name for f in dataclasses.fields(item)] == ["source_system", "author_principal_id"]
        assert (item.source_system, item.author_principal_id) in hidden_coordinates
    assert len(set(result.withheld)) == len(result.withheld)

    # graph
    for rid in ids:
        if rid in visible:
            nodes = facade.graph(rid, identity, depth=2).nodes
            assert {n.record_id for n in nodes} <= visible
            assert {n.via_record_id for n in nodes} <= visible
        else:
            with pytest.raises(facade_not_found()):
                facade.graph(rid, identity)

    # sql
    assert {row[0] for row in facade.sql("SELECT id FROM ks_records", identity).rows} == visible
    assert {row[0] for row in facade.sql("SELECT record_id FROM ks_chunks", identity).rows} <= visible
    rows = facade.sql("SELECT from_record_id, to_record_id FROM ks_record_links", identity).rows
    assert all(a in visible and b in visible for a, b in rows)
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_user")
        assert cursor.fetchone()[0] != "achilles_ks_reader"


def facade_not_found():
    from achilles.errors import NotFound

    return NotFound
