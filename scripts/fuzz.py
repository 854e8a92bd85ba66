"""`make fuzz`: schemathesis against /api/openapi.json of a real daphne, as an admin and as a user
at once, while a racer deletes what the fuzzers (and itself) are changing. Bounded in time.

A throwaway database (``achilles_fuzz``) with the demo data, its own cache namespace and queues
(``ACHILLES_TESTING=1``, ``TEST_DATABASE_NAME=fuzz``), so a running `make run` is not touched.
Reports the cases each fuzzer ran and every failed check (CHECKS below; a 5xx of the racer too);
exits 1 if there was any.

    FUZZ_SECONDS=120 make fuzz      # the time budget of each fuzzer (default 60; they run in parallel)
    FUZZ_CHECKS=all make fuzz       # other schemathesis checks
    FUZZ_SEED=20261201 make fuzz    # the same cases in the same order (CI runs with a fixed seed)
"""

from __future__ import annotations

import json
import os
import random
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
BIN = ROOT / ".venv" / "bin"
DB_NAME = "achilles_fuzz"
SECONDS = int(os.environ.get("FUZZ_SECONDS", "60"))
# Every check the API is held to: no 5xx, and every answer as the schema says (status codes, content
# type, headers, body), a malformed request refused, a deleted object gone (use_after_free) and a
# created one there (ensure_resource_availability), auth never ignored. Not positive_data_acceptance
# ("schema-valid input is accepted"): the API refuses with 422 what no JSON Schema can say — an opaque
# signed cursor it did not issue, a model not on the allow-list, an unknown principal or setting, NUL
# characters PostgreSQL cannot store — each a documented 422 with its field, never a 5xx.
CHECKS = os.environ.get(
    "FUZZ_CHECKS",
    "not_a_server_error,status_code_conformance,content_type_conformance,response_headers_conformance,"
    "response_schema_conformance,negative_data_rejection,missing_required_header,unsupported_method,"
    "allow_header_conformance,use_after_free,ensure_resource_availability,ignored_auth",
)
REPORT_DIR = ROOT / "var" / "fuzz"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env() -> dict[str, str]:
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "achilles.settings")
    from achilles.bootstrap import bootstrap

    bootstrap()  # starts/joins the embedded services and exports their URLs
    return {
        **os.environ,
        "ACHILLES_DB_NAME": DB_NAME,
        "ACHILLES_TESTING": "1",
        "TEST_DATABASE_NAME": "fuzz",
        "ACHILLES_ENV": "dev",
    }


def _fresh_database(env: dict[str, str]) -> None:
    import psycopg

    from achilles.bootstrap import database_settings

    db = database_settings(env["DATABASE_URL"])
    with psycopg.connect(
        host=db["HOST"] or None,
        port=db.get("PORT") or None,
        user=db["USER"],
        password=db.get("PASSWORD") or None,
        dbname="postgres",
        autocommit=True,
    ) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {DB_NAME} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {DB_NAME}")


SEED = """
from django.db import connection
from achilles.models import User
from achilles.services import api_token_create
# Token ids far from the small integers a fuzzer tries first: a fuzzer must not revoke its own.
with connection.cursor() as c:
    c.execute("SELECT setval(pg_get_serial_sequence('api_tokens', 'id'), 900000000)")
out = {}
for name in ("admin", "demo"):
    _, raw = api_token_create(user=User.objects.get(username=name))
    out[name] = raw
print("TOKENS=" + __import__("json").dumps(out))
"""


def _manage(env, *args, capture=False) -> str:
    result = subprocess.run(
        [str(BIN / "python"), "manage.py", *args], cwd=ROOT, env=env, check=True, capture_output=capture, text=True
    )
    return result.stdout if capture else ""


class Racer(threading.Thread):
    """As the user: create an agent and a conversation, then PATCH/feedback/chat racing DELETE."""

    def __init__(self, base: str, token: str, deadline: float):
        super().__init__(daemon=True)
        self.base, self.deadline = base, deadline
        self.headers = {"Authorization": f"Bearer {token}"}
        self.requests = 0
        self.server_errors: list[str] = []

    def _call(self, client, method, path, **kwargs):
        response = client.request(method, path, headers=self.headers, **kwargs)
        self.requests += 1
        if response.status_code >= 500:
            self.server_errors.append(f"{method} {path} → {response.status_code} {response.text[:200]}")
        return response

    def _together(self, *calls):
        threads = [threading.Thread(target=call) for call in calls]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    def run(self):
        with httpx.Client(base_url=self.base, timeout=30) as client:
            while time.monotonic() < self.deadline:
                created = self._call(client, "POST", "/api/agents", json={"name": f"гонка {random.random():.6f}"})
                if created.status_code == 201:
                    agent = f"/api/agents/{created.json()['id']}"
                    self._together(
                        lambda a=agent: self._call(client, "PATCH", a, json={"enabled": False}),
                        lambda a=agent: self._call(client, "POST", f"{a}/run"),
                        lambda a=agent: self._call(client, "DELETE", a),
                    )
                chat = self._call(client, "POST", "/api/chat", json={"content": "Что такое отпуск?"})
                conversation = chat.headers.get("x-conversation-id")
                messages = re.findall(r'"message_id": (\d+)', chat.text)
                if conversation:
                    path = f"/api/conversations/{conversation}"
                    feedback = f"/api/messages/{messages[0]}/feedback" if messages else None
                    self._together(
                        lambda p=path: self._call(client, "PATCH", p, json={"title": "новое"}),
                        lambda f=feedback: f and self._call(client, "PUT", f, json={"value": 1}),
                        lambda c=conversation: self._call(
                            client, "POST", "/api/chat", json={"content": "ещё", "conversation_id": c}
                        ),
                        lambda p=path: self._call(client, "DELETE", p),
                    )


