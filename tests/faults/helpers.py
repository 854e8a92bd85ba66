"""Shared by the fault tests: waiting, /healthz, process trees."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path


def wait_for(predicate, timeout: float, what: str, log: Path | None = None, every: float = 0.2):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(every)
    raise AssertionError(f"{what} did not happen in {timeout}s\n{log.read_text()[-4000:] if log else ''}")


def healthz() -> dict:
    from django.test import Client

    return Client().get("/healthz").json()


def children(pid: int) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(p) for p in text.split()]


def kill_all(pids) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
