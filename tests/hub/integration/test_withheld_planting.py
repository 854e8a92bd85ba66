"""Withheld cannot be steered by what people write (security round two, finding 1): a hub user plants
Jira issues, readable by everyone, that repeat guessed words; mirrored into the store, they used to
lift each guessed word over WITHHELD_MIN_RECORDS, so a word of a finance-only document lit up a hint
and an absent one did not. Records people can write never count as evidence that a word is common."""

from __future__ import annotations

import pytest

from hub.knowledge_feed import mirror_to_knowledge
from hub.models import MirrorIssue
from knowledge import facade
from knowledge.services import record_upsert
from tests.achilles.factories import UserFactory
from tests.hub.conftest import PLANTING_ABSENT, PLANTING_PRESENT, finance_report_write, issue_payload

pytestmark = [pytest.mark.django_db, pytest.mark.p0]

PRESENT, ABSENT = PLANTING_PRESENT, PLANTING_ABSENT
PLANTED = " ".join(PRESENT + ABSENT)


@pytest.fixture
def finance_secret(db):
    """The quarter's results, closed to everyone but finance (curated: written by an admin)."""
    fin = UserFactory(username="cfo", groups=["finance"])
    finance_report_write(author_principal_id=f"user:{fin.pk}")
    return fin


def _clinic(n: int, *, user_writable: bool) -> None:
    """An open note naming the clinics, written by an admin (curated) or by people."""
    record_upsert(
        source_system="files",
        external_id=f"general/clinic-{n}.md",
        title="ДМС",
        text="Клиники сети «Здоровье+» принимают по полису ДМС.",
        acl=["everyone"],
        origin="api",
        user_writable=user_writable,
    )


def _hints(query: str, user) -> tuple:
    return facade.search(query, facade.Identity.for_user(user), 8).withheld


def test_planted_issues_do_not_make_a_hidden_word_hintable(mirror, finance_secret, settings):
    settings.WITHHELD_HINTS_PER_HOUR = 10_000
    eve = UserFactory(username="eve", groups=["it"])
    # two issues (the probe's two ensure_issue batches), everyone may read them
    mirror(
        issue_payload("AURORA-9035", summary="Заметки", fields={"description": PLANTED}),
        issue_payload("AURORA-9036", summary="Заметки", fields={"description": PLANTED}),
    )
    assert mirror_to_knowledge(issue_ids=list(MirrorIssue.objects.values_list("id", flat=True))) == 2
    # the planted words are in the store, readable by eve
    assert facade.search("Зебра", facade.Identity.for_user(eve), 8).candidates

    answers = {word: _hints(word, eve) for word in PRESENT + ABSENT}
    assert len(set(answers.values())) == 1, answers
    assert answers["Здоровье"] == ()


def test_curated_records_still_make_a_topic(mirror, finance_secret, settings):
    """Not vacuous: the same word in three curated records is a topic, and the hint is given."""
    settings.WITHHELD_HINTS_PER_HOUR = 10_000
    eve = UserFactory(username="eve", groups=["it"])
    for n in range(2):
        _clinic(n, user_writable=False)
    assert _hints("Здоровье", eve) == (facade.Withheld("files", f"user:{finance_secret.pk}"),)


def test_a_record_turning_user_writable_stops_counting_at_once(finance_secret, settings):
    """The flag alone changing (same content) moves the content generation: no cached count survives."""
    settings.WITHHELD_HINTS_PER_HOUR = 10_000
    eve = UserFactory(username="eve", groups=["it"])

    _clinic(0, user_writable=False)
    _clinic(1, user_writable=False)
    assert _hints("Здоровье", eve) != ()
    _clinic(1, user_writable=True)
    assert _hints("Здоровье", eve) == ()


def test_who_writes_decides_what_counts(mirror, admin_user, tmp_path):
    """The hub's mirror writes user-writable records; an admin's folder and the staff REST upsert
    curated ones unless they say otherwise (front matter ``user_writable: true``, the body's field)."""
    import json

    from django.test import Client

    from knowledge.ingest import ingest_path
    from knowledge.models import Record

    mirror(issue_payload("AURORA-1"))
    mirror_to_knowledge(issue_ids=list(MirrorIssue.objects.values_list("id", flat=True)))
    (tmp_path / "policy.md").write_text("Политика.\n", encoding="utf-8")
    (tmp_path / "wiki.md").write_text("---\nuser_writable: true\n---\nВики.\n", encoding="utf-8")
    (tmp_path / "bad.md").write_text("---\nuser_writable: sometimes\n---\nТекст.\n", encoding="utf-8")
    report = ingest_path(tmp_path)
    assert [name for name, _ in report.errors] == ["bad.md"]
    client = Client()
    client.force_login(admin_user)
    for external_id, extra in [("rest-default", {}), ("rest-open", {"user_writable": True})]:
        body = {
            "source_system": "files",
            "external_id": external_id,
            "title": "T",
            "text": "Текст.",
            "acl": ["everyone"],
        }
        answer = client.put("/api/knowledge/records", json.dumps(body | extra), content_type="application/json")
        assert answer.status_code == 201, answer.content
    assert dict(Record.objects.values_list("external_id", "user_writable")) == {
        "AURORA-1": True,
        "policy.md": False,
        "wiki.md": True,
        "rest-default": False,
        "rest-open": True,
    }


def test_the_database_keeps_the_safe_side_copies_the_flag_and_moves_the_generation():
    """Raw SQL: a record inserted without the flag is user-writable; its chunks carry the record's flag
    (written only by the trigger that copies the ACL: a chunk's own write is overridden); flipping the
    record's flag reaches its chunks and moves the content generation."""
    from django.db import connection

    def one(sql: str, params=()):
        cursor.execute(sql, params)
        return cursor.fetchone()

    with connection.cursor() as cursor:
        record_id, writable = one(
            "INSERT INTO knowledge_records (source_system, external_id, title, url, acl, trust_score, origin, "
            "content_hash) VALUES ('files', 'raw.md', 'Raw', '', '{everyone}', 1, 'sql', '') "
            "RETURNING id, user_writable"
        )
        assert writable is True
        (chunk_flag,) = one(
            "INSERT INTO knowledge_chunks (record_id, ordinal, heading, text, user_writable) "
            "VALUES (%s, 0, '', 'Текст', false) RETURNING user_writable",
            [record_id],
        )
        assert chunk_flag is True, "the chunk takes the record's flag, not its own"
        (before,) = one("SELECT n FROM knowledge_generation WHERE id = 1")
        cursor.execute("UPDATE knowledge_records SET user_writable = false WHERE id = %s", [record_id])
        (after,) = one("SELECT n FROM knowledge_generation WHERE id = 1")
        assert after == before + 1
        assert one("SELECT user_writable FROM knowledge_chunks WHERE record_id = %s", [record_id]) == (False,)
        cursor.execute("UPDATE knowledge_chunks SET user_writable = true WHERE record_id = %s", [record_id])
        assert one("SELECT user_writable FROM knowledge_chunks WHERE record_id = %s", [record_id]) == (False,)
