"""The sync agent's local state file: what must survive a ``kill -9``.

Pending reports and 429 events until the hub acknowledged them, the settings the hub sent, the sync
watermarks, and the idempotency markers of unsafe Jira writes (a create or comment that was sent).
Every change is written through (temp file + fsync + rename), so a crash never loses a result nor
leaves a half-written file.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import threading
from pathlib import Path
from typing import Any

UTC = dt.UTC
MARKER_DAYS = 2


def utcnow() -> dt.datetime:
    return dt.datetime.now(UTC)


def iso(when: dt.datetime) -> str:
    return when.astimezone(UTC).isoformat().replace("+00:00", "Z")


def parse_iso(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00"))


class State:
    def __init__(self, path: Path):
        self.path = path
        self.lock = threading.RLock()
        self.data: dict[str, Any] = {
            "pending_reports": [],
            "rate_limited": [],
            "settings_version": None,
            "settings": {},
            "sync": {},
            "creates": {},
            "comments": {},
            "actions": {},
        }
        if path.exists():
            try:
                self.data.update(json.loads(path.read_text()))
            except ValueError:
                # A torn file cannot happen with rename-on-write; keep a copy rather than lose it silently.
                path.rename(path.with_suffix(".corrupt"))

    @classmethod
    def open(cls, state_dir: Path) -> State:
        state_dir.mkdir(parents=True, exist_ok=True)
        return cls(state_dir / "state.json")

    def save(self) -> None:
        with self.lock:
            tmp = self.path.with_suffix(".tmp")
            with open(tmp, "w") as fh:
                json.dump(self.data, fh, ensure_ascii=False)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, self.path)

    # ---- reports ------------------------------------------------------------------------------
    def add_report(self, result: dict[str, Any]) -> None:
        with self.lock:
            self.data["pending_reports"] = [
                r for r in self.data["pending_reports"] if r["command_id"] != result["command_id"]
            ]
            self.data["pending_reports"].append(result)
            self.save()

    def pending(self) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        with self.lock:
            return list(self.data["pending_reports"]), list(self.data["rate_limited"])

    def acknowledge(self, command_ids: set[int], rate_limited: int) -> None:
        with self.lock:
            self.data["pending_reports"] = [
                r for r in self.data["pending_reports"] if r["command_id"] not in command_ids
            ]
            del self.data["rate_limited"][:rate_limited]
            self.save()

    def add_rate_limited(self, event: dict[str, Any]) -> None:
        with self.lock:
            self.data["rate_limited"].append(event)
            del self.data["rate_limited"][:-1000]
            self.save()

    # ---- markers of unsafe writes ---------------------------------------------------------------
    def marker(self, kind: str, command_id: int) -> dict[str, Any] | None:
        with self.lock:
            return self.data[kind].get(str(command_id))

    def set_marker(self, kind: str, command_id: int, value: dict[str, Any]) -> None:
        with self.lock:
            self.data[kind][str(command_id)] = {**value, "at": value.get("at") or iso(utcnow())}
            self._prune(kind)
            self.save()

    def _prune(self, kind: str) -> None:
        cutoff = utcnow() - dt.timedelta(days=MARKER_DAYS)
        self.data[kind] = {k: v for k, v in self.data[kind].items() if parse_iso(v["at"]) >= cutoff}

    # ---- settings and sync ----------------------------------------------------------------------
    def set_settings(self, version: int, settings: dict[str, Any]) -> None:
        with self.lock:
            self.data["settings_version"] = version
            self.data["settings"] = settings
            self.save()

    def sync_get(self, name: str) -> Any:
        with self.lock:
            return self.data["sync"].get(name)

    def sync_set(self, **values: Any) -> None:
        with self.lock:
            self.data["sync"].update(values)
            self.save()
