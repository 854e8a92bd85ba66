"""The «Знания» page in Chromium against daphne and a real Celery worker on the ``ingest`` queue:
an admin drops six files of different formats onto the page, watches each reach «indexed», picks
a corrupt file and sees its error with nothing else changed, and the chat then answers from an
uploaded document with a citation to it (the offline builtin model)."""

from __future__ import annotations

import base64

import pytest
from django.conf import settings
from playwright.sync_api import expect

from knowledge.models import Document
from tests.browser.conftest import sign_in, wait_js
from tests.knowledge.files import CORRUPT, upload_samples
from tests.processes import start_celery_worker, stop

pytestmark = [pytest.mark.browser]

# A drop of real File objects (Playwright has no native file drop): the page's own drop handler runs.
DROP = """([files]) => {
  const transfer = new DataTransfer();
  for (const f of files) {
    const bytes = Uint8Array.from(atob(f.data), c => c.charCodeAt(0));
    transfer.items.add(new File([bytes], f.name));
  }
  const zone = document.getElementById("dropzone");
  zone.dispatchEvent(new DragEvent("dragover", {dataTransfer: transfer, bubbles: true, cancelable: true}));
  zone.dispatchEvent(new DragEvent("drop", {dataTransfer: transfer, bubbles: true, cancelable: true}));
}"""


@pytest.fixture
def ingest_worker(live_url, tmp_path):
    log = tmp_path / "ingest.log"
    worker = start_celery_worker(
        log, "ingest-browser", queues=[settings.KNOWLEDGE_INGEST_QUEUE], extra=("--without-gossip", "--without-mingle")
    )
    yield log
    stop(worker)


def test_admin_uploads_six_formats_sees_states_and_chat_cites_them(
    live_url, page, ingest_worker, user_factory, model_factory
):
    model_factory(name="builtin-extractive", provider="builtin", is_default=True)
    admin = user_factory(username="browser-knowledge", is_staff=True, groups=["it"])
    samples = upload_samples()
    sign_in(page, live_url, admin.username)
    page.goto(live_url + "/knowledge/")
    expect(page.locator("#sources .source[data-source=uploads] .count")).to_have_text("0 документов")
    page.select_option("#acl", "everyone")

    page.evaluate(DROP, [[{"name": s.filename, "data": base64.b64encode(s.data).decode()} for s in samples]])

    # each file: its own line with progress, then its state in the list, live
    expect(page.locator("#uploads .upload[data-result=ok]")).to_have_count(len(samples))
    for sample in samples:
        row = page.locator(f".document:has(.name:text-is('{sample.filename}'))")
        expect(row.locator(".badge")).to_have_text("проиндексирован", timeout=60_000)
    expect(page.locator("#sources .source[data-source=uploads] .count")).to_have_text("6 документов")

    # a corrupt file through the picker: its error on the page, the others untouched
    page.set_input_files(
        "#file-input", files=[{"name": CORRUPT[0], "mimeType": "application/octet-stream", "buffer": CORRUPT[1]}]
    )
    broken = page.locator(f".document:has(.name:text-is('{CORRUPT[0]}'))")
    expect(broken.locator(".badge")).to_have_text("ошибка", timeout=30_000)
    expect(broken.locator(".doc-error")).to_contain_text("файл повреждён")
    expect(page.locator(".document[data-state=indexed]")).to_have_count(len(samples))
    wait_js(page, "!document.querySelector('.document[data-state=queued], .document[data-state=parsing]')")

    # search on the page finds the scanned PDF's words (OCR)
    page.fill("#search-query", "место сбора пожарная тревога")
    page.click("#search-form button[type=submit]")
    expect(page.locator("#search-results .hit").first).to_contain_text("северного входа")

    # the chat answers from the DOCX table with a citation to that document
    docx = Document.objects.get(filename="per-diem.docx")
    page.goto(live_url + "/chat/")
    page.wait_for_selector("body[data-socket=open]", state="attached")
    page.fill("#q", samples[1].question)
    page.click("#send")
    answer = page.locator(".msg.assistant[data-id]").last
    expect(answer.locator(".text")).to_contain_text("900 рублей", timeout=30_000)
    links = answer.locator(".sources .source a.title")
    hrefs = [links.nth(i).get_attribute("href") for i in range(links.count())]
    assert any(f"/api/knowledge/documents/{docx.pk}/download" in (href or "") for href in hrefs), hrefs
