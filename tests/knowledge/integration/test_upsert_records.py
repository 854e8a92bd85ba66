"""facade.upsert_records: a batch stores exactly what upsert_record stores item by item (records,
chunks, vectors, ACL clauses, links), says per item created / updated / unchanged, and one invalid
item is refused alone."""

import pytest

from achilles.errors import ValidationFailed
from knowledge import facade
from knowledge.models import Chunk, Record, RecordLink
from knowledge.services import record_upsert

pytestmark = pytest.mark.django_db

LONG = "\n\n".join(f"## Часть {n}\n\n" + "Командировки оформляются заранее по заявке. " * 40 for n in range(3))


def _write(external_id: str, text: str = LONG, **over) -> facade.RecordWrite:
    fields = {
        "source_system": "wiki",
        "external_id": external_id,
        "title": f"Страница {external_id}",
        "text": text,
        "acl": ["everyone"],
        "acl_also": [["group:hr", "group:it"]],
        "url": f"https://wiki.example.com/{external_id}",
        "links": [],
    }
    return facade.RecordWrite(**(fields | over))


def _state(source_system: str) -> list[tuple]:
    rows = []
    for record in Record.objects.filter(source_system=source_system).order_by("external_id"):
        chunks = [
            (c.ordinal, c.heading, c.text, list(c.acl), c.acl_also, [round(x, 5) for x in c.embedding])
            for c in Chunk.objects.filter(record=record).order_by("ordinal")
        ]
        links = sorted(RecordLink.objects.filter(from_record=record).values_list("to_record__external_id", "link_type"))
        rows.append((record.external_id, record.title, record.url, record.acl, record.acl_also, chunks, links))
    return rows


def test_a_batch_stores_what_upsert_record_stores_one_by_one(hash_embedder):
    # given
    items = [_write("a", links=[("b", "links_to")]), _write("b", links=[("a", "child_of")]), _write("c")]
    # when
    outcomes = facade.upsert_records(items)
    for item in items:
        facade.upsert_record(
            source_system="single",
            external_id=item.external_id,
            title=item.title,
            text=item.text,
            acl=item.acl,
            acl_also=item.acl_also,
            url=item.url,
            links=item.links,
        )
    facade.upsert_record(  # the first one again: its link to «b» only resolves now
        source_system="single",
        external_id="a",
        title=items[0].title,
        text=LONG,
        acl=["everyone"],
        acl_also=items[0].acl_also,
        url=items[0].url,
        links=items[0].links,
    )
    # then
    assert [o.status for o in outcomes] == ["created"] * 3
    assert _state("wiki") == _state("single") and len(_state("wiki")[0][5]) > 1
    # and the item-by-item path sees the batch's records as its own: unchanged
    again = record_upsert(
        source_system="wiki",
        external_id="c",
        title=items[2].title,
        text=LONG,
        acl=["everyone"],
        acl_also=items[2].acl_also,
        url=items[2].url,
        origin="app:wiki",
        links_fingerprint=[],
    )
    assert again.status == "unchanged"


def test_statuses_replaced_chunks_stale_links_and_one_bad_item(hash_embedder):
    facade.upsert_records([_write("a", links=[("b", "links_to")]), _write("b")])
    chunk_ids = set(Chunk.objects.filter(record__external_id="a").values_list("pk", flat=True))
    # when: «a» rewritten without its link, «b» the same but for its clauses, «c» empty, «d» new
    outcomes = facade.upsert_records(
        [_write("a", text="Новый текст."), _write("b", acl_also=[["group:hr"]]), _write("c", text=" "), _write("d")]
    )
    # then
    statuses = [None if isinstance(o, ValidationFailed) else o.status for o in outcomes]
    assert statuses == ["updated", "updated", None, "created"]
    assert isinstance(outcomes[2], ValidationFailed) and outcomes[2].code == "empty_document"
    a = Record.objects.get(source_system="wiki", external_id="a")
    assert [c.text for c in a.chunks.all()] == ["Новый текст."] and not chunk_ids & {c.pk for c in a.chunks.all()}
    assert not RecordLink.objects.filter(from_record=a).exists()
    b = Record.objects.get(source_system="wiki", external_id="b")
    assert b.acl_also == [["group:hr"]] and {tuple(c.acl_also[0]) for c in b.chunks.all()} == {("group:hr",)}
    assert not Record.objects.filter(external_id="c").exists()
    assert [o.status for o in facade.upsert_records([_write("d")])] == ["unchanged"]
