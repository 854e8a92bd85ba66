"""``PUT /api/knowledge/documents/{id}``: a document's file replaced keeps the document and its
record (same ids), its old chunks go, search and citations find the new version; a refused file
or a stranger changes nothing; a parse of the old file finishing after the replace writes nothing."""

from __future__ import annotations

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test.client import BOUNDARY, MULTIPART_CONTENT, encode_multipart

from knowledge.models import Chunk, Document, Record
from knowledge.uploads import services as uploads
from knowledge.uploads.services import document_parse

pytestmark = [pytest.mark.api, pytest.mark.django_db]

URL = "/api/knowledge/documents"
OLD = "Командировки\n\nСуточные составляют 700 рублей в день.".encode("cp1251")
NEW = "Командировки\n\nСуточные составляют 1500 рублей в день.".encode()


@pytest.fixture(autouse=True)
def _no_broker(monkeypatch):
    monkeypatch.setattr("knowledge.tasks.document_parse_task.delay", lambda *a: None)


def _put(client, document_id, name, data, **fields):
    body = encode_multipart(BOUNDARY, {"file": SimpleUploadedFile(name, data), **fields})
    return client.put(f"{URL}/{document_id}", body, content_type=MULTIPART_CONTENT)


@pytest.fixture
def indexed(admin_user, client_for):
    client = client_for(admin_user)
    response = client.post(URL, {"files": [SimpleUploadedFile("trips.txt", OLD)], "acl": "everyone"})
    document_id = response.json()["items"][0]["id"]
    assert document_parse(document_id=document_id) == "indexed"
    return client, Document.objects.get(pk=document_id)


def _texts(record_id):
    return " ".join(Chunk.objects.filter(record_id=record_id).values_list("text", flat=True))


def test_replace_keeps_the_document_and_record_and_swaps_the_chunks(indexed):
    client, document = indexed
    old_chunks = set(Chunk.objects.filter(record_id=document.record_id).values_list("pk", flat=True))

    response = _put(client, document.pk, "trips-2026.md", NEW)

    assert response.status_code == 202, response.content
    body = response.json()
    assert (body["id"], body["state"], body["filename"], body["record_id"]) == (
        document.pk,
        "queued",
        "trips-2026.md",
        None,
    )
    # until the new file is indexed search still answers from the old version
    assert "700 рублей" in _texts(document.record_id)
    assert document_parse(document_id=document.pk) == "indexed"
    after = Document.objects.get(pk=document.pk)
    assert after.record_id == document.record_id  # the same record: citations to it find the new text
    assert "1500 рублей" in _texts(after.record_id) and "700 рублей" not in _texts(after.record_id)
    assert not old_chunks & set(Chunk.objects.filter(record_id=after.record_id).values_list("pk", flat=True))
    assert Record.objects.filter(source_system="uploads", external_id=str(document.pk)).count() == 1
    search = client.post("/api/knowledge/search", {"query": "суточные 1500"}, content_type="application/json")
    assert search.status_code == 200, search.content
    assert after.record_id in [hit["record_id"] for hit in search.json()["candidates"]]


def test_a_refused_file_or_a_stranger_changes_nothing(indexed, client_for, user_factory):
    client, document = indexed
    before = Document.objects.values().get(pk=document.pk)

    assert _put(client, document.pk, "empty.txt", b"").status_code == 422
    assert _put(client, document.pk, "tool.exe", b"MZ").status_code == 422
    assert client_for(user_factory(username="stranger")).put(f"{URL}/{document.pk}").status_code in (404, 422)
    stranger = client_for(user_factory(username="stranger2"))
    assert _put(stranger, document.pk, "x.txt", NEW).status_code == 404
    assert _put(client, 999_999_999, "x.txt", NEW).status_code == 404

    assert Document.objects.values().get(pk=document.pk) == before
    assert "700 рублей" in _texts(document.record_id)


def test_a_new_file_that_fails_takes_the_old_version_out_of_search(indexed):
    client, document = indexed
    assert _put(client, document.pk, "broken.docx", b"PK\x03\x04 not really a docx").status_code == 202
    assert document_parse(document_id=document.pk) == "failed"
    after = Document.objects.get(pk=document.pk)
    assert after.state == "failed" and after.error and after.record_id is None
    assert not Record.objects.filter(pk=document.record_id).exists()


def test_an_old_parse_finishing_after_the_replace_writes_nothing(indexed, monkeypatch):
    client, document = indexed
    assert _put(client, document.pk, "v2.txt", OLD + b" v2").status_code == 202
    real_parse = uploads._parse_with_ocr

    def replaced_meanwhile(data, *, filename):
        parsed = real_parse(data, filename=filename)
        uploads.document_replace(
            actor=document.owner, document_id=document.pk, file=uploads.UploadFile.of("v3.txt", NEW)
        )
        return parsed

    monkeypatch.setattr(uploads, "_parse_with_ocr", replaced_meanwhile)
    assert document_parse(document_id=document.pk) == "stale"
    assert Document.objects.get(pk=document.pk).state == "queued"  # the v3 parse task settles it
    monkeypatch.setattr(uploads, "_parse_with_ocr", real_parse)
    assert document_parse(document_id=document.pk) == "indexed"
    after = Document.objects.get(pk=document.pk)
    assert after.filename == "v3.txt" and after.record_id == document.record_id
    assert "1500 рублей" in _texts(after.record_id)


@pytest.mark.parametrize(
    ("body", "content_type"),
    [
        (b'--x\r\nContent-Disposition: form-data; name="file"\r\n\r\nno end', "multipart/form-data; boundary=x"),
        (b"garbage", "multipart/form-data"),
        (b"plain", "text/plain"),
    ],
)
def test_a_malformed_replace_body_is_a_4xx_in_the_error_shape(indexed, body, content_type):
    client, document = indexed
    response = client.put(f"{URL}/{document.pk}", body, content_type=content_type)
    assert 400 <= response.status_code < 500, response.content
    assert response.json()["code"]
    assert Document.objects.get(pk=document.pk).state == "indexed"


@pytest.mark.parametrize("method", ["PATCH", "POST"])
def test_another_method_with_the_replace_body_is_405(indexed, method):
    """Found by `make fuzz`: a multipart body (binary, NUL bytes in it) sent to the document with a
    method it does not take was refused as NUL-carrying JSON (422) before routing could say 405."""
    client, document = indexed
    body = encode_multipart(BOUNDARY, {"file": SimpleUploadedFile("x.bin", b"\x00\x01binary")})
    response = client.generic(method, f"{URL}/{document.pk}", body, content_type=MULTIPART_CONTENT)
    assert response.status_code == 405, response.content
    assert response.json()["code"] == "method_not_allowed"
