"""Uploaded documents end to end on the real store: the parse task's body against the real
database, the states it settles in, what it must never do twice, the tables' invariants broken with
raw SQL, and the thin path — a PDF uploaded over REST answers a chat question with a citation to
it, while a user outside its ACL gets nothing from it."""

from __future__ import annotations

import io
import os

import pytest
from django.contrib.auth.models import Group, Permission
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import IntegrityError, connection, transaction

from knowledge import facade
from knowledge.models import Chunk, Document, Record
from knowledge.parsers.ocr import ocr_available
from knowledge.tasks import document_parse_task
from knowledge.uploads import services as uploads
from tests.knowledge.files import FONT, PdfText, grid, pdf_bytes, scanned_pdf

pytestmark = [pytest.mark.integration, pytest.mark.django_db]

VACATION_PDF = pdf_bytes(
    [
        [
            PdfText(72, 720, "Vacation policy", 24),
            PdfText(72, 690, "Every employee gets 28 calendar days of paid vacation per year.", 11),
            PdfText(72, 660, "Approval", 16),
            PdfText(72, 640, "The line manager approves vacation dates in the HR portal.", 11),
            PdfText(76, 606, "Grade"),
            PdfText(176, 606, "Extra days"),
            PdfText(76, 586, "Senior"),
            PdfText(176, 586, "3"),
        ]
    ],
    grids=[grid(72, 620, [100, 100], 2)],
)


@pytest.fixture
def uploader(user_factory):
    user = user_factory(username="editor", groups=["hr"])
    user.user_permissions.add(Permission.objects.get(codename="add_document"))
    return user


def _upload(owner, filename: str, data: bytes, acl=("everyone",)) -> Document:
    outcome = uploads.documents_upload(owner=owner, files=[uploads.UploadFile.of(filename, data)], acl=list(acl))
    return outcome.documents[0]


def _sql(query, params=None):
    with connection.cursor() as cursor:
        cursor.execute(query, params or [])
        return cursor.fetchall() if cursor.description else None


# --------------------------------------------------------------------------- the task


def test_a_pdf_becomes_an_indexed_user_writable_record(uploader):
    document = _upload(uploader, "vacation.pdf", VACATION_PDF, acl=["group:hr"])

    state = document_parse_task(document.pk)  # the task body, as a worker runs it

    document.refresh_from_db()
    record = Record.objects.get(pk=document.record_id)
    assert state == "indexed" and document.state == "indexed" and document.error == ""
    assert (record.source_system, record.external_id) == ("uploads", str(document.pk))
    assert record.title == "Vacation policy" == document.title
    assert record.acl == ["group:hr"] and record.author_principal_id == f"user:{uploader.pk}"
    assert record.user_writable is True and record.origin == "upload"
    assert record.url == f"http://127.0.0.1:8000/api/knowledge/documents/{document.pk}/download"
    chunks = list(Chunk.objects.filter(record=record).values_list("heading", "text"))
    assert document.chunks == len(chunks)
    assert any(heading == "Vacation policy › Approval" and "| Senior | 3 |" in text for heading, text in chunks)


def test_a_redelivered_task_does_not_duplicate_the_record(uploader):
    document = _upload(uploader, "vacation.pdf", VACATION_PDF)
    document_parse_task(document.pk)
    record_id = Document.objects.get(pk=document.pk).record_id
    chunks = Chunk.objects.count()

    # when the worker died after the upsert but before the ack: the broker delivers it again,
    # the document still «parsing» (its last write lost with the worker)
    Document.objects.filter(pk=document.pk).update(state="parsing", record=None)
    again = document_parse_task(document.pk)
    # and a third delivery of an already settled document
    third = document_parse_task(document.pk)

    assert again == "indexed" and third == "indexed"
    assert Record.objects.filter(source_system="uploads").count() == 1
    assert Document.objects.get(pk=document.pk).record_id == record_id
    assert Chunk.objects.count() == chunks


def test_a_corrupt_file_fails_with_its_reason_and_changes_nothing_else(uploader, make_record):
    make_record("policy.md", "Existing curated text about travel.")
    good = _upload(uploader, "vacation.pdf", VACATION_PDF)
    document_parse_task(good.pk)
    before = (Record.objects.count(), Chunk.objects.count(), facade.generation())
    broken = _upload(uploader, "broken.docx", b"PK\x03\x04 this is no Word file")

    state = document_parse_task(broken.pk)

    broken.refresh_from_db()
    assert state == "failed" and broken.state == "failed" and broken.error_code == "corrupt"
    assert "corrupt" in broken.error and broken.record_id is None
    assert (Record.objects.count(), Chunk.objects.count(), facade.generation()) == before
    assert Document.objects.get(pk=good.pk).state == "indexed"


