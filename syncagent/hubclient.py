"""The hub side of the sync agent: ``httpx`` to ``/api/hub/sync-agent/…`` (``hub/PROTOCOL.md``).

The hub being down is normal life for an on-prem program: network errors, 5xx and 429 are retried
with jittered backoff until the hub answers (or the agent is stopping). A 4xx is an answer — the
caller decides what it means — and is never retried.
"""

from __future__ import annotations

import logging
import random
import threading
from typing import Any

import httpx

log = logging.getLogger("syncagent.hub")
PREFIX = "/api/hub/sync-agent"


class HubRejected(Exception):
    """The hub answered 4xx: ``status`` and its ``{"detail", "code"}`` body."""

    def __init__(self, status: int, body: Any):
        detail = body.get("detail") if isinstance(body, dict) else body
        super().__init__(f"hub {status}: {detail}")
        self.status = status
        self.body = body
        self.code = body.get("code") if isinstance(body, dict) else None


class Stopping(Exception):
    """The agent was asked to stop while waiting for the hub."""


class HubClient:
    def __init__(
        self,
        base_url: str,
        token: str,
        *,
        timeout: float = 30.0,
        verify_ssl: bool = True,
        stop: threading.Event | None = None,
        max_backoff: float = 30.0,
    ):
        self.base_url = base_url.rstrip("/")
        self.stop = stop or threading.Event()
        self.max_backoff = max_backoff
        self.client = httpx.Client(
            base_url=self.base_url,
            timeout=timeout,
            verify=verify_ssl,
            headers={"Authorization": f"Bearer {token}", "User-Agent": "achilles-sync-agent"},
        )

    def close(self) -> None:
        self.client.close()

    def request(self, method: str, path: str, *, json: Any = None, attempts: int | None = None) -> httpx.Response:
        """Retry until the hub answers 2xx/4xx (or ``attempts`` run out, or stop): returns the 2xx."""
        attempt = 0
        while True:
            if self.stop.is_set():
                raise Stopping()
            attempt += 1
            try:
                resp = self.client.request(method, path, json=json)
            except httpx.HTTPError as exc:
                reason = f"{type(exc).__name__}: {exc}"
            else:
                if resp.status_code < 400:
                    return resp
                if resp.status_code < 500 and resp.status_code != 429:
                    try:
                        body = resp.json()
                    except ValueError:
                        body = {"detail": resp.text[:300], "code": "http_error"}
                    raise HubRejected(resp.status_code, body)
                reason = f"HTTP {resp.status_code}"
            if attempts is not None and attempt >= attempts:
                raise ConnectionError(f"hub unreachable: {reason}")
            delay = min(self.max_backoff, 0.5 * 2 ** min(attempt - 1, 8)) * (0.5 + random.random())
            log.warning("hub %s %s: %s; retrying in %.1f s", method, path, reason, delay)
            if self.stop.wait(delay):
                raise Stopping()

    def claim(self, payload: dict[str, Any]) -> dict[str, Any]:
        return self.request("POST", f"{PREFIX}/claim", json=payload).json()

    def report(self, payload: dict[str, Any]) -> dict[str, Any]:
        return self.request("POST", f"{PREFIX}/report", json=payload).json()

    def sync_run_start(self, kind: str) -> int:
        return int(self.request("POST", f"{PREFIX}/sync-runs", json={"kind": kind}).json()["id"])

    def sync_run_finish(self, run_id: int, *, status: str, counts: dict[str, int], errors: list[str]) -> None:
        self.request(
            "POST",
            f"{PREFIX}/sync-runs/{run_id}/finish",
            json={"status": status, "counts": counts, "errors": errors[:50]},
        )

    def upload(self, run_id: int, issues: list[dict[str, Any]]) -> dict[str, Any]:
        return self.request("POST", f"{PREFIX}/upload", json={"sync_run_id": run_id, "issues": issues}).json()

    def download(self, url: str) -> tuple[bytes, str | None]:
        resp = self.request("GET", url, attempts=5)
        return resp.content, resp.headers.get("X-Checksum-SHA256")
