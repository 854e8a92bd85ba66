"""Each invariant of the KS tables broken with raw SQL: the database, not the code, refuses (SPEC §8)."""

import pytest
from django.db import IntegrityError, connection, transaction

pytestmark = [pytest.mark.django_db, pytest.mark.p1]


def _sql(query, params=None):
    with connection.cursor() as cursor:
        cursor.execute(query, params or [])
        return cursor.fetchall() if cursor.description else None


def test_source_system_external_id_is_unique(make_record):
    make_record("a.md", "Текст")
    with pytest.raises(IntegrityError), transaction.atomic():
        _sql(
            "INSERT INTO knowledge_records (source_system, external_id, title, acl, trust_score, origin, content_hash) "
            "VALUES ('files', 'a.md', 'dup', '{everyone}', 1, '', '')"
        )


def test_deleting_a_record_cascades_to_chunks_links_and_signals(make_record):
    a = make_record("a.md", "Первый")
    b = make_record("b.md", "Второй")
    _sql(
        "INSERT INTO knowledge_record_links (from_record_id, to_record_id, link_type) VALUES (%s, %s, 'relates')",
        [a, b],
    )
    _sql("INSERT INTO knowledge_access_signals (record_id, kind) VALUES (%s, 'click')", [a])
    _sql("DELETE FROM knowledge_records WHERE id = %s", [a])
    assert _sql("SELECT count(*) FROM knowledge_chunks WHERE record_id = %s", [a]) == [(0,)]
    assert _sql("SELECT count(*) FROM knowledge_record_links") == [(0,)]
    assert _sql("SELECT count(*) FROM knowledge_access_signals") == [(0,)]


def test_chunk_of_a_missing_record_is_refused():
    with pytest.raises(IntegrityError), transaction.atomic():
        _sql("INSERT INTO knowledge_chunks (record_id, ordinal, heading, text, acl) VALUES (999999, 0, '', 'x', '{}')")
        _sql("SET CONSTRAINTS ALL IMMEDIATE")


def test_updated_at_is_bumped_by_the_trigger(make_record):
    a = make_record("a.md", "Текст")
    _sql("UPDATE knowledge_records SET updated_at = '2000-01-01' WHERE id = %s", [a])
    # the trigger overrides even an explicit value
    ((stamp,),) = _sql("SELECT updated_at FROM knowledge_records WHERE id = %s", [a])
    assert stamp.year > 2000


def test_link_updated_at_trigger_is_attached():
    assert _sql("SELECT count(*) FROM pg_trigger WHERE tgname = 'knowledge_record_links_bump_updated_at'") == [(1,)]


def test_chunk_acl_is_copied_from_the_record_whatever_the_insert_says(make_record):
    a = make_record("a.md", "Текст", acl=["group:finance"])
    _sql(
        "INSERT INTO knowledge_chunks (record_id, ordinal, heading, text, acl) VALUES (%s, 7, '', 'x', '{public}')", [a]
    )
    assert _sql("SELECT DISTINCT acl FROM knowledge_chunks WHERE record_id = %s", [a]) == [(["group:finance"],)]


def test_chunk_acl_cannot_be_widened_by_update(make_record):
    a = make_record("a.md", "Текст", acl=["group:finance"])
    _sql("UPDATE knowledge_chunks SET acl = '{public}' WHERE record_id = %s", [a])
    assert _sql("SELECT DISTINCT acl FROM knowledge_chunks WHERE record_id = %s", [a]) == [(["group:finance"],)]


def test_record_acl_change_propagates_to_chunks(make_record):
    a = make_record("a.md", "Один.\n\nДва.", acl=["group:finance"])
    _sql("UPDATE knowledge_records SET acl = '{everyone}' WHERE id = %s", [a])
    assert _sql("SELECT DISTINCT acl FROM knowledge_chunks WHERE record_id = %s", [a]) == [(["everyone"],)]


@pytest.mark.parametrize(
    "statement",
    [
        "UPDATE knowledge_records SET trust_score = 1.5",
        "UPDATE knowledge_records SET source_system = ''",
        "UPDATE knowledge_records SET external_id = ''",
        "UPDATE knowledge_records SET url = 'javascript:alert(1)'",
        "UPDATE knowledge_records SET url = 'JavaScript:alert(1)//https://x'",
        "UPDATE knowledge_records SET url = 'data:text/html,<script>1</script>'",
        "UPDATE knowledge_records SET url = 'https://'",
        "UPDATE knowledge_records SET url = 'https://wiki.example/a b'",
    ],
)
def test_record_checks(make_record, statement):
    make_record("a.md", "Текст")
    with pytest.raises(IntegrityError), transaction.atomic():
        _sql(statement)


