"""Folder ingestion: idempotent by (source_system, external_id), per-file errors, prune (KS-2)."""

import os
from pathlib import Path

import pytest
from django.core.management import call_command

from knowledge.ingest import ingest_path
from knowledge.models import Chunk, Record, RecordLink

pytestmark = [pytest.mark.django_db, pytest.mark.p1]

DEMO = Path(__file__).resolve().parents[3] / "knowledge" / "demo_corpus"


def write(root: Path, name: str, body: str) -> Path:
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(body, encoding="utf-8")
    return path


@pytest.fixture
def folder(tmp_path):
    write(
        tmp_path,
        "hr/otpusk.md",
        "---\ntitle: Отпуск\nacl: [everyone]\nlinks: [it/vpn.md]\n---\n# Отпуск\n\n28 дней в год.",
    )
    write(tmp_path, "it/vpn.md", "---\ntitle: VPN\nacl: [group:it]\nauthor: user:alice\n---\nWireGuard, порт 51820.")
    write(tmp_path, "notes.txt", "Заметка без front matter\n\nТекст заметки.")
    write(tmp_path, "page.html", "<html><head><title>Офис</title></head><body><h1>Офис</h1><p>Адрес.</p></body></html>")
    return tmp_path


def snapshot():
    return (
        sorted(Record.objects.values_list("id", "updated_at", "content_hash")),
        sorted(Chunk.objects.values_list("id", "record_id")),
    )


def test_ingest_creates_records_chunks_and_links(folder, user):
    report = ingest_path(folder)
    assert (report.created, report.updated, report.unchanged, report.errors) == (4, 0, 0, [])
    vpn = Record.objects.get(external_id="it/vpn.md")
    assert vpn.acl == ["group:it"] and vpn.author_principal_id == f"user:{user.pk}"
    assert Record.objects.get(external_id="notes.txt").acl == ["everyone"]
    assert Record.objects.get(external_id="page.html").title == "Офис"
    assert RecordLink.objects.filter(from_record__external_id="hr/otpusk.md", to_record=vpn).exists()
    assert Chunk.objects.count() >= 4


def test_reingesting_changes_nothing(folder, user):
    ingest_path(folder)
    before = snapshot()
    report = ingest_path(folder)
    assert (report.created, report.updated, report.unchanged) == (0, 0, 4)
    assert snapshot() == before


def test_editing_one_file_changes_only_that_record(folder, user):
    ingest_path(folder)
    before = {r[0]: r[1:] for r in snapshot()[0]}
    vpn_id = Record.objects.get(external_id="it/vpn.md").pk
    write(folder, "it/vpn.md", "---\ntitle: VPN\nacl: [group:it]\nauthor: user:alice\n---\nWireGuard, порт 51821.")
    report = ingest_path(folder)
    assert (report.created, report.updated, report.unchanged) == (0, 1, 3)
    after = {r[0]: r[1:] for r in snapshot()[0]}
    changed = {pk for pk in before if before[pk] != after[pk]}
    assert changed == {vpn_id}
    assert "51821" in Chunk.objects.get(record_id=vpn_id).text


def test_bad_files_are_reported_and_the_rest_goes_on(folder, user):
    write(folder, "bad/yaml.md", "---\ntitle: [oops\n---\nТекст")
    write(folder, "bad/empty.md", "---\ntitle: Пусто\nacl: [everyone]\n---\n\n")
    write(folder, "bad/acl.md", "---\nacl: [root]\n---\nТекст")
    write(folder, "bad/ghost.md", "---\nacl: [user:ghost]\n---\nТекст")
    write(folder, "bad/url.md", "---\nacl: [everyone]\nurl: javascript:alert(1)\n---\nТекст")
    (folder / "bad/binary.md").write_bytes(b"\xff\xfe\x00garbage\x81")
    report = ingest_path(folder)
    failed = dict(report.errors)
    assert set(failed) == {"bad/yaml.md", "bad/empty.md", "bad/acl.md", "bad/ghost.md", "bad/binary.md", "bad/url.md"}
    assert "https://" in failed["bad/url.md"]
    assert "malformed front matter" in failed["bad/yaml.md"]
    assert "empty document" in failed["bad/empty.md"]
    assert "unreadable" in failed["bad/binary.md"]
    assert "ghost" in failed["bad/ghost.md"]
    assert report.created == 4


def test_unreadable_file_is_reported(folder, user, monkeypatch):
    path = write(folder, "locked.md", "---\nacl: [everyone]\n---\nТекст")
    path.chmod(0)
    if os.geteuid() == 0:
        # root reads any file: make the read fail the way a permission error would
        original = type(path).read_text

        def read_text(self, *args, **kwargs):
            if self.name == "locked.md":
                raise PermissionError(13, "Permission denied", str(self))
            return original(self, *args, **kwargs)

        monkeypatch.setattr(type(path), "read_text", read_text)
    report = ingest_path(folder)
    assert dict(report.errors)["locked.md"].startswith("unreadable")
    assert report.created == 4


def test_prune_removes_records_whose_file_is_gone(folder, user):
    ingest_path(folder)
    (folder / "notes.txt").unlink()
    report = ingest_path(folder, prune=True)
    assert report.pruned == 1
    assert not Record.objects.filter(external_id="notes.txt").exists()


def test_prune_is_skipped_when_a_file_failed(folder, user):
    ingest_path(folder)
    (folder / "notes.txt").unlink()
    write(folder, "bad.md", "---\ntitle: [oops\n---\nx")
    report = ingest_path(folder, prune=True)
    assert report.prune_skipped and report.pruned == 0
    assert Record.objects.filter(external_id="notes.txt").exists()


def test_prune_only_touches_its_own_folder(folder, tmp_path_factory, user):
    other = tmp_path_factory.mktemp("other")
    write(other, "x.md", "---\nacl: [everyone]\n---\nДругая папка")
    ingest_path(folder)
    ingest_path(other)
    ingest_path(folder, prune=True)
    assert Record.objects.filter(external_id="x.md").exists()


def test_ingest_command_prints_a_summary(folder, user, capsys):
    call_command("ingest", str(folder), "--no-progress")
    out = capsys.readouterr().out
    assert "4 files: 4 created, 0 updated, 0 unchanged, 0 failed, 0 pruned" in out


def test_demo_corpus_ingests_cleanly_and_idempotently(user_factory):
    user_factory(username="admin", groups=["it", "finance"])
    user_factory(username="demo", groups=["it"])
    call_command("demo_knowledge")
    records = Record.objects.count()
    assert 40 <= records <= 80
    assert Record.objects.filter(acl__contains=["group:finance"]).exists()
    assert Record.objects.filter(acl__contains=["public"]).exists()
    before = snapshot()
    report = ingest_path(DEMO, prune=True)
    assert report.errors == [] and report.warnings == []
    assert report.unchanged == records
    assert snapshot() == before


def test_ingest_command_fails_when_a_file_failed(folder, user, capsys):
    from django.core.management.base import CommandError

    write(folder, "bad.md", "---\ntitle: [oops\n---\nx")
    with pytest.raises(CommandError, match="1 file"):
        call_command("ingest", str(folder), "--no-progress")
    captured = capsys.readouterr()
    assert "4 created" in captured.out and "bad.md" in captured.err
