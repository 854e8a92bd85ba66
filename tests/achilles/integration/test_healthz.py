"""/healthz and the processes behind it: a real Celery worker and beat, and start-up checks."""

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.conf import settings
from django.test import Client

from achilles.health import heartbeat_write
from tests.processes import STARTUP_SECONDS, start_celery_beat, start_celery_worker, stop

pytestmark = [pytest.mark.integration]
ROOT = Path(settings.BASE_DIR)


@pytest.mark.django_db
def test_healthz_is_503_naming_the_missing_heartbeats():
    response = Client().get("/healthz")
    assert response.status_code == 503
    body = response.json()
    assert body["db"] == "ok" and body["redis"] == "ok"
    assert body["worker"] == body["agents_worker"] == body["ingest_worker"] == body["beat"] == "no heartbeat"


@pytest.mark.django_db
def test_healthz_names_a_missing_agents_worker_alone():
    heartbeat_write("worker")
    heartbeat_write("ingest_worker")
    heartbeat_write("beat")
    response = Client().get("/healthz")
    assert response.status_code == 503
    assert response.json() == {
        "db": "ok",
        "redis": "ok",
        "worker": "ok",
        "agents_worker": "no heartbeat",
        "ingest_worker": "ok",
        "beat": "ok",
    }


@pytest.mark.django_db
def test_healthz_names_a_missing_ingest_worker_alone():
    for role in ("worker", "agents_worker", "beat"):
        heartbeat_write(role)
    response = Client().get("/healthz")
    assert response.status_code == 503
    assert response.json()["ingest_worker"] == "no heartbeat"
    assert {k for k, v in response.json().items() if v != "ok"} == {"ingest_worker"}


@pytest.mark.django_db
def test_healthz_is_200_when_everything_answers():
    for role in ("worker", "agents_worker", "ingest_worker", "beat"):
        heartbeat_write(role)
    response = Client().get("/healthz")
    assert response.status_code == 200
    assert response.json() == dict.fromkeys(("db", "redis", "worker", "agents_worker", "ingest_worker", "beat"), "ok")


@pytest.mark.django_db(transaction=True)
def test_a_real_worker_and_beat_make_healthz_green(tmp_path):
    # given a worker and beat started the way `make run` starts them
    procs = [
        start_celery_worker(tmp_path / "w.log", "health", loglevel="WARNING"),
        start_celery_beat(tmp_path / "b.log", tmp_path / "beat-schedule"),
    ]
    try:
        # when we poll /healthz
        deadline, body = time.monotonic() + STARTUP_SECONDS, {}
        while time.monotonic() < deadline:
            response = Client().get("/healthz")
            body = response.json()
            if response.status_code == 200:
                break
            time.sleep(0.5)
        # then the heartbeats arrive (this worker serves both queues)
        assert body == dict.fromkeys(("db", "redis", "worker", "agents_worker", "ingest_worker", "beat"), "ok"), (
            body,
            (tmp_path / "w.log").read_text()[-2000:],
            (tmp_path / "b.log").read_text()[-2000:],
        )
    finally:
        for proc in procs:
            stop(proc)


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("REDIS_URL", "redis://127.0.0.1:1/0"),
        ("DATABASE_URL", "postgres://nobody:secret@127.0.0.1:1/nothing"),
        ("DEBUG", "perhaps"),
    ],
)
def test_a_bad_or_silent_configured_service_stops_startup_naming_it(variable, value):
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    env[variable] = value
    result = subprocess.run(
        [sys.executable, "manage.py", "check"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )
    assert result.returncode != 0
    assert variable in result.stderr
    assert "secret" not in result.stderr


def test_a_web_process_enqueues_to_the_configured_broker():
    from celery import current_app

    from achilles.tasks import platform_heartbeat_task

    assert current_app.main == "achilles"
    assert platform_heartbeat_task.app.conf.broker_url == settings.CELERY_BROKER_URL


@pytest.mark.django_db(transaction=True)
def test_a_worker_for_agent_runs_only_vouches_for_agent_runs_not_the_platform_queue(tmp_path):
    # given a worker consuming only the agent-run queue (no one runs the scheduler tick)
    proc = start_celery_worker(tmp_path / "w.log", "agents-only", queues=[settings.AGENT_RUN_QUEUE])
    try:
        deadline = time.monotonic() + STARTUP_SECONDS
        while "ready." not in (tmp_path / "w.log").read_text() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert "ready." in (tmp_path / "w.log").read_text()
        deadline, body = time.monotonic() + STARTUP_SECONDS, {}
        while time.monotonic() < deadline:
            body = Client().get("/healthz").json()
            if body["agents_worker"] == "ok":
                break
            time.sleep(0.3)
        # then /healthz counts it for agent runs, not as the platform worker
        assert body["agents_worker"] == "ok"
        assert body["worker"] == body["ingest_worker"] == "no heartbeat"
    finally:
        stop(proc)
