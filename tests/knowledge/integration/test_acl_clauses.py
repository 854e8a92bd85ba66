"""«All of» access (``acl_also``, migration 0013): the database's invariants broken with raw SQL,
the services' canonical form and errors, and each read path honouring the clauses."""

import pytest
from django.db import IntegrityError, connection, transaction

from achilles.errors import NotFound, ValidationFailed
from knowledge import facade
from knowledge.models import Chunk, Record
from tests.knowledge.conftest import identity_of

pytestmark = [pytest.mark.django_db, pytest.mark.p0]


def _sql(query, params=None):
    with connection.cursor() as cursor:
        cursor.execute(query, params or [])
        return cursor.fetchall() if cursor.description else None


def _upsert(external_id, text="Регламент отпусков и командировок", *, acl=("group:staff",), acl_also=(), **kw):
    return facade.upsert_record(
        source_system="confluence",
        external_id=external_id,
        title=external_id,
        text=text,
        acl=acl,
        acl_also=acl_also,
        **kw,
    )


def _clauses_of(values):
    """The distinct ``acl_also`` values among chunks (lists are not hashable)."""
    distinct: list = []
    for value in values:
        if value not in distinct:
            distinct.append(value)
    return distinct


# ------------------------------------------------------------------ the database


@pytest.mark.parametrize(
    "value",
    ["'[]'", "'[[]]'", "'[[\"group:a\"], []]'", "'[[\"\"]]'", "'[[1]]'", "'[\"group:a\"]'", "'{\"a\": 1}'"],
)
def test_a_record_clause_must_name_a_principal(make_record, value):
    rid = make_record("a.md", "Текст")
    with pytest.raises(IntegrityError), transaction.atomic():
        _sql(f"UPDATE knowledge_records SET acl_also = {value}::jsonb WHERE id = %s", [rid])


def test_a_chunk_clause_must_name_a_principal(make_record):
    rid = make_record("a.md", "Текст")
    with pytest.raises(IntegrityError), transaction.atomic():
        _sql("SET LOCAL session_replication_role = replica")  # past the copying trigger: the CHECK alone
        _sql("UPDATE knowledge_chunks SET acl_also = '[[]]' WHERE record_id = %s", [rid])


def test_chunk_clauses_are_copied_from_the_record_whatever_the_write_says(make_record):
    rid = _upsert("p1", acl_also=[["group:dev"]])
    _sql(
        "INSERT INTO knowledge_chunks (record_id, ordinal, heading, text, acl, acl_also) "
        "VALUES (%s, 9, '', 'x', '{public}', NULL)",
        [rid],
    )
    _sql("UPDATE knowledge_chunks SET acl_also = '[[\"public\"]]' WHERE record_id = %s", [rid])
    assert _sql("SELECT DISTINCT acl_also::text FROM knowledge_chunks WHERE record_id = %s", [rid]) == [
        ('[["group:dev"]]',)
    ]


def test_record_clause_change_propagates_to_chunks_and_moves_the_generation(make_record):
    rid = _upsert("p1", "Первый абзац.\n\n" + "Второй абзац текста. " * 200)
    assert Chunk.objects.filter(record_id=rid).count() > 1
    before = facade.generation()
    _sql("UPDATE knowledge_records SET acl_also = '[[\"group:dev\"]]' WHERE id = %s", [rid])
    assert _clauses_of(Chunk.objects.filter(record_id=rid).values_list("acl_also", flat=True)) == [[["group:dev"]]]
    middle = facade.generation()
    assert middle > before
    _sql("UPDATE knowledge_records SET acl_also = NULL WHERE id = %s", [rid])
    assert _clauses_of(Chunk.objects.filter(record_id=rid).values_list("acl_also", flat=True)) == [None]
    assert facade.generation() > middle


