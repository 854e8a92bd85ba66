"""An upload through a real Celery worker that consumes only the ``ingest`` queue: the parse task
is routed there after commit, and the document ends indexed with its record."""

from __future__ import annotations

import time

import pytest
from django.conf import settings

from knowledge.models import Document, Record
from knowledge.uploads import services as uploads
from tests.achilles.factories import UserFactory
from tests.processes import STARTUP_SECONDS, start_celery_worker

pytestmark = [pytest.mark.integration]


@pytest.mark.django_db(transaction=True)
def test_the_ingest_worker_parses_an_upload(tmp_path):
    owner = UserFactory(username="uploader", is_staff=True)
    worker = start_celery_worker(
        tmp_path / "ingest.log",
        "ingest",
        queues=[settings.KNOWLEDGE_INGEST_QUEUE],
        extra=("--without-gossip", "--without-mingle"),
    )
    try:
        # when a document is uploaded (committed: the task goes to Redis after commit)
        outcome = uploads.documents_upload(
            owner=owner,
            files=[uploads.UploadFile.of("trips.txt", "Командировки\n\nСуточные - 1500 рублей.".encode("koi8_r"))],
            acl=["everyone"],
        )
        document_id = outcome.documents[0].pk
        deadline = time.monotonic() + STARTUP_SECONDS
        while time.monotonic() < deadline:
            document = Document.objects.defer("content").get(pk=document_id)
            if document.state in {"indexed", "failed", "needs_ocr"}:
                break
            time.sleep(0.1)
    finally:
        worker.terminate()
        worker.wait(timeout=20)
    # then the worker on the ingest queue indexed it
    assert document.state == "indexed", (document.state, document.error, (tmp_path / "ingest.log").read_text()[-3000:])
    record = Record.objects.get(pk=document.record_id)
    assert record.source_system == "uploads" and "1500 рублей" in record.chunks.get().text
