"""No sync agent outlives its launcher, and one state directory has one agent: real processes
(the launcher of the repository, its child), against a hub and a Jira nobody answers on."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from syncagent import lifeline
from tests.syncagent.harness import REPO, free_port, python_env, start_agent, start_launcher, stop, wait_until

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")


def sync_agents(state_dir: Path) -> list[int]:
    """Pids of the sync agents (``-m syncagent``) running on ``state_dir`` or under it."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            args = (entry / "cmdline").read_bytes().decode(errors="replace").split("\0")
        except OSError:
            continue  # gone meanwhile
        if "syncagent" in args and any(a.startswith(str(state_dir)) for a in args):
            found.append(int(entry.name))
    return found


def _nobody() -> str:
    return f"http://127.0.0.1:{free_port()}"  # a port just freed: connections are refused


def _launcher(tmp_path: Path, state_dir: Path, log: str) -> subprocess.Popen:
    return start_launcher(
        hub_url=_nobody(), token="achsync_nobody", jira_url=_nobody(), state_dir=state_dir, log=tmp_path / log
    )


def test_kill_9_of_the_launcher_leaves_no_sync_agent_running(tmp_path):
    """Failed before the fix: the child, re-parented to pid 1, went on polling the hub while
    supervisord started a second launcher and child."""
    # given a launcher and the child it started
    state_dir = tmp_path / "state"
    launcher = _launcher(tmp_path, state_dir, "launcher.log")
    try:
        children = wait_until(lambda: sync_agents(state_dir), 30, "the launcher's child")
        assert len(children) == 1
        # when the launcher is killed with -9 (it cannot stop its child itself)
        os.kill(launcher.pid, signal.SIGKILL)
        launcher.wait(timeout=10)
        # then its child is gone within a couple of seconds
        wait_until(lambda: not sync_agents(state_dir), 3, "no sync agent left", interval=0.05)
    finally:
        stop(launcher)
        for pid in sync_agents(state_dir):
            os.kill(pid, signal.SIGKILL)


def test_a_second_sync_agent_on_the_same_state_dir_refuses_to_start(tmp_path):
    # given a sync agent running on a state directory
    state_dir = tmp_path / "agent"
    first = start_agent(
        hub_url=_nobody(), token="achsync_nobody", jira_url=_nobody(), state_dir=state_dir, log=tmp_path / "1.log"
    )
    try:
        wait_until(lambda: (state_dir / "agent.lock").exists() and sync_agents(state_dir), 30, "the first agent")
        wait_until(lambda: (state_dir / "agent.lock").read_text().strip() == str(first.pid), 10, "its pid in the lock")
        # when a second one starts on the same directory
        second = start_agent(
            hub_url=_nobody(), token="achsync_nobody", jira_url=_nobody(), state_dir=state_dir, log=tmp_path / "2.log"
        )
        # then it refuses, naming the one that runs, and the first runs on
        try:
            assert second.wait(timeout=30) == 1
        finally:
            stop(second)
        message = (tmp_path / "2.log").read_text()
        assert f"sync agent: another one (pid {first.pid}) is already running on {state_dir}" in message
        assert first.poll() is None
    finally:
        stop(first)
    # and once the first is gone (even by kill -9: the kernel drops the lock), an agent starts there
    again = start_agent(
        hub_url=_nobody(), token="achsync_nobody", jira_url=_nobody(), state_dir=state_dir, log=tmp_path / "3.log"
    )
    try:
        wait_until(lambda: (state_dir / "agent.lock").read_text().strip() == str(again.pid), 30, "the lock taken again")
        os.kill(again.pid, signal.SIGKILL)
        again.wait(timeout=10)
        lock = lifeline.hold_lock(state_dir / "agent.lock", what="sync agent")
        assert lock is not None
        lock.close()
    finally:
        stop(again)


def test_a_second_launcher_on_the_same_state_dir_refuses_to_start(tmp_path):
    state_dir = tmp_path / "state"
    first = _launcher(tmp_path, state_dir, "1.log")
    second = None
    try:
        wait_until(lambda: sync_agents(state_dir), 30, "the first launcher's child")
        second = _launcher(tmp_path, state_dir, "2.log")
        assert second.wait(timeout=30) == 1
        assert f"sync agent launcher: another one (pid {first.pid})" in (tmp_path / "2.log").read_text()
        assert first.poll() is None and len(sync_agents(state_dir)) == 1
    finally:
        for proc in (second, first):
            if proc is not None:
                stop(proc)
    assert not sync_agents(state_dir)  # a launcher stopped with SIGTERM stops its child too


def test_an_agent_whose_launcher_is_gone_stops_then_exits_if_it_hangs():
    # given an agent that believes its launcher is a pid that is not its parent
    stop_event = threading.Event()
    exits: list[int] = []
    # when its watch looks
    thread = lifeline.watch_parent(os.getppid() + 1, stop_event, every=0.01, grace=0, exit=exits.append)
    thread.join(timeout=5)
    # then it is asked to stop, and then exited
    assert stop_event.is_set() and exits == [1]


def test_the_launcher_module_runs_as_a_script_without_the_repository_on_the_path(tmp_path):
    # `python syncagent/run.py` (how an install runs it) still finds syncagent.lifeline
    done = subprocess.run(
        [sys.executable, str(REPO / "syncagent" / "run.py"), "--help"],
        cwd=tmp_path,
        env=python_env(),
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 0, done.stderr
