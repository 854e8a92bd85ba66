"""The production-topology test (marker ``deploy``, `make deploy-test`; kept out of `make test`).

One topology per module (starting it is most of the time): PostgreSQL and Redis over TCP with
passwords, migrate and collectstatic, an operator account, two chat models and a small knowledge
folder, then the two web processes, the platform worker, two agents workers and beat from
``deploy/systemd/``, and nginx in front with TLS (tests/deploy/topology.py)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import httpx
import pytest

from tests.deploy.topology import (
    ROOT,
    free_port,
    make_tls,
    new_topology,
    nginx_binary,
    production_env,
    render_nginx,
    start_nginx,
    wait_until,
)

HERE = Path(__file__).resolve().parent

POLICY = textwrap.dedent(
    """\
    ---
    title: Политика отпусков
    ---
    # Политика отпусков

    Ежегодный оплачиваемый отпуск составляет двадцать восемь календарных дней.
    Отпуск можно разделить на части, одна из которых не короче четырнадцати дней.
    Заявление на отпуск подаётся руководителю не позднее чем за две недели.
    График отпусков утверждается в декабре на весь следующий год.
    Неиспользованный отпуск переносится на следующий год по согласованию с руководителем.
    """
)

SETUP = """
from django.core.management import call_command
from achilles.services import allowed_model_create, api_token_create, user_ensure
user, _ = user_ensure(username="operator", password="{password}", superuser=True, groups=["it"])
call_command("ingest", "{knowledge}", "--no-progress")
allowed_model_create(name="builtin-extractive", provider="builtin", kind="chat", is_default=True,
                     context_window=8192, options={{"delay": 0.05, "timeout": 6}})
allowed_model_create(name="builtin-slow", provider="builtin", kind="chat", is_default=False,
                     context_window=8192, options={{"delay": 0.4}})
from hub.protocol import sync_agent_create
print("TOKENS", api_token_create(user=user, name="topology")[1], sync_agent_create(name="topology")[1])
"""


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.path.is_relative_to(HERE):
            item.add_marker(pytest.mark.deploy)
            if item.path.name == "test_topology.py" and nginx_binary() is None:
                item.add_marker(pytest.mark.skip(reason="nginx is not installed (make deploy-deps)"))


@pytest.fixture(scope="module")
def topology():
    top = new_topology()
    mark = _Stopwatch()
    try:
        (top.base / "tls").mkdir()
        make_tls(top.base / "tls")
        mark("make_tls")
        top.postgres.start()
        mark("top.postgres.start")
        top.redis.start()
        mark("top.redis.start")
        top.env = production_env(top)
        # once per release (deploy/systemd/achilles-migrate.service): migrate, collectstatic
        top.run_unit("achilles-migrate.service")
        mark("top.run_unit")
        knowledge = top.base / "knowledge"
        knowledge.mkdir()
        (knowledge / "vacation.md").write_text(POLICY)
        # the operator's first steps in one process (each manage.py start costs seconds here):
        # an admin account, the chat models, a knowledge folder, an API token
        tokens = top.manage("shell", "-c", SETUP.format(password=top.admin_password, knowledge=knowledge))
        _, top.token, sync_token = tokens.strip().splitlines()[-1].split()
        mark("operator setup")
        top.token = top.manage("api_token", "operator", "--name", "topology").strip().splitlines()[-1]
        for index, port in enumerate(top.web_ports, 1):
            top.start_unit(f"web-{index}", "achilles-web@.service", str(port))
        top.start_unit("worker", "achilles-worker.service")
        top.start_unit("agents-1", "achilles-agents@.service", "1")
        top.start_unit("agents-2", "achilles-agents@.service", "2")
        top.start_unit("beat", "achilles-beat.service")
        # the hub's sync agent under its launcher, reaching the hub through nginx (trusting the test
        # CA) and "Jira" (the emulator with the demo project AURORA)
        jira_port = free_port()
        top.processes["jira"] = subprocess.Popen(
            [sys.executable, "-m", "emulators.jira", "--host", "127.0.0.1", "--port", str(jira_port)]
            + ["--data", "demo", "--token", "jira-pat"],
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=open(top.log("jira"), "w"),
            start_new_session=True,
        )
        top.start_unit(
            "syncagent",
            "achilles-syncagent.service",
            extra_env={
                "ACHILLES_HUB_URL": top.url,
                "ACHILLES_SYNC_TOKEN": sync_token,
                "JIRA_URL": f"http://127.0.0.1:{jira_port}",
                "JIRA_TOKEN": "jira-pat",
                "SSL_CERT_FILE": str(top.ca),
            },
        )
        config = render_nginx(
            top.base / "nginx",
            web_ports=top.web_ports,
            https_port=top.https_port,
            http_port=top.http_port,
            cert=top.cert,
            key=top.key,
            static_root=top.var_dir / "static",
        )
        top.processes["nginx"] = start_nginx(config)
        mark('top.processes["nginx"] = start_nginx')
        # every process up: each daphne answers, and /healthz through nginx sees the workers and beat
        for index, port in enumerate(top.web_ports, 1):
            wait_until(
                lambda port=port: _answers(f"http://127.0.0.1:{port}/healthz"),
                90,
                f"web-{index}",
                top.log(f"web-{index}"),
            )
        with top.client() as client:
            wait_until(lambda: _healthy(client), 90, "/healthz 200 through nginx", top.log("agents-2"), every=0.5)
        mark("healthy through nginx")
        yield top
    finally:
        top.stop_all()
        top.redis.stop()
        top.postgres.stop()
        shutil.rmtree(top.base, ignore_errors=True)


class _Stopwatch:
    """How long each start-up step took (printed with -s; `make deploy-test` shows the durations)."""

    def __init__(self):
        self.last = time.monotonic()

    def __call__(self, step: str) -> None:
        now = time.monotonic()
        print(f"topology: {step} {now - self.last:.1f} s", file=sys.stderr)
        self.last = now


def _answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=2).status_code in (200, 503)
    except httpx.HTTPError:
        return False


def _healthy(client: httpx.Client) -> bool:
    try:
        return client.get("/healthz").status_code == 200
    except httpx.HTTPError:
        return False