def _fuzz(name: str, url: str, token: str, env) -> subprocess.Popen:
    log = open(REPORT_DIR / f"{name}.log", "w")  # noqa: SIM115 (the fuzzer's output for its whole life)
    return subprocess.Popen(
        [
            str(BIN / "schemathesis"),
            "--config-file",
            str(ROOT / "scripts" / "fuzz.toml"),
            "run",
            f"{url}/api/openapi.json",
            "--header",
            f"Authorization: Bearer {token}",
            "--checks",
            CHECKS,
            # A long poll by design (it holds the request up to timeout_minutes, 10 by default):
            # the request timeout would call that a network error. tests/hub cover it.
            "--exclude-path-regex",
            "/wait$",
            "--max-time",
            str(SECONDS),
            # One worker: with two threads, hypothesis's lambda-source cache hit CPython 3.11's
            # "AST constructor recursion depth mismatch" (a SystemError of the tool, not the API).
            "--workers",
            "1",
            "--no-color",
            "--generation-database",
            "none",
            "--suppress-health-check",
            "all",
            "--request-timeout",
            "30",
            "--continue-on-failure",
            "--report",
            "ndjson",
            "--report-ndjson-path",
            str(REPORT_DIR / f"{name}.ndjson"),
            # FUZZ_SEED: the same generated cases in the same order (CI); unset, a new draw each run
            *(["--seed", os.environ["FUZZ_SEED"]] if os.environ.get("FUZZ_SEED") else []),
        ],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )


def _summary(name: str, returncode: int) -> tuple[int, list[str]]:
    """(cases run, [failed checks]) from the fuzzer's own report: each failure once, as
    "check: operation → status: message"; a non-zero exit (schemathesis exits 1 when a check
    failed) counts even if no line could be picked out."""
    text = (REPORT_DIR / f"{name}.log").read_text()
    cases = sum(int(n) for n in re.findall(r"(\d+) generated", text)) or sum(
        int(n) for n in re.findall(r"Test cases:\s*(\d+)", text)
    )
    found: set[str] = set()
    for line in (REPORT_DIR / f"{name}.ndjson").read_text().splitlines():
        scenario = json.loads(line).get("ScenarioFinished")
        if not scenario or scenario.get("status") not in ("failure", "error"):
            continue
        recorder = scenario.get("recorder") or {}
        for case_id, checks in (recorder.get("checks") or {}).items():
            response = ((recorder.get("interactions") or {}).get(case_id) or {}).get("response") or {}
            for check in checks:
                if check.get("status") != "failure":
                    continue
                failure = (check.get("failure_info") or {}).get("failure") or {}
                operation = failure.get("operation") or recorder.get("label", "?")
                message = " ".join(str(failure.get("message", failure.get("title", ""))).split())[:200]
                found.add(f"{check['name']}: {operation} → {response.get('status_code', '?')}: {message}")
    if returncode != 0 and not found:
        # Not a failed check: an error (a request that timed out, or one of the tool's own).
        tool_errors = re.findall(r"🚫 ([^:\n]+): \d+", text)
        found.add(
            f"schemathesis exited {returncode} ({', '.join(tool_errors) or 'no check failed'}); see var/fuzz/{name}.log"
        )
    return cases, sorted(found)


def main() -> int:
    REPORT_DIR.mkdir(parents=True, exist_ok=True)
    env = _env()
    print(f"fuzz: a fresh database {DB_NAME}, migrations and demo data…", flush=True)
    _fresh_database(env)
    _manage(env, "migrate", "--noinput", "-v0")
    _manage(env, "demo_data")
    tokens = json.loads(_manage(env, "shell", "-c", SEED, capture=True).split("TOKENS=", 1)[1])
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    web = subprocess.Popen(
        [str(BIN / "daphne"), "-b", "127.0.0.1", "-p", str(port), "achilles.asgi:application"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=open(REPORT_DIR / "web.log", "w"),  # noqa: SIM115 (daphne's log while it runs)
    )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{url}/api/openapi.json", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.5)
        print(f"fuzz: schemathesis as admin and as user for {SECONDS}s each, with a delete racer…", flush=True)
        fuzzers = {name: _fuzz(name, url, tokens[user], env) for name, user in (("admin", "admin"), ("user", "demo"))}
        racer = Racer(url, tokens["demo"], time.monotonic() + SECONDS)
        racer.start()
        for proc in fuzzers.values():
            proc.wait(timeout=SECONDS + 600)
        racer.join(timeout=120)
    finally:
        web.send_signal(signal.SIGTERM)
        try:
            web.wait(timeout=20)
        except subprocess.TimeoutExpired:
            web.kill()
    total_errors = 0
    for name in ("admin", "user"):
        cases, errors = _summary(name, fuzzers[name].returncode)
        total_errors += len(errors)
        print(f"fuzz [{name}]: {cases} cases, {len(errors)} failed check(s)  (log: var/fuzz/{name}.log)")
        for line in errors[:20]:
            print("   ", line)
    print(f"fuzz [racer]: {racer.requests} requests, {len(racer.server_errors)} server error(s)")
    for line in racer.server_errors[:20]:
        print("   ", line)
    total_errors += len(racer.server_errors)
    return 1 if total_errors else 0


if __name__ == "__main__":
    sys.exit(main())
