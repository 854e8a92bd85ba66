"""Issue 23's first «done when» over REST: a PDF, a DOCX with a table, a PPTX, an XLSX, a cp1251
text and a scanned PDF uploaded through ``POST /api/knowledge/documents``, parsed by a real Celery
worker on the ``ingest`` queue, answer a question in chat (``/api/chat``, the offline builtin model)
with a citation to the right document; a corrupt file fails with its reason and changes nothing
else."""

from __future__ import annotations

import time

import pytest
from django.conf import settings
from django.core.files.uploadedfile import SimpleUploadedFile

from knowledge.models import Document, Record
from tests.conversations.asgi_stream import parse_sse
from tests.knowledge.files import CORRUPT, upload_samples
from tests.processes import start_celery_worker, stop

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

SETTLED = {"indexed", "failed", "needs_ocr"}


def _wait_settled(client, ids, log, timeout=90):
    deadline, states = time.monotonic() + timeout, {}
    while time.monotonic() < deadline:
        states = {i: client.get(f"/api/knowledge/documents/{i}").json() for i in ids}
        if all(d["state"] in SETTLED for d in states.values()):
            return states
        time.sleep(0.2)
    pytest.fail(
        f"documents not settled: {[(d['filename'], d['state']) for d in states.values()]}\n{log.read_text()[-3000:]}"
    )


def test_six_formats_uploaded_over_rest_are_cited_in_chat(tmp_path, admin_user, client_for, asgi_client, model_factory):
    model_factory(name="builtin-extractive", provider="builtin", is_default=True)
    log = tmp_path / "ingest.log"
    worker = start_celery_worker(
        log, "ingest-e2e", queues=[settings.KNOWLEDGE_INGEST_QUEUE], extra=("--without-gossip", "--without-mingle")
    )
    client = client_for(admin_user)
    samples = upload_samples()
    try:
        response = client.post(
            "/api/knowledge/documents",
            {"files": [SimpleUploadedFile(s.filename, s.data) for s in samples], "acl": "everyone"},
        )
        assert response.status_code == 202, response.content
        ids = [item["id"] for item in response.json()["items"]]
        documents = _wait_settled(client, ids, log)
        assert {d["filename"]: d["state"] for d in documents.values()} == dict.fromkeys(
            [s.filename for s in samples], "indexed"
        ), [(d["filename"], d["error"]) for d in documents.values()]
        indexed = {d["filename"]: d for d in documents.values()}

        # a corrupt file: failed with its reason, nothing else changed
        before = list(Record.objects.order_by("pk").values_list("pk", "content_hash"))
        broken = client.post(
            "/api/knowledge/documents", {"files": [SimpleUploadedFile(*CORRUPT)], "acl": "everyone"}
        ).json()["items"][0]
        failed = _wait_settled(client, [broken["id"]], log)[broken["id"]]
        assert failed["state"] == "failed" and failed["error_code"] == "corrupt" and failed["error"]
        assert list(Record.objects.order_by("pk").values_list("pk", "content_hash")) == before
        assert Document.objects.filter(state="indexed").count() == len(samples)
    finally:
        stop(worker)

    # each question is answered with a citation to its own document
    chat = asgi_client(admin_user)
    for sample in samples:
        response = chat.post("/api/chat", json={"content": sample.question})
        assert response.status_code == 200, response.text
        done = next(data for event, data in parse_sse(response.text) if event == "done")
        cited = [c["record_id"] for c in done["citations"]]
        assert indexed[sample.filename]["record_id"] in cited, (sample.filename, done)
