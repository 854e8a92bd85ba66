"""The sync agent's hub side with the hub faked at the HTTP boundary only (a loopback server speaking
PROTOCOL.md): reports survive the hub being down and a ``kill -9`` (the state file), a refused report
does not take the others with it, the claim says «no launcher» without run.py, and the launcher
never starts a publication whose bytes do not match the announced sha256."""

from __future__ import annotations

import hashlib
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from syncagent.agent import SyncAgent
from syncagent.config import Config
from syncagent.package import build_artifact
from syncagent.run import Launcher
from syncagent.state import State
from tests.syncagent.harness import free_port


class FakeHub(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, port: int, *, artifact: bytes = b"", refuse: set[int] = frozenset()):
        self.calls: list[tuple[str, dict]] = []
        self.artifact = artifact
        self.refuse = refuse

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def _answer(self, status, body=None, raw=None):
                data = raw if raw is not None else json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                hub.calls.append((f"GET {self.path}", {}))
                self._answer(200, raw=hub.artifact)

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])) or b"{}")
                hub.calls.append((self.path, body))
                if self.path.endswith("/report"):
                    if any(r["command_id"] in hub.refuse for r in body["results"]):
                        return self._answer(409, {"detail": "lease token was never issued", "code": "lease_mismatch"})
                    return self._answer(
                        200,
                        {"results": [{"command_id": r["command_id"], "outcome": "applied"} for r in body["results"]]},
                    )
                return self._answer(
                    200,
                    {
                        "commands": [],
                        "cancelled": [],
                        "settings_version": 1,
                        "settings": None,
                        "publication": None,
                        "server_time": "2026-11-30T12:00:00Z",
                    },
                )

        hub = self
        super().__init__(("127.0.0.1", port), Handler)
        threading.Thread(target=self.serve_forever, daemon=True).start()

    def close(self):
        self.shutdown()
        self.server_close()


def config(tmp_path, port: int) -> Config:
    return Config(
        hub_url=f"http://127.0.0.1:{port}",
        token="achsync_x",
        jira_url="http://127.0.0.1:9",
        jira_token="x",
        state_dir=tmp_path / "agent",
        http_timeout=2,
    )


def result(command_id: int) -> dict:
    return {
        "command_id": command_id,
        "lease_token": f"t{command_id}",
        "status": "done",
        "result": {"key": "AURORA-1", "created": False, "changed": [], "message": "уже так"},
    }


def test_reports_wait_for_the_hub_and_survive_a_restart(tmp_path, monkeypatch):
    monkeypatch.delenv("ACHILLES_SYNC_LAUNCHER_VERSION", raising=False)
    port = free_port()
    agent = SyncAgent(config(tmp_path, port))
    agent.hub.max_backoff = 0.3
    agent.state.add_report(result(40))
    agent.state.add_rate_limited({"at": "2026-11-30T11:57:01Z", "retry_after_seconds": 3, "path": "/rest/api/2/issue"})
    # "kill -9": a new process reads what the old one wrote
    assert State.open(tmp_path / "agent").pending()[0] == [result(40)]

    again = SyncAgent(config(tmp_path, port))
    again.hub.max_backoff = 0.3
    flushing = threading.Thread(target=again.flush_reports)
    flushing.start()
    time.sleep(1.0)  # the hub is down: the agent keeps trying
    assert flushing.is_alive()
    hub = FakeHub(port)
    try:
        flushing.join(timeout=10)
        assert not flushing.is_alive()
        reports = [body for path, body in hub.calls if path.endswith("/report")]
        assert reports[0]["results"] == [result(40)] and reports[0]["rate_limited"][0]["retry_after_seconds"] == 3
        assert again.state.pending() == ([], [])
        assert State.open(tmp_path / "agent").pending() == ([], [])
        assert again.claim_payload()["launcher_version"] is None  # no run.py: «без запускателя»
    finally:
        hub.close()