def test_a_scanned_pdf_needs_ocr_and_is_never_silently_empty(uploader, settings):
    settings.KNOWLEDGE_OCR = False  # as without Tesseract installed
    document = _upload(uploader, "scan.pdf", pdf_bytes([[]]))

    state = document_parse_task(document.pk)

    document.refresh_from_db()
    assert state == "needs_ocr" and document.state == "needs_ocr" and "OCR" in document.error
    assert not Record.objects.filter(source_system="uploads").exists()


needs_tesseract = pytest.mark.skipif(
    not (ocr_available() and os.path.exists(FONT)), reason="needs tesseract-ocr (make ocr-deps) and DejaVu fonts"
)


@needs_tesseract
def test_a_scanned_pdf_is_ocr_d_and_indexed(uploader):
    document = _upload(uploader, "scan.pdf", scanned_pdf([["Регламент пропусков", "", "Гостевой пропуск заказывают"]]))

    state = document_parse_task(document.pk)

    document.refresh_from_db()
    assert state == "indexed" and document.title == "Регламент пропусков"
    assert "Гостевой пропуск заказывают" in Chunk.objects.get(record_id=document.record_id).text


@needs_tesseract
def test_a_blank_scan_fails_as_empty_even_after_ocr(uploader):
    document = _upload(uploader, "blank.pdf", scanned_pdf([[]]))

    assert document_parse_task(document.pk) == "failed"
    document.refresh_from_db()
    assert document.error_code == "empty_document" and "OCR" in document.error


@pytest.mark.parametrize(
    ("filename", "make", "expected"),
    [
        ("trips.txt", lambda: "Командировки\n\nСуточные по Москве — 1500 рублей.".encode("cp1251"), "1500 рублей"),
        ("budget.csv", lambda: "Статья;Сумма\nАренда;100\n".encode("cp1251"), "| Аренда | 100 |"),
    ],
)
def test_text_formats_are_indexed_with_their_words(uploader, filename, make, expected):
    document = _upload(uploader, filename, make())

    document_parse_task(document.pk)

    record_id = Document.objects.get(pk=document.pk).record_id
    assert expected in " ".join(Chunk.objects.filter(record_id=record_id).values_list("text", flat=True))


def test_a_document_deleted_while_parsing_takes_its_record_with_it(uploader, monkeypatch):
    document = _upload(uploader, "vacation.pdf", VACATION_PDF)
    real_upsert = uploads.services.record_upsert

    def upsert_then_delete(**kwargs):
        outcome = real_upsert(**kwargs)
        Document.objects.filter(pk=document.pk).delete()  # the owner deletes it meanwhile
        return outcome

    monkeypatch.setattr(uploads.services, "record_upsert", upsert_then_delete)

    assert document_parse_task(document.pk) == "gone"
    assert not Record.objects.filter(source_system="uploads").exists()


def test_a_file_whose_parse_never_finishes_fails_after_its_attempts(uploader):
    document = _upload(uploader, "huge.pdf", VACATION_PDF)
    # three runs started and never finished (the hard time limit killed the worker each time)
    Document.objects.filter(pk=document.pk).update(state="parsing", attempts=uploads.MAX_PARSE_ATTEMPTS)

    assert document_parse_task(document.pk) == "failed"
    document.refresh_from_db()
    assert document.error_code == "parse_unfinished" and "3 attempts" in document.error


def test_a_parse_over_the_soft_time_limit_fails_with_that_reason(uploader, monkeypatch):
    from celery.exceptions import SoftTimeLimitExceeded

    from knowledge import parsers

    def slow(data):
        raise SoftTimeLimitExceeded()

    monkeypatch.setitem(parsers._PARSERS, "pdf", slow)
    document = _upload(uploader, "slow.pdf", VACATION_PDF)

    assert document_parse_task(document.pk) == "failed"
    document.refresh_from_db()
    assert document.error_code == "too_slow" and "longer than" in document.error and document.attempts == 1


