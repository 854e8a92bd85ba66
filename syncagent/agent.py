"""The sync agent's loop: claim → execute → report, then sync, every poll interval.

Launcher contract (when started by ``run.py``; see ``run.py`` for the other side), all in the
directory ``$ACHILLES_SYNC_LAUNCHER_DIR``:

- ``update.json`` (written by the launcher, read here on every claim): the launcher's last update
  attempt ``{"state", "from_version", "to_version", "error"}``, sent to the hub as ``update``;
- ``claimed.json`` (written here after every successful claim): ``{"version", "pid", "at"}`` — how
  the launcher learns that a freshly started version works;
- ``publication.json`` (written here when the hub announces a publication): what to download.

``$ACHILLES_SYNC_LAUNCHER_VERSION`` is the launcher's version; without it the agent reports
``launcher_version: null`` («без запускателя»).
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from pathlib import Path
from typing import Any

from syncagent import cron
from syncagent.commands import Claimed, Executor
from syncagent.config import LAUNCHER_DIR_ENV, LAUNCHER_VERSION_ENV, Config
from syncagent.hubclient import HubClient, HubRejected, Stopping
from syncagent.jiraclient import JiraError, JiraGateway, JiraUnavailable
from syncagent.state import State, iso, utcnow
from syncagent.sync import Syncer
from syncagent.version import VERSION

log = logging.getLogger("syncagent")

DEFAULT_SETTINGS: dict[str, Any] = {
    "base_label": "AWPCA",
    "poll_interval_seconds": 10,
    "lease_seconds": 120,
    "full_sync_cron": "0 3 * * *",
    "projects": ["AURORA"],
    "project_acl": {},
    "sync_overlap_minutes": 2,
    "page_size": 100,
}


def write_json_atomic(path: Path, value: Any) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(value, ensure_ascii=False))
    os.replace(tmp, path)


def read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


class SyncAgent:
    def __init__(self, config: Config, *, stop: threading.Event | None = None):
        self.config = config
        self.stop = stop or threading.Event()
        self.state = State.open(config.state_dir)
        self.jira = JiraGateway(
            config.jira_url,
            config.jira_token,
            max_attempts=config.max_429_attempts,
            timeout=config.http_timeout,
            verify_ssl=config.verify_ssl,
            on_rate_limited=self.state.add_rate_limited,
            sleep=self._sleep,
        )
        self.hub = HubClient(
            config.hub_url, config.token, timeout=config.http_timeout, verify_ssl=config.verify_ssl, stop=self.stop
        )
        self.syncer = Syncer(self.jira, self.hub, self.state, self.settings)
        self.executor = Executor(self.jira, self.state, self.settings, self.syncer.refresh, sleep=self._sleep)
        launcher_version = os.environ.get(LAUNCHER_VERSION_ENV)
        self.launcher_version = int(launcher_version) if launcher_version else None
        launcher_dir = os.environ.get(LAUNCHER_DIR_ENV)
        self.launcher_dir = Path(launcher_dir) if launcher_dir and self.launcher_version else None
        self.last_incremental = 0.0
        self.cron_checked = utcnow()

    def _sleep(self, seconds: float) -> None:
        # Jira waits (429, backoff) end early when the agent is asked to stop; the command then
        # goes unreported and the hub re-issues it after the lease.
        if self.stop.wait(seconds):
            raise Stopping()

    def settings(self) -> dict[str, Any]:
        return {**DEFAULT_SETTINGS, **(self.state.data.get("settings") or {})}

    # ---- hub side -------------------------------------------------------------------------------------
    def claim_payload(self) -> dict[str, Any]:
        update = read_json(self.launcher_dir / "update.json") if self.launcher_dir else None
        return {
            "version": VERSION,
            "launcher_version": self.launcher_version,
            "max_commands": self.config.max_commands,
            "settings_version": self.state.data.get("settings_version"),
            "update": update,
        }

    def after_claim(self, answer: dict[str, Any]) -> None:
        if answer.get("settings") is not None:
            self.state.set_settings(answer.get("settings_version"), answer["settings"])
            log.info("settings v%s applied", answer.get("settings_version"))
        cancelled = set(answer.get("cancelled") or [])
        if cancelled:
            pending, _ = self.state.pending()
            self.state.acknowledge({r["command_id"] for r in pending if r["command_id"] in cancelled}, 0)
        if self.launcher_dir:
            write_json_atomic(
                self.launcher_dir / "claimed.json", {"version": VERSION, "pid": os.getpid(), "at": iso(utcnow())}
            )
            publication = answer.get("publication")
            path = self.launcher_dir / "publication.json"
            if publication and read_json(path) != publication:
                write_json_atomic(path, publication)

    def flush_reports(self) -> None:
        pending, events = self.state.pending()
        if not pending and not events:
            return
        try:
            self.hub.report({"results": pending, "rate_limited": events})
            self.state.acknowledge({r["command_id"] for r in pending}, len(events))
            return
        except HubRejected as exc:
            log.warning("hub refused a report of %d results: %s; sending them one by one", len(pending), exc)
        # A 4xx refuses the whole report: find the one it is about, keep the rest.
        for result in pending:
            try:
                self.hub.report({"results": [result], "rate_limited": []})
            except HubRejected as exc:
                log.error("hub refused the report of command %s: %s (dropped)", result["command_id"], exc)
            self.state.acknowledge({result["command_id"]}, 0)
        if events:
            try:
                self.hub.report({"results": [], "rate_limited": events})
            except HubRejected as exc:
                log.error("hub refused the 429 events: %s (dropped)", exc)
            self.state.acknowledge(set(), len(events))

    # ---- one round --------------------------------------------------------------------------------
    def round(self) -> int:
        """Claim once, execute and report what came; returns the number of commands handled."""
        self.flush_reports()
        answer = self.hub.claim(self.claim_payload())
        self.after_claim(answer)
        cancelled = set(answer.get("cancelled") or [])
        handled = 0
        for c in answer.get("commands") or []:
            if self.stop.is_set():
                break
            if c["id"] in cancelled:
                continue
            claimed = Claimed(
                id=c["id"],
                batch_id=c.get("batch_id", 0),
                seq=c.get("seq", 0),
                claims=c.get("claims", 1),
                lease_token=c["lease_token"],
                lease_expires_at=c.get("lease_expires_at"),
                command=c["command"],
            )
            try:
                report = self.executor.execute(claimed)
            except JiraUnavailable as exc:
                # Not decided: no report; the hub re-issues the command after its lease.
                log.error("command %s: Jira unavailable (%s); left to the lease", c["id"], exc)
                break
            log.info(
                "command %s %s: %s %s",
                c["id"],
                c["command"].get("type"),
                report["status"],
                report.get("error") or (report.get("result") or {}).get("message", ""),
            )
            self.state.add_report(report)
            self.flush_reports()
            handled += 1
        return handled

    def maybe_sync(self) -> None:
        s = self.settings()
        now = utcnow()
        try:
            if cron.fired_between(s.get("full_sync_cron") or "0 3 * * *", self.cron_checked, now):
                self.cron_checked = now
                self.syncer.full()
                self.last_incremental = time.monotonic()
                return
        except ValueError as exc:
            log.error("full_sync_cron %r: %s", s.get("full_sync_cron"), exc)
        self.cron_checked = now
        if time.monotonic() - self.last_incremental >= float(s.get("poll_interval_seconds", 10)):
            self.last_incremental = time.monotonic()
            self.syncer.incremental()

    def run(self) -> None:
        log.info(
            "sync agent v%s (launcher %s) → hub %s, Jira %s",
            VERSION,
            f"v{self.launcher_version}" if self.launcher_version else "none",
            self.config.hub_url,
            self.config.jira_url,
        )
        while not self.stop.is_set():
            try:
                if self.round():
                    continue  # more may be queued: claim again right away
                self.maybe_sync()
            except Stopping:
                break
            except HubRejected as exc:
                log.error("hub refused: %s", exc)
            except (JiraError, JiraUnavailable) as exc:
                log.error("Jira: %s", exc)
            except Exception:  # noqa: BLE001 - an on-prem daemon logs and carries on
                log.exception("unexpected error; carrying on")
            self.stop.wait(float(self.settings().get("poll_interval_seconds", 10)))
        self.hub.close()
        log.info("sync agent stopped")
