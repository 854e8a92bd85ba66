"""Links whose target is not stored yet are kept (``knowledge_pending_links``) and become links when
the target's row is inserted, by the database itself: a later batch of a connector, a later file of
an ingest, one upsert, raw SQL. The table's invariants hold against raw SQL too."""

import pytest
from django.db import IntegrityError, connection, transaction

from knowledge import facade, services
from knowledge.models import PendingLink, Record, RecordLink

pytestmark = [pytest.mark.integration, pytest.mark.django_db]


def _put(external_id: str, links=(), system: str = "wiki") -> int:
    return facade.upsert_record(
        source_system=system,
        external_id=external_id,
        title=external_id,
        text=f"Текст {external_id}.",
        acl=["everyone"],
        links=list(links),
    )


def _edges() -> set[tuple[str, str, str]]:
    return set(RecordLink.objects.values_list("from_record__external_id", "to_record__external_id", "link_type"))


def test_a_link_to_a_record_stored_later_appears_when_it_is_stored():
    # given: «a» links to «b» and «c», neither stored yet
    a = _put("a", [("b", "links_to"), ("c", "child_of")])
    assert _edges() == set()
    assert set(PendingLink.objects.values_list("to_external_id", "link_type")) == {("b", "links_to"), ("c", "child_of")}
    # when: «b» comes one by one, «c» in a batch
    _put("b")
    facade.upsert_records(
        [facade.RecordWrite(source_system="wiki", external_id="c", title="c", text="Текст c.", acl=["everyone"])]
    )
    # then
    assert _edges() == {("a", "b", "links_to"), ("a", "c", "child_of")}
    assert not PendingLink.objects.exists()
    assert Record.objects.get(pk=a).links_out.count() == 2


def test_the_pending_links_are_exactly_the_records_unresolved_ones():
    _put("a", [("b", "links_to"), ("c", "links_to")])
    # when: «a» no longer links to «c»; another system's «b» is not its target
    assert services.record_links_set(
        record_id=Record.objects.get(external_id="a").pk, source_system="wiki", links=[("b", "links_to")]
    ) == ["b"]
    _put("b", system="other")
    # then
    assert set(PendingLink.objects.values_list("to_source_system", "to_external_id")) == {("wiki", "b")}
    assert _edges() == set()
    # when: the record goes, its pending links go with it (ON DELETE CASCADE)
    services.record_delete(source_system="wiki", external_id="a")
    assert not PendingLink.objects.exists()


def test_the_database_resolves_a_pending_link_on_a_raw_insert():
    a = _put("a", [("raw", "links_to")])
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO knowledge_records (source_system, external_id, title, url, acl, trust_score, origin,"
            " content_hash, never_hint, user_writable, created_at, updated_at, content_changed_at)"
            " VALUES ('wiki', 'raw', 'raw', '', ARRAY['everyone'], 1.0, '', '', false, false, now(), now(), now())"
            " RETURNING id"
        )
        (raw,) = cursor.fetchone()
    assert set(RecordLink.objects.values_list("from_record_id", "to_record_id", "link_type")) == {(a, raw, "links_to")}
    assert not PendingLink.objects.exists()


@pytest.mark.parametrize(
    "values",
    [
        "(%(a)s, 'wiki', 'x', '')",  # no link type
        "(%(a)s, 'wiki', '', 'links_to')",  # no target
        "(%(a)s, 'wiki', 'b', 'links_to')",  # the same pending link twice
        "(2147483000, 'wiki', 'x', 'links_to')",  # no such record (the FK, checked at commit)
    ],
)
def test_raw_sql_cannot_break_the_pending_links_invariants(values):
    a = _put("a", [("b", "links_to")])
    with pytest.raises(IntegrityError), transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO knowledge_pending_links (from_record_id, to_source_system, to_external_id, link_type)"
            f" VALUES {values % {'a': a}}"
        )
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