def test_the_access_function_is_any_of_acl_and_every_clause():
    def allows(acl, clauses, principals):
        return _sql("SELECT knowledge_acl_allows(%s::text[], %s::jsonb, %s::text[])", [acl, clauses, principals])[0][0]

    assert allows(["a", "b"], None, ["b"]) is True
    assert allows(["a"], None, ["c"]) is False
    assert allows(["a"], '[["x", "y"], ["z"]]', ["a", "y", "z"]) is True
    assert allows(["a"], '[["x", "y"], ["z"]]', ["a", "y"]) is False
    assert allows(["a"], '[["x"]]', ["x"]) is False
    assert allows(["a"], '[["x"]]', []) is False


def test_the_access_test_is_inlined_so_the_acl_gin_index_still_filters_first(make_record):
    for i in range(30):
        make_record(f"r{i}.md", f"Текст номер {i}", acl=[f"group:g{i}"])
    _sql("ANALYZE knowledge_chunks")
    _sql("SET LOCAL enable_seqscan = off")
    plan = "\n".join(
        row[0]
        for row in _sql(
            "EXPLAIN SELECT id FROM knowledge_chunks c "
            "WHERE knowledge_acl_allows(c.acl, c.acl_also, ARRAY['group:g1']::text[])"
        )
    )
    assert "knowledge_chunk_acl_gin" in plan
    assert "acl_also IS NULL" in plan


# ------------------------------------------------------------------ the services


def test_clauses_are_stored_canonically():
    rid = _upsert(
        "p1",
        acl=["group:staff", "group:dev"],
        acl_also=[
            ["group:b", "group:a", "group:a"],
            ["group:a", "group:b"],
            ["group:a", "group:b", "group:c"],
            ["group:dev", "group:staff", "group:x"],
        ],
    )
    # deduplicated and sorted; a superset of another clause and one holding the whole acl are dropped
    assert Record.objects.get(pk=rid).acl_also == [["group:a", "group:b"]]
    rid2 = _upsert("p2", acl_also=[["group:staff"]])
    assert Record.objects.get(pk=rid2).acl_also is None


@pytest.mark.parametrize(
    ("clauses", "code"),
    [
        ([[]], "empty_acl"),
        ([["group:a"], []], "empty_acl"),
        ([["no prefix"]], "invalid_principal"),
        (["group:a"], "invalid_principal"),
        ([["user:nobody-такого-нет"]], "unknown_principal"),
    ],
)
def test_bad_clauses_are_refused_and_write_nothing(clauses, code):
    with pytest.raises(ValidationFailed) as caught:
        _upsert("p1", acl_also=clauses)
    assert caught.value.code == code
    assert not Record.objects.exists()


def test_a_clause_change_alone_is_written_without_embedding_again(hash_embedder, monkeypatch):
    rid = _upsert("p1", acl_also=[["group:dev"]])
    chunk_ids = set(Chunk.objects.filter(record_id=rid).values_list("id", flat=True))
    from knowledge import services

    monkeypatch.setattr(services, "_embed", lambda *a: pytest.fail("embedded again"))
    assert _upsert("p1", acl_also=[["group:ops"]]) == rid
    assert Record.objects.get(pk=rid).acl_also == [["group:ops"]]
    assert set(Chunk.objects.filter(record_id=rid).values_list("id", flat=True)) == chunk_ids
    assert _clauses_of(Chunk.objects.filter(record_id=rid).values_list("acl_also", flat=True)) == [[["group:ops"]]]