def test_a_refused_result_does_not_take_the_others_with_it(tmp_path):
    port = free_port()
    hub = FakeHub(port, refuse={41})
    try:
        agent = SyncAgent(config(tmp_path, port))
        for cid in (40, 41, 42):
            agent.state.add_report(result(cid))
        agent.flush_reports()
        applied = [r["command_id"] for path, body in hub.calls if path.endswith("/report") for r in body["results"]]
        assert applied.count(40) == 2 and applied.count(42) == 2  # the whole report, then one by one
        assert agent.state.pending() == ([], [])
    finally:
        hub.close()


def test_launcher_refuses_a_publication_whose_bytes_do_not_match(tmp_path):
    port = free_port()
    good = build_artifact(7)
    hub = FakeHub(port, artifact=good[:-10] + b"tampered!!")  # what arrives is not what was published
    try:
        launcher = Launcher(
            state_dir=tmp_path / "s",
            agent_argv=[],
            hub_url=f"http://127.0.0.1:{port}",
            token="achsync_x",
            start_timeout=5,
        )
        launcher.meta["current"] = 6
        (launcher.dir / "publication.json").write_text(
            json.dumps(
                {
                    "version": 7,
                    "sha256": hashlib.sha256(good).hexdigest(),
                    "size": len(good),
                    "download_url": "/api/hub/sync-agent/publications/7",
                }
            )
        )
        launcher.maybe_update()
        update = json.loads((launcher.dir / "update.json").read_text())
        assert (update["state"], update["from_version"], update["to_version"]) == ("failed", 6, 7)
        assert "sha256 mismatch" in update["error"] and "not started" in update["error"]
        assert launcher.child is None and not (launcher.versions / "v7").exists()
        launcher.maybe_update()  # the same publication is not downloaded again
        assert [path for path, _ in hub.calls] == ["GET /api/hub/sync-agent/publications/7"]
    finally:
        hub.close()


@pytest.mark.parametrize("member", ["../evil.py", "/etc/evil.py"])
def test_launcher_refuses_unsafe_artifact_paths(tmp_path, member):
    import io
    import tarfile

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        info = tarfile.TarInfo(member)
        info.size = 1
        tar.addfile(info, io.BytesIO(b"x"))
    launcher = Launcher(
        state_dir=tmp_path / "s", agent_argv=[], hub_url="http://127.0.0.1:9", token="x", start_timeout=5
    )
    with pytest.raises(ValueError):
        launcher.unpack(7, buf.getvalue())


def test_a_failed_download_is_retried_later_not_blacklisted(tmp_path, monkeypatch):
    from syncagent import run as runmod

    port = free_port()  # nobody listens: the hub is down
    launcher = Launcher(
        state_dir=tmp_path / "s", agent_argv=[], hub_url=f"http://127.0.0.1:{port}", token="achsync_x", start_timeout=5
    )
    launcher.meta["current"] = 6
    good = build_artifact(7)
    (launcher.dir / "publication.json").write_text(
        json.dumps(
            {
                "version": 7,
                "sha256": hashlib.sha256(good).hexdigest(),
                "size": len(good),
                "download_url": "/api/hub/sync-agent/publications/7",
            }
        )
    )
    launcher.maybe_update()
    assert json.loads((launcher.dir / "update.json").read_text())["state"] == "failed"
    assert "7" not in launcher.meta["bad"]
    monkeypatch.setattr(runmod, "DOWNLOAD_RETRY_SECONDS", 0)
    launcher.download_retry_at.clear()
    hub = FakeHub(port, artifact=good)
    try:
        monkeypatch.setattr(launcher, "start", lambda version: None)  # the update's child is not the point here
        monkeypatch.setattr(launcher, "wait_for_claim", lambda child: None)
        launcher.maybe_update()
        assert json.loads((launcher.dir / "update.json").read_text())["state"] == "done"
        assert launcher.meta["current"] == 7 and (launcher.versions / "v7" / "syncagent" / "run.py").exists()
    finally:
        hub.close()