def test_lost_parse_tasks_are_sent_again(uploader, monkeypatch):
    sent = []
    monkeypatch.setattr("knowledge.tasks.document_parse_task.delay", sent.append)
    stale = _upload(uploader, "a.txt", b"old text")
    fresh = _upload(uploader, "b.txt", b"new text")
    _sql("SET LOCAL session_replication_role = replica")  # past the updated_at trigger, for this test
    _sql("UPDATE knowledge_documents SET updated_at = now() - interval '10 minutes' WHERE id = %s", [stale.pk])
    _sql("SET LOCAL session_replication_role = origin")

    assert uploads.documents_requeue_stale() == 1
    assert sent == [stale.pk] and fresh.pk not in sent


def test_upload_is_refused_to_an_inactive_or_unpermitted_user(user_factory):
    from achilles.errors import PermissionDenied

    plain = user_factory(username="plain")

    with pytest.raises(PermissionDenied):
        _upload(plain, "a.txt", b"text")
    assert not Document.objects.exists()


# --------------------------------------------------------------------------- invariants in the database


def _insert(**overrides):
    row = {
        "filename": "'a.txt'",
        "format": "'text'",
        "size": "1",
        "sha256": "''",
        "content": "'\\x41'::bytea",
        "acl": "'{everyone}'",
        "state": "'queued'",
        "error": "''",
        "error_code": "''",
        "title": "''",
        "chunks": "0",
        "attempts": "0",
        "record_id": "NULL",
    }
    row.update(overrides)
    from achilles.models import User

    owner = User.objects.values_list("pk", flat=True).first()
    columns = ", ".join(["owner_id", *row])
    values = ", ".join([str(owner), *row.values()])
    with transaction.atomic():
        _sql(f"INSERT INTO knowledge_documents ({columns}) VALUES ({values})")
        _sql("SET CONSTRAINTS ALL IMMEDIATE")


def test_a_valid_row_is_accepted(uploader):
    _insert()
    assert Document.objects.count() == 1


@pytest.mark.parametrize(
    "overrides",
    [
        {"state": "'done'"},  # unknown state
        {"state": "'failed'"},  # failed without its reason
        {"state": "'needs_ocr'"},  # needs OCR without its reason
        {"error": "'stale reason'"},  # a reason on a queued document
        {"state": "'indexed'"},  # indexed without its record
        {"record_id": "{record}"},  # a record on a document that is not indexed
        {"size": "2"},  # size not the stored length
        {"size": "0", "content": "''::bytea"},  # an empty file
        {"acl": "'{}'"},  # nobody could read it
        {"filename": "''"},
        {"record_id": "999999", "state": "'indexed'"},  # a record that does not exist
    ],
)
def test_the_database_refuses_a_broken_document(uploader, make_record, overrides):
    record = make_record("r.md", "Text")
    overrides = {key: value.replace("{record}", str(record)) for key, value in overrides.items()}
    with pytest.raises(IntegrityError):
        _insert(**overrides)


def test_deleting_the_record_deletes_its_upload(uploader):
    document = _upload(uploader, "a.txt", b"some text to index")
    document_parse_task(document.pk)
    record_id = Document.objects.get(pk=document.pk).record_id

    _sql("DELETE FROM knowledge_records WHERE id = %s", [record_id])

    assert not Document.objects.filter(pk=document.pk).exists()


# --------------------------------------------------------------------------- the thin path


@pytest.fixture
def grounded_chat(model_factory):
    from conversations import pipeline

    pipeline.set_engine_deps(None)  # the real facade, the real candidate cache
    model_factory(name="builtin-extractive", provider="builtin", is_default=True)
    yield
    pipeline.set_engine_deps(None)


