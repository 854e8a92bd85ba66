"""Real processes for the sync-agent tests: the Jira emulator, the sync agent (alone or under the
launcher), and small helpers to watch them. Imports no Django (unit tests use it too)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parents[2]
SYNC_PAT = "sync-pat"
WRITE_METHODS = ("POST", "PUT", "DELETE")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until(predicate: Callable[[], Any], timeout: float, what: str, interval: float = 0.1) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def wait_port(port: int, timeout: float = 30) -> None:
    def ready() -> bool:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return True
        except OSError:
            return False

    wait_until(ready, timeout, f"port {port}")


def python_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(extra)
    return env


class Emulator:
    """``python -m emulators.jira`` as a process, with its admin routes and a Jira client as a person."""

    def __init__(self, log: Path, *, data: str = "demo", count: int = 0):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        args = [sys.executable, "-m", "emulators.jira", "--port", str(self.port), "--data", data, "--token", SYNC_PAT]
        if count:
            args += ["--count", str(count)]
        self.proc = subprocess.Popen(
            args, cwd=REPO, env=python_env(PYTHONPATH=str(REPO)), stdout=subprocess.DEVNULL, stderr=open(log, "w")
        )  # noqa: SIM115 (the process owns it)
        wait_port(self.port, timeout=120 if count else 30)
        self.admin = httpx.Client(base_url=self.url, timeout=30)
        self.jira = httpx.Client(base_url=self.url, timeout=30, headers={"Authorization": "Bearer jdoe-pat"})

    def faults(self, *rules: dict[str, Any]) -> None:
        self.admin.post("/_emulator/faults", json={"rules": list(rules)}).raise_for_status()

    def clear_faults(self) -> None:
        self.admin.delete("/_emulator/faults").raise_for_status()

    def requests(self, since: int = 0) -> list[dict[str, Any]]:
        return self.admin.get("/_emulator/requests", params={"since": since}).json()["requests"]

    def seq(self) -> int:
        return self.admin.get("/_emulator/requests", params={"since": 10**9}).json()["seq"]

    def writes(self, since: int = 0) -> list[str]:
        """Jira changes since ``since``: successful non-search writes as "METHOD path"."""
        return [
            f"{r['method']} {r['path']}"
            for r in self.requests(since)
            if r["method"] in WRITE_METHODS and "/search" not in r["path"] and 200 <= r["status"] < 300
        ]

    def search(self, jql: str) -> list[dict[str, Any]]:
        resp = self.jira.get("/rest/api/2/search", params={"jql": jql, "maxResults": 1000, "fields": "*all"})
        resp.raise_for_status()
        return resp.json()["issues"]

    def issue(self, key: str) -> dict[str, Any]:
        resp = self.jira.get(f"/rest/api/2/issue/{key}")
        resp.raise_for_status()
        return resp.json()

    def stop(self) -> None:
        stop(self.proc)


def start_launcher(
    *,
    hub_url: str,
    token: str,
    jira_url: str,
    state_dir: Path,
    log: Path,
    run_py: Path | None = None,
    start_timeout: float = 20,
    extra: tuple[str, ...] = (),
) -> subprocess.Popen:
    """The sync agent under the launcher (``run.py`` of the repo, or of another copy, e.g. a v6 tree)."""
    run_py = run_py or REPO / "syncagent" / "run.py"
    args = [
        sys.executable,
        str(run_py),
        "--hub",
        hub_url,
        "--token",
        token,
        "--jira",
        jira_url,
        "--jira-token",
        SYNC_PAT,
        "--state-dir",
        str(state_dir),
        "--start-timeout",
        str(start_timeout),
        *extra,
    ]
    return subprocess.Popen(
        args,
        cwd=state_dir.parent,
        env=python_env(),
        stdout=subprocess.DEVNULL,
        stderr=open(log, "w"),
        start_new_session=True,
    )


def start_agent(*, hub_url: str, token: str, jira_url: str, state_dir: Path, log: Path) -> subprocess.Popen:
    """The sync agent alone (no launcher: it reports launcher_version null)."""
    args = [
        sys.executable,
        "-m",
        "syncagent",
        "--hub",
        hub_url,
        "--token",
        token,
        "--jira",
        jira_url,
        "--jira-token",
        SYNC_PAT,
        "--state-dir",
        str(state_dir),
    ]
    return subprocess.Popen(
        args,
        cwd=REPO,
        env=python_env(PYTHONPATH=str(REPO)),
        stdout=subprocess.DEVNULL,
        stderr=open(log, "w"),
        start_new_session=True,
    )


def stop(proc: subprocess.Popen, timeout: float = 15) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