def test_record_url_takes_http_and_https_addresses(make_record):
    a = make_record("a.md", "Текст")
    for url in ("https://wiki.example/a?b=1#c", "HTTP://intranet:8080/x", ""):
        _sql("UPDATE knowledge_records SET url = %s WHERE id = %s", [url, a])


def test_self_link_and_duplicate_link_are_refused(make_record):
    a = make_record("a.md", "Текст")
    b = make_record("b.md", "Текст два")
    with pytest.raises(IntegrityError), transaction.atomic():
        _sql(
            "INSERT INTO knowledge_record_links (from_record_id, to_record_id, link_type) VALUES (%s, %s, 'x')", [a, a]
        )
    _sql("INSERT INTO knowledge_record_links (from_record_id, to_record_id, link_type) VALUES (%s, %s, 'x')", [a, b])
    with pytest.raises(IntegrityError), transaction.atomic():
        _sql(
            "INSERT INTO knowledge_record_links (from_record_id, to_record_id, link_type) VALUES (%s, %s, 'x')", [a, b]
        )


def test_empty_chunk_text_and_duplicate_ordinal_are_refused(make_record):
    a = make_record("a.md", "Текст")
    with pytest.raises(IntegrityError), transaction.atomic():
        _sql("INSERT INTO knowledge_chunks (record_id, ordinal, heading, text, acl) VALUES (%s, 5, '', '', '{}')", [a])
    with pytest.raises(IntegrityError), transaction.atomic():
        _sql("INSERT INTO knowledge_chunks (record_id, ordinal, heading, text, acl) VALUES (%s, 0, '', 'x', '{}')", [a])


def test_answer_signal_counts_once_per_message_and_kind_is_checked(make_record):
    a = make_record("a.md", "Текст")
    _sql("INSERT INTO knowledge_access_signals (record_id, kind, message_id) VALUES (%s, 'answer', 'm1')", [a])
    with pytest.raises(IntegrityError), transaction.atomic():
        _sql("INSERT INTO knowledge_access_signals (record_id, kind, message_id) VALUES (%s, 'answer', 'm1')", [a])
    with pytest.raises(IntegrityError), transaction.atomic():
        _sql("INSERT INTO knowledge_access_signals (record_id, kind) VALUES (%s, 'view')", [a])


def _generation():
    from knowledge import facade

    return facade.generation()


def test_content_generation_moves_on_every_change_search_can_see(make_record):
    g0 = _generation()
    a = make_record("a.md", "Первый документ")  # chunks inserted
    g1 = _generation()
    assert g1 > g0
    _sql("UPDATE knowledge_records SET acl = '{group:finance}' WHERE id = %s", [a])  # a revoked ACL
    g2 = _generation()
    assert g2 > g1
    _sql("UPDATE knowledge_records SET title = 'Новое имя' WHERE id = %s", [a])
    g3 = _generation()
    assert g3 > g2
    _sql("UPDATE knowledge_chunks SET text = 'Другой текст' WHERE record_id = %s", [a])
    g4 = _generation()
    assert g4 > g3
    _sql("DELETE FROM knowledge_records WHERE id = %s", [a])  # chunks go by cascade
    assert _generation() > g4


def test_content_generation_stays_on_changes_search_cannot_see(make_record):
    a = make_record("a.md", "Первый документ")
    before = _generation()
    _sql("UPDATE knowledge_records SET trust_score = 0.5, last_accessed_at = now() WHERE id = %s", [a])
    _sql("INSERT INTO knowledge_access_signals (record_id, kind) VALUES (%s, 'click')", [a])
    assert _generation() == before


@pytest.mark.parametrize(
    "statement",
    [
        "INSERT INTO knowledge_generation (id, n) VALUES (2, 0)",
        "UPDATE knowledge_generation SET n = -1",
        "UPDATE knowledge_generation SET id = 2",
    ],
)
def test_content_generation_is_one_non_negative_counter(statement):
    with pytest.raises(IntegrityError), transaction.atomic():
        _sql(statement)