def test_a_pdf_uploaded_over_rest_answers_in_chat_with_a_citation(
    uploader, user_factory, client_for, grounded_chat, django_capture_on_commit_callbacks
):
    from tests.conversations.conftest import run_turn

    colleague = user_factory(username="colleague", groups=["hr"])
    outsider = user_factory(username="outsider", groups=["sales"])
    Group.objects.get_or_create(name="sales")
    question = "How many calendar days of paid vacation does every employee get?"

    # when the PDF is uploaded over REST for HR, and its parse task runs (the task body, eagerly)
    with django_capture_on_commit_callbacks() as sent:
        response = client_for(uploader).post(
            "/api/knowledge/documents",
            {"files": [SimpleUploadedFile("vacation.pdf", VACATION_PDF)], "acl": "group:hr"},
        )
    assert response.status_code == 202, response.content
    document_id = response.json()["items"][0]["id"]
    assert Document.objects.get(pk=document_id).state == "queued"  # nothing parsed in the request
    for callback in sent:
        _eager(callback)

    # then it is indexed, and a colleague's question is answered from it with a citation
    status = client_for(uploader).get(f"/api/knowledge/documents/{document_id}").json()
    assert status["state"] == "indexed", status
    answer = run_turn(colleague, question)
    assert answer.error is None
    assert "28 calendar days" in answer.text
    cited = [c for c in answer.done.citations if c["record_id"] == status["record_id"]]
    assert cited and cited[0]["title"] == "Vacation policy"
    assert cited[0]["url"].endswith(f"/api/knowledge/documents/{document_id}/download")

    # and someone outside its ACL gets no candidate from it, nor a citation
    hidden = facade.search(question, facade.Identity.for_user(outsider), 8)
    assert status["record_id"] not in {c.record_id for c in hidden.candidates}
    outside = run_turn(outsider, question)
    assert "28 calendar days" not in outside.text
    assert status["record_id"] not in {c["record_id"] for c in outside.done.citations}


def _eager(callback):
    """Run an on-commit callback with Celery's ``delay`` running the task in place."""
    from knowledge.tasks import document_parse_task as task

    original = task.delay
    task.delay = lambda *args: task.apply(args=args, throw=True)
    try:
        callback()
    finally:
        task.delay = original


@needs_tesseract
def test_a_scanned_pdf_answers_in_chat_with_a_citation(uploader, user_factory, grounded_chat):
    from tests.conversations.conftest import run_turn

    colleague = user_factory(username="colleague", groups=["hr"])
    scan = scanned_pdf([["Регламент пропусков", "", "Гостевой пропуск заказывают за один", "рабочий день до визита."]])
    document = _upload(uploader, "scan.pdf", scan, acl=["group:hr"])
    document_parse_task(document.pk)
    document.refresh_from_db()

    answer = run_turn(colleague, "За сколько дней заказывают гостевой пропуск?")

    assert "за один рабочий день" in answer.text
    assert document.record_id in {c["record_id"] for c in answer.done.citations}


def _docx() -> bytes:
    import docx

    document = docx.Document()
    document.add_heading("Командировки", 1)
    document.add_paragraph("Заявку на командировку подают за пять рабочих дней до поездки.")
    table = document.add_table(rows=2, cols=2)
    for (row, col), text in {(0, 0): "Город", (0, 1): "Суточные", (1, 0): "Казань", (1, 1): "900 рублей"}.items():
        table.cell(row, col).text = text
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def _pptx() -> bytes:
    import pptx

    presentation = pptx.Presentation()
    slide = presentation.slides.add_slide(presentation.slide_layouts[1])
    slide.shapes.title.text = "Итоги квартала"
    slide.placeholders[1].text = "Новый склад в Подольске открылся в мае."
    out = io.BytesIO()
    presentation.save(out)
    return out.getvalue()


def _xlsx() -> bytes:
    import openpyxl

    workbook = openpyxl.Workbook()
    sheet = workbook.active
    sheet.title = "Телефоны"
    sheet.append(["Отдел", "Внутренний телефон"])
    sheet.append(["Бухгалтерия", 4417])
    out = io.BytesIO()
    workbook.save(out)
    return out.getvalue()


@pytest.mark.parametrize(
    ("filename", "make", "question", "fact"),
    [
        ("trips.docx", _docx, "За сколько дней подают заявку на командировку?", "за пять рабочих дней"),
        ("q3.pptx", _pptx, "Когда открылся новый склад в Подольске?", "в мае"),
        ("phones.xlsx", _xlsx, "Какой внутренний телефон у бухгалтерии?", "4417"),
        (
            "pass.txt",
            lambda: "Пропуска\n\nПотерянный пропуск восстанавливают за три дня.".encode("cp1251"),
            "За сколько дней восстанавливают потерянный пропуск?",
            "за три дня",
        ),
    ],
)
def test_each_office_format_answers_in_chat_with_a_citation(
    uploader, user_factory, grounded_chat, filename, make, question, fact
):
    from tests.conversations.conftest import run_turn

    colleague = user_factory(username="colleague", groups=["hr"])
    document = _upload(uploader, filename, make(), acl=["group:hr"])
    assert document_parse_task(document.pk) == "indexed"
    document.refresh_from_db()

    answer = run_turn(colleague, question)

    assert fact in answer.text, answer.text
    assert document.record_id in {c["record_id"] for c in answer.done.citations}
