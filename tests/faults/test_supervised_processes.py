"""`make run`'s process supervision (issue 10, finding 2): supervisord with the repository's own
supervisord.conf (pointed at the test database and queues) keeps every process running through
``kill -9`` of a worker, of the web process, and Redis and PostgreSQL stopping; /healthz tells the
truth at every step, and a run whose worker was killed does not stay stuck."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
from pathlib import Path

import httpx
import pytest
from django.conf import settings

from agents.models import AgentRun
from agents.services import agent_create, agent_run_request
from tests.achilles.factories import AllowedModelFactory, UserFactory
from tests.achilles.llm_stub_server import StubLLMServer, StubReply
from tests.faults.helpers import wait_for
from tests.processes import child_env, database_reconnect, postgres_start, postgres_stop, redis_stop

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

ROOT = Path(settings.BASE_DIR)
PROGRAMS = ("services", "web", "worker", "agents", "beat")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Supervisor:
    def __init__(self, tmp: Path):
        self.dir = tmp / "supervisor"
        self.dir.mkdir()
        self.port = _free_port()
        text = (ROOT / "supervisord.conf").read_text()
        # The repository's file, with this test run's state dir, queues and worker names.
        text = text.replace("%(here)s/var/supervisor", str(self.dir)).replace("%(here)s", str(ROOT))
        text = text.replace(
            "-Q celery --hostname=platform@",
            f"-Q {settings.CELERY_TASK_DEFAULT_QUEUE} --hostname=platform-{os.getpid()}@",
        )
        text = text.replace(
            "-Q agents --hostname=agents@", f"-Q {settings.AGENT_RUN_QUEUE} --hostname=agents-{os.getpid()}@"
        )
        text = text.replace(
            "-Q ingest --hostname=ingest@",
            f"-Q {settings.KNOWLEDGE_INGEST_QUEUE} --hostname=ingest-{os.getpid()}@",
        )
        text = text.replace(
            "-Q connectors --hostname=connectors@",
            f"-Q {settings.KNOWLEDGE_CONNECTOR_QUEUE} --hostname=connectors-{os.getpid()}@",
        )
        self.conf = tmp / "supervisord.conf"
        self.conf.write_text(text)
        self.log = tmp / "supervisord.out"
        env = {**child_env(), "ACHILLES_HOST": "127.0.0.1", "ACHILLES_PORT": str(self.port)}
        self.env = env
        self.proc = subprocess.Popen(
            [str(ROOT / ".venv/bin/supervisord"), "-c", str(self.conf)],
            cwd=ROOT,
            env=env,
            stdout=open(self.log, "w"),  # noqa: SIM115 (for its whole life)
            stderr=subprocess.STDOUT,
        )

    def status(self) -> dict[str, tuple[str, int | None]]:
        out = subprocess.run(
            [str(ROOT / ".venv/bin/supervisorctl"), "-c", str(self.conf), "status"],
            capture_output=True,
            text=True,
            env=self.env,
            timeout=20,
        ).stdout
        result = {}
        for line in out.splitlines():
            parts = line.split()
            if len(parts) >= 2:
                pid = int(parts[3].rstrip(",")) if len(parts) > 3 and parts[2] == "pid" else None
                result[parts[0]] = (parts[1], pid)
        return result

    def running(self, *names) -> bool:
        status = self.status()
        return all(status.get(name, ("", None))[0] == "RUNNING" for name in names or PROGRAMS[1:])

    def web_answers(self) -> bool:
        try:
            return httpx.get(f"http://127.0.0.1:{self.port}/healthz", timeout=3).status_code in (200, 503)
        except httpx.HTTPError:
            return False

    def healthz(self) -> dict:
        """/healthz of the supervised web process (the one a load balancer would ask)."""
        try:
            return httpx.get(f"http://127.0.0.1:{self.port}/healthz", timeout=20).json()
        except (httpx.HTTPError, ValueError):
            return {"web": "unreachable"}

    def all_green(self) -> bool:
        return all(value == "ok" for value in self.healthz().values())

    def ctl(self, *args: str) -> None:
        subprocess.run(
            [str(ROOT / ".venv/bin/supervisorctl"), "-c", str(self.conf), *args],
            capture_output=True,
            env=self.env,
            timeout=60,
            check=True,
        )

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=90)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def tail(self) -> str:
        return self.log.read_text()[-5000:]


# Five processes started, killed and restarted one after the other, each step bounded by its own wait
# below: 225 s in all at load 16 on the two cores, past the suite's 180 s per test.
@pytest.mark.timeout(600)
def test_make_run_keeps_every_process_alive_through_kills_and_service_restarts(tmp_path):
    """Failed before the fix: under honcho the death of one process (a worker's Unrecoverable
    error, a ``kill -9``) stopped every process, the embedded services included."""
    supervisor = Supervisor(tmp_path)
    try:
        with StubLLMServer(replies=[StubReply(text="Не дождётся.", ttft=90)]) as llm:
            AllowedModelFactory(
                name="stub-late",
                provider="openai",
                is_default=True,
                options={"base_url": llm.base_url, "timeout": 120, "idle_timeout": 100},
            )
            agent = agent_create(owner=UserFactory(username="supervised"), name="late", instructions="Отчёт.")

            wait_for(lambda: supervisor.running() and supervisor.web_answers(), 120, "all processes up", supervisor.log)
            wait_for(supervisor.all_green, 60, "/healthz green", supervisor.log)

            # 1. kill -9 of the agents worker's main process, with a run in flight
            run = agent_run_request(agent=agent)
            wait_for(lambda: AgentRun.objects.get(pk=run.pk).state == "running", 60, "run start", supervisor.log)
            old_pid = supervisor.status()["agents"][1]
            os.kill(old_pid, signal.SIGKILL)
            wait_for(
                lambda: supervisor.status()["agents"][1] not in (None, old_pid) and supervisor.running("agents"),
                60,
                "agents worker restarted",
                supervisor.log,
            )
            assert supervisor.proc.poll() is None and supervisor.running()
            # the run it held is reaped by the platform's own reaper (beat → worker), not left stuck
            reaped = wait_for(
                lambda: (r := AgentRun.objects.get(pk=run.pk)).state != "running" and r,
                90,
                "the killed worker's run reaped",
                supervisor.log,
            )
            assert (reaped.state, reaped.reason) == ("failed", "worker_lost")
            wait_for(supervisor.all_green, 60, "/healthz green again", supervisor.log)

            # 2. kill -9 of the web process
            web_pid = supervisor.status()["web"][1]
            os.kill(web_pid, signal.SIGKILL)
            wait_for(
                lambda: supervisor.status()["web"][1] not in (None, web_pid) and supervisor.web_answers(),
                60,
                "web restarted",
                supervisor.log,
            )

            # 3. Redis stops: /healthz says so (the guard held for a moment to look), the guard starts
            # it again, every process lives on
            supervisor.ctl("stop", "services")
            redis_stop()
            wait_for(lambda: supervisor.healthz().get("redis", "").startswith("error"), 20, "/healthz: redis down")
            assert supervisor.running("web", "worker", "agents", "beat")
            supervisor.ctl("start", "services")
            wait_for(supervisor.all_green, 90, "/healthz green after Redis came back", supervisor.log, every=1)
            assert supervisor.running() and supervisor.proc.poll() is None

            # 4. PostgreSQL stops: the same
            supervisor.ctl("stop", "services")
            postgres_stop()
            wait_for(lambda: supervisor.healthz().get("db", "ok") != "ok", 60, "/healthz: db down")
            supervisor.ctl("start", "services")
            wait_for(lambda: supervisor.healthz().get("db") == "ok", 90, "PostgreSQL back", supervisor.log, every=1)
            database_reconnect()  # this test's own sessions went with the restart
            wait_for(supervisor.all_green, 60, "/healthz green after PostgreSQL came back", supervisor.log, every=1)
            assert supervisor.running() and supervisor.proc.poll() is None
            assert not AgentRun.objects.filter(state__in=["queued", "running"]).exists()
    finally:
        supervisor.stop()
        postgres_start()
        database_reconnect()
    assert "entered FATAL state" not in supervisor.tail(), supervisor.tail()  # supervisord never gave up
