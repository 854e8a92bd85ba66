"""`make run`'s guard of the embedded PostgreSQL/Redis (``python -m achilles.embedded watch``) while
supervisord stops: it goes first and starts nothing on its way out."""

from __future__ import annotations

import configparser
import re
import threading
from pathlib import Path

import pytest

from achilles import embedded

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def starts(monkeypatch):
    started: list[str] = []
    monkeypatch.setattr(embedded, "ensure_postgres", lambda var_dir: started.append("postgres"))
    monkeypatch.setattr(embedded, "ensure_redis", lambda var_dir: started.append("redis"))
    monkeypatch.setattr(embedded, "_redis_answers", lambda module, url: False)
    return started


def test_the_guard_starts_nothing_once_it_is_stopping(tmp_path, starts, monkeypatch):
    """Failed before the fix: SIGTERM arriving while the guard found a server down (stopped by
    `make run`'s exit) was followed by a start, and the server outlived `make run`."""
    stopping = threading.Event()

    def postgres_down_as_the_stop_arrives(var_dir):
        stopping.set()  # SIGTERM from supervisord, while the guard looks
        return False

    monkeypatch.setattr(embedded, "_postgres_running", postgres_down_as_the_stop_arrives)
    # when
    embedded.watch(tmp_path, every=0.01, stopping=stopping)
    # then it returned without starting either server
    assert starts == []


def test_the_guard_starts_a_stopped_server_again_while_it_runs(tmp_path, starts, monkeypatch):
    stopping = threading.Event()
    looks: list[int] = []

    def postgres_running(var_dir):
        looks.append(1)
        if len(looks) > 1:
            stopping.set()  # the second look: time to stop the test
        return len(looks) > 1

    monkeypatch.setattr(embedded, "_postgres_running", postgres_running)
    embedded.watch(tmp_path, every=0.01, stopping=stopping)
    assert starts == ["postgres", "redis"]


def _priorities(text: str) -> dict[str, int]:
    conf = configparser.RawConfigParser()
    conf.read_string(text)
    return {
        s.split(":", 1)[1]: int(conf[s].get("priority", "999")) for s in conf.sections() if s.startswith("program:")
    }


def test_supervisord_stops_the_guard_before_every_other_program():
    # supervisord stops programs from the highest priority down; run.sh adds the Jira emulator and
    # the sync agent
    priorities = _priorities((ROOT / "supervisord.conf").read_text())
    extra = re.search(r"<<PROGS\n(.*?)\nPROGS", (ROOT / "scripts" / "run.sh").read_text(), re.S)
    assert extra is not None
    priorities.update(_priorities(extra.group(1)))
    assert {"web", "worker", "agents", "beat", "jira", "syncagent"} <= set(priorities)
    guard = priorities.pop("services")
    assert guard > max(priorities.values()), priorities
