"""Property (issue 23): random Confluence-like page trees — a space permission and random view
restrictions on random pages — stored as records with ``acl`` = the space permission and one
``acl_also`` clause per restricted page on the path; for random readers, every path of the store
(lexical, vector by the HNSW walk and exactly, withheld, graph, sql under RLS, visible_records)
answers exactly what Confluence's rule says: the reader passes the space permission and every
ancestor's and the page's own restriction."""

import pytest
from django.db import connection, transaction
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from achilles.errors import NotFound
from knowledge import facade
from knowledge.models import Record
from knowledge.search import vector
from knowledge.search.embedding import embedding_config

pytestmark = [pytest.mark.django_db, pytest.mark.p0]

USERS = [f"user:{i}" for i in range(1, 5)]
GROUPS = ["group:dev", "group:ops", "group:hr"]
PRINCIPALS = USERS + GROUPS + ["everyone"]
SOURCE = "confluence"
WORD = "регламент"

principal_sets = st.sets(st.sampled_from(PRINCIPALS), min_size=1, max_size=3)


@st.composite
def spaces(draw):
    """(space permission, [(parent index or None, restriction or None)] in tree order)."""
    n = draw(st.integers(1, 7))
    pages = []
    for i in range(n):
        parent = draw(st.one_of(st.none(), st.integers(0, i - 1))) if i else None
        restriction = draw(st.one_of(st.none(), st.none(), principal_sets))
        pages.append((parent, restriction))
    return draw(principal_sets), pages


# a reader: one user (or none: a service identity) and some groups; `everyone` for the signed-in
readers = st.builds(
    lambda user, groups, signed_in: frozenset(
        ({user} if user else set()) | groups | ({"everyone"} if signed_in else set())
    ),
    st.one_of(st.none(), st.sampled_from(USERS)),
    st.sets(st.sampled_from(GROUPS), max_size=2),
    st.booleans(),
)


def path_restrictions(pages, i):
    """The restrictions on the page's path, the root's first (Confluence: every one of them holds)."""
    chain = []
    while i is not None:
        parent, restriction = pages[i]
        if restriction:
            chain.append(restriction)
        i = parent
    return chain[::-1]


def confluence_allows(reader, space, pages, i):
    """Brute force: the space permission, then every ancestor's and the page's own restriction."""
    return bool(reader & space) and all(reader & r for r in path_restrictions(pages, i))


def nearest_records(principals, *, exact):
    """The record ids behind the nearest visible chunks, by the HNSW walk (the index forced) or the
    exact statement: every visible chunk fits in ``n``, so each must return exactly the visible."""
    vec = vector.vector_literal(embedding_config().provider.embed([WORD])[0])
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(vector.HNSW_SETTINGS_SQL, {"ef_search": "400"})
        if not exact:
            cursor.execute(
                "SET LOCAL enable_seqscan = off; SET LOCAL enable_bitmapscan = off; SET LOCAL enable_sort = off"
            )
        statement = vector.NEAREST_EXACT_SQL if exact else vector.NEAREST_SQL
        cursor.execute(
            f"SELECT DISTINCT c.record_id FROM ({statement}) s JOIN knowledge_chunks c ON c.id = s.id",
            {"vec": vec, "principals": sorted(principals), "n": 200},
        )
        return {row[0] for row in cursor.fetchall()}


@settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)
@given(space=spaces(), reader_list=st.lists(readers, min_size=1, max_size=3))
def test_the_store_answers_confluences_rule_on_every_path(hash_embedder, space, reader_list):
    permission, pages = space
    Record.objects.filter(source_system=SOURCE).delete()
    ids = []
    for i, (parent, _restriction) in enumerate(pages):
        ids.append(
            facade.upsert_record(
                source_system=SOURCE,
                external_id=f"page-{i}",
                title=f"Страница {i}",
                text=f"{WORD} страница номер {i}",
                acl=sorted(permission),
                acl_also=[sorted(r) for r in path_restrictions(pages, i)],
                links=[(f"page-{parent}", "child_of")] if parent is not None else [],
            )
        )
    for reader in reader_list:
        identity = facade.Identity(principals=reader)
        visible = {rid for i, rid in enumerate(ids) if confluence_allows(reader, permission, pages, i)}
        hidden = set(ids) - visible

        # lexical (every page has the word) fused with vector: exactly the visible pages
        result = facade.search(WORD, identity, 10)
        assert {c.record_id for c in result.candidates} == visible
        # withheld: coordinates only, and only when a relevant page is hidden
        assert all(w.source_system == SOURCE and w.author_principal_id is None for w in result.withheld)
        if not hidden:
            assert result.withheld == ()
        # vector alone (no word matches): never a hidden page
        assert {c.record_id for c in facade.search("кварк", identity, 10).candidates} <= visible
        # vector: the HNSW walk and the exact scan
        assert nearest_records(reader, exact=False) == visible
        assert nearest_records(reader, exact=True) == visible
        # visible_records (citations), graph
        assert facade.visible_records(ids, identity) == visible
        for rid in ids:
            if rid in visible:
                nodes = facade.graph(rid, identity, depth=2).nodes
                assert {n.record_id for n in nodes} <= visible
                assert {n.via_record_id for n in nodes} <= visible
            else:
                with pytest.raises(NotFound):
                    facade.graph(rid, identity)
        # sql under row-level security
        assert {row[0] for row in facade.sql("SELECT id FROM ks_records", identity).rows} == visible
        chunk_records = {row[0] for row in facade.sql("SELECT DISTINCT record_id FROM ks_chunks", identity).rows}
        assert chunk_records == visible
        links = facade.sql("SELECT from_record_id, to_record_id FROM ks_record_links", identity).rows
        assert {end for link in links for end in link} <= visible
