"""``kill -9`` of a real ingest worker while it parses a document: after a new worker starts, the
document ends indexed (its start-up sweep sends the parse again once the dead worker's heartbeat
is known stale), with exactly one record — never stuck «parsing», never doubled."""

from __future__ import annotations

import os
import signal
import time

import pytest
from django.conf import settings

from knowledge.models import Document, Record
from knowledge.uploads import services as uploads
from tests.achilles.factories import UserFactory
from tests.knowledge.files import scanned_pdf
from tests.processes import STARTUP_SECONDS, start_celery_worker, stop

pytestmark = [pytest.mark.integration]


def _state(document_id):
    return Document.objects.defer("content").get(pk=document_id)


def _wait(predicate, timeout, what, log):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    pytest.fail(f"timed out waiting for {what}\n{log.read_text()[-3000:]}")


@pytest.mark.django_db(transaction=True)
def test_a_worker_killed_mid_parse_leaves_the_document_indexed_once(tmp_path):
    owner = UserFactory(username="uploader-killed", is_staff=True)
    queue = [settings.KNOWLEDGE_INGEST_QUEUE]
    first_log, second_log = tmp_path / "first.log", tmp_path / "second.log"
    # a scan of several pages: OCR keeps the worker parsing for seconds
    pages = [[f"Страница {n}", "Инструкция по охране труда для склада."] for n in range(8)]
    # Heartbeats every second (the product's setting; 5 s by default): the new worker's sweep knows
    # the killed one dead 3 s after its last beat instead of 15 s (the same sweep, sooner).
    env = {"WORKER_HEARTBEAT_SECONDS": "1"}
    worker = start_celery_worker(
        first_log, "ingest-killed", queues=queue, extra=("--without-gossip", "--without-mingle"), env=env
    )
    second = None
    try:
        document_id = (
            uploads.documents_upload(
                owner=owner, files=[uploads.UploadFile.of("scan.pdf", scanned_pdf(pages))], acl=["everyone"]
            )
            .documents[0]
            .pk
        )
        _wait(lambda: _state(document_id).state == "parsing", STARTUP_SECONDS, "the parse to start", first_log)
        os.kill(worker.pid, signal.SIGKILL)  # the solo pool: the worker is this one process
        worker.wait(timeout=10)
        assert _state(document_id).state == "parsing"  # left behind by the dead worker

        second = start_celery_worker(
            second_log, "ingest-restarted", queues=queue, extra=("--without-gossip", "--without-mingle"), env=env
        )
        document = _wait(
            lambda: (d := _state(document_id)).state in {"indexed", "failed", "needs_ocr"} and d,
            STARTUP_SECONDS,
            "the document to settle after the restart",
            second_log,
        )
    finally:
        if worker.poll() is None:
            stop(worker)
        if second is not None:
            stop(second)
    assert document.state == "indexed", (document.state, document.error)
    assert Record.objects.filter(source_system="uploads", external_id=str(document_id)).count() == 1
    assert Record.objects.get(pk=document.record_id).chunks.exists()
    assert document.attempts == 2