def test_records_access_set_changes_only_what_differs(hash_embedder, monkeypatch):
    a = _upsert("a", acl_also=[["group:dev"]])
    b = _upsert("b")
    _upsert("c")
    from knowledge import services

    monkeypatch.setattr(services, "_embed", lambda *a: pytest.fail("embedded again"))
    before = facade.generation()
    # a: same access (another spelling); b: gets a clause; c: loses group:staff; missing: skipped
    changed = facade.records_access_set(
        source_system="confluence",
        access={
            "a": (["group:staff"], [["group:dev", "group:dev"]]),
            "b": (["group:staff"], [["group:dev"], ["group:ops"]]),
            "c": (["group:ops"], ()),
            "missing": (["group:staff"], ()),
        },
    )
    assert changed == 2
    assert Record.objects.get(pk=a).acl_also == [["group:dev"]]
    assert Record.objects.get(pk=b).acl_also == [["group:dev"], ["group:ops"]]
    assert Record.objects.get(external_id="c").acl == ["group:ops"]
    assert _clauses_of(Chunk.objects.filter(record_id=b).values_list("acl_also", flat=True)) == [
        [["group:dev"], ["group:ops"]]
    ]
    moved = facade.generation()
    assert moved > before
    # nothing differs: nothing written, the generation stays
    assert (
        facade.records_access_set(
            source_system="confluence", access={"b": (["group:staff"], [["group:ops"], ["group:dev"]])}
        )
        == 0
    )
    assert facade.generation() == moved


def test_records_access_set_refuses_bad_input_before_writing_anything():
    _upsert("a")
    for access, code in (
        ({"a": (["group:ops"], ()), "b": ([], ())}, "empty_acl"),
        ({"a": (["group:ops"], [[]])}, "empty_acl"),
        ({"a": (["group:ops"], [["bad principal"]])}, "invalid_principal"),
    ):
        with pytest.raises(ValidationFailed) as caught:
            facade.records_access_set(source_system="confluence", access=access)
        assert caught.value.code == code
    assert Record.objects.get(external_id="a").acl == ["group:staff"]


def test_records_acl_set_keeps_the_clauses():
    rid = _upsert("a", acl_also=[["group:dev"]])
    assert facade.records_acl_set(source_system="confluence", external_ids=["a"], acl=["group:ops"]) == 1
    record = Record.objects.get(pk=rid)
    assert (record.acl, record.acl_also) == (["group:ops"], [["group:dev"]])


# ------------------------------------------------------------------ every read path


@pytest.fixture
def restricted(hash_embedder):
    """A space readable by group:staff; a page restricted to group:dev, its child also to user:7."""
    dev_page = _upsert("dev", "Регламент отпусков: страница разработчиков", acl_also=[["group:dev"]])
    child = _upsert(
        "child",
        "Регламент отпусков: личная страница",
        acl_also=[["group:dev"], ["user:7"]],
        links=[("dev", "child_of")],
    )
    open_page = _upsert(
        "open", "Регламент отпусков: открытая страница", links=[("dev", "relates"), ("child", "relates")]
    )
    return {"open": open_page, "dev": dev_page, "child": child}


READERS = {
    "staff": ({"group:staff"}, {"open"}),
    "dev": ({"group:staff", "group:dev"}, {"open", "dev"}),
    "dev7": ({"group:staff", "group:dev", "user:7"}, {"open", "dev", "child"}),
    "seven": ({"group:staff", "user:7"}, {"open"}),
    "outsider": ({"group:dev", "user:7"}, set()),
}


@pytest.mark.parametrize("reader", sorted(READERS))
def test_every_path_honours_the_clauses(restricted, reader):
    principals, names = READERS[reader]
    identity = identity_of(*principals)
    expected = {restricted[n] for n in names}
    result = facade.search("регламент отпусков", identity, 10)
    assert {c.record_id for c in result.candidates} == expected
    # withheld carries coordinates only (here: confluence, no author), and none when nothing is hidden
    assert len(result.withheld) <= (1 if len(expected) < 3 else 0)
    assert facade.visible_records(list(restricted.values()), identity) == expected
    for rid in restricted.values():
        if rid in expected:
            nodes = facade.graph(rid, identity, depth=2).nodes
            assert {n.record_id for n in nodes} <= expected
        else:
            with pytest.raises(NotFound):
                facade.graph(rid, identity)
    rows = facade.sql("SELECT id FROM ks_records", identity).rows
    assert {row[0] for row in rows} == expected
    chunk_rows = facade.sql("SELECT DISTINCT record_id FROM ks_chunks", identity).rows
    assert {row[0] for row in chunk_rows} == expected
