"""A real Celery worker on the connectors queue is killed with SIGKILL mid-run; the reaper sends
the run again, a fresh worker resumes from the committed checkpoint: every page is stored exactly
once and counted exactly once."""

from __future__ import annotations

import datetime as dt
import os
import signal
import time

import pytest
from django.conf import settings

from emulators.confluence import ConfluenceStore
from knowledge.connectors.confluence.sync import BATCH
from knowledge.connectors.models import ConnectorRun
from knowledge.connectors.runs import runs_reap
from knowledge.connectors.services import ConnectorFields, connector_create, run_request
from knowledge.models import Record
from tests.confluence_server import running_confluence
from tests.processes import STARTUP_SECONDS, start_celery_worker

pytestmark = [pytest.mark.integration]

PAGES = 3 * BATCH - 10  # three batches of the CQL listing


def _site() -> ConfluenceStore:
    store = ConfluenceStore()
    store.add_user("sync", email="sync@example.com", groups=["confluence-users"])
    store.add_token("kill-pat", "sync")
    store.add_space("BIG", "Big", permissions={"groups": ["confluence-users"]})
    for i in range(PAGES):
        store.add_page("BIG", f"Страница {i:03}", f"<p>Текст страницы номер {i}.</p>", author="sync")
    # each batch's listing is slow: the run takes seconds, long enough to kill it mid-way
    store.faults.add({"kind": "latency", "path": "content/search", "seconds": 1.0, "times": 0})
    return store


def _wait(predicate, timeout: float = STARTUP_SECONDS):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError("timed out")


@pytest.mark.django_db(transaction=True)
def test_a_worker_killed_mid_run_resumes_from_the_checkpoint(tmp_path):
    with running_confluence(_site()) as site:
        connector = connector_create(
            actor=None,
            fields=ConnectorFields(kind="confluence", name="big", base_url=site.url, token="kill-pat", spaces=["BIG"]),
        )
        queues = [settings.KNOWLEDGE_CONNECTOR_QUEUE]
        first = start_celery_worker(
            tmp_path / "w1.log", "conn1", queues=queues, extra=("--without-gossip", "--without-mingle")
        )
        second = None
        try:
            run = run_request(connector_id=connector.pk)
            # when at least one batch is committed and the run is not finished, the worker is killed
            _wait(lambda: ConnectorRun.objects.get(pk=run.pk).checkpoint.get("start", 0) >= BATCH)
            os.kill(first.pid, signal.SIGKILL)
            first.wait(timeout=20)
            killed = ConnectorRun.objects.get(pk=run.pk)
            assert killed.state == "running" and killed.seen < PAGES
            stored_at_kill = Record.objects.filter(source_system=connector.source_system).count()
            assert 0 < stored_at_kill < PAGES
            # then the reaper (its lease taken as over) sends it again; a fresh worker resumes it
            second = start_celery_worker(
                tmp_path / "w2.log", "conn2", queues=queues, extra=("--without-gossip", "--without-mingle")
            )
            assert runs_reap(lease=dt.timedelta(0)) == [run.pk]
            done = _wait(lambda: (r := ConnectorRun.objects.get(pk=run.pk)).finished_at and r)
        finally:
            for worker in (first, second):
                if worker is not None and worker.poll() is None:
                    worker.terminate()
                    worker.wait(timeout=20)
    assert done.state == "succeeded", (done.error, (tmp_path / "w2.log").read_text()[-2000:])
    ids = list(Record.objects.filter(source_system=connector.source_system).values_list("external_id", flat=True))
    assert len(ids) == len(set(ids)) == PAGES
    # counted once each: the interrupted batch's counters died with its transaction
    assert done.seen == PAGES and done.changed == PAGES and done.attempts == 2
