"""Mirror sync: Jira issues → hub upload pages, each run reported as a ``sync_run``.

Incremental: ``labels = <base> AND updated >= "<watermark − overlap>"`` ordered by ``updated``,
paged; JQL dates are minute-granular, so the overlap re-reads a little and ``key + updated``
de-duplicates what was already uploaded. Full: the same without the date. Refresh: ``key in (…)``.
"""

from __future__ import annotations

import datetime as dt
import logging
import queue
import re
import threading
import time
import zoneinfo
from collections.abc import Callable
from typing import Any

from syncagent.hubclient import HubClient, HubRejected
from syncagent.jiraclient import JiraError, JiraGateway, JiraUnavailable
from syncagent.state import State, iso, parse_iso

log = logging.getLogger("syncagent.sync")
_SPRINT_ATTRS = re.compile(r"(\w+)=(.*?)(?=,\w+=|$)")


def parse_sprint(value: Any) -> dict[str, str] | None:
    """One Sprint field entry: DC's ``com.atlassian.greenhopper.service.sprint.Sprint@…[id=…,name=…,state=…]``
    string, or the object newer versions send."""
    if isinstance(value, dict):
        return {
            "id": str(value.get("id")),
            "name": value.get("name") or "",
            "state": str(value.get("state") or "").upper(),
        }
    if not isinstance(value, str):
        return None
    m = re.search(r"\[(.*)\]\s*$", value, re.S)
    if not m:
        return None
    attrs = dict(_SPRINT_ATTRS.findall(m.group(1)))
    if "name" not in attrs:
        return None
    return {"id": attrs.get("id", ""), "name": attrs["name"], "state": attrs.get("state", "").upper()}


def current_sprint(values: Any) -> str:
    """The issue's sprint for the mirror: the active one, else a future one, else the last closed."""
    sprints = [s for s in (parse_sprint(v) for v in values or []) if s]
    for state in ("ACTIVE", "FUTURE"):
        for s in reversed(sprints):
            if s["state"] == state:
                return s["name"]
    return sprints[-1]["name"] if sprints else ""


_PLUMBING = frozenset({"self", "avatarUrls", "iconUrl", "expand"})


def _compact(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _compact(v) for k, v in value.items() if k not in _PLUMBING and v is not None}
    if isinstance(value, list):
        return [_compact(v) for v in value]
    return value


def jira_updated(text: str) -> dt.datetime:
    """``2026-11-30T11:50:00.000+0000`` → aware datetime."""
    return dt.datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%f%z")


class Syncer:
    def __init__(self, jira: JiraGateway, hub: HubClient, state: State, settings: Callable[[], dict[str, Any]]):
        self.jira = jira
        self.hub = hub
        self.state = state
        self.settings = settings
        self.seen: dict[str, str] = {}  # key → `updated` already uploaded (the overlap window's de-dup)

    # ---- mapping ------------------------------------------------------------------------------------
    def map_issue(self, raw: dict[str, Any], sprint_field: str | None) -> dict[str, Any]:
        f = raw.get("fields") or {}
        comments = (f.get("comment") or {}).get("comments") or []
        if (f.get("comment") or {}).get("total", 0) > len(comments):
            comments = self.jira.comments(raw["key"])
        links = []
        for link in f.get("issuelinks") or []:
            name = (link.get("type") or {}).get("name", "")
            if link.get("outwardIssue"):
                links.append({"link_type": name, "direction": "outward", "other_key": link["outwardIssue"]["key"]})
            elif link.get("inwardIssue"):
                links.append({"link_type": name, "direction": "inward", "other_key": link["inwardIssue"]["key"]})
        # Comments and links travel structured beside the raw fields, not twice; REST plumbing (self
        # URLs, avatars) and empty fields carry nothing for the mirror but cost every upload.
        raw_fields = {
            k: _compact(v) for k, v in f.items() if k not in ("comment", "issuelinks") and v not in (None, [], "")
        }
        return {
            "key": raw["key"],
            "project": (f.get("project") or {}).get("key") or raw["key"].rsplit("-", 1)[0],
            "summary": f.get("summary") or "",
            "status": (f.get("status") or {}).get("name") or "",
            "issue_type": (f.get("issuetype") or {}).get("name") or "",
            "priority": (f.get("priority") or {}).get("name") or "",
            "assignee": (f.get("assignee") or {}).get("name") or "",
            "duedate": f.get("duedate"),
            "sprint": current_sprint(f.get(sprint_field)) if sprint_field else "",
            "labels": list(f.get("labels") or []),
            "updated": f.get("updated"),
            "fields": raw_fields,
            "links": links,
            "comments": [
                {
                    "id": str(c["id"]),
                    "author": (c.get("author") or {}).get("name") or "",
                    "created": c.get("created"),
                    "body": c.get("body") or "",
                }
                for c in comments
            ],
        }

    # ---- runs ---------------------------------------------------------------------------------------
    def _jql_base(self) -> str:
        s = self.settings()
        parts = []
        projects = [p for p in s.get("projects") or [] if p]
        if projects:
            parts.append("project in (" + ", ".join(f'"{p}"' for p in projects) + ")")
        parts.append(f'labels = "{s.get("base_label", "AWPCA")}"')
        return " AND ".join(parts)

    def _pages(
        self, jql: str, *, page_size: int, validate: bool, dedupe: bool, out: queue.Queue, stop: threading.Event
    ) -> None:
        """Producer: read and map Jira pages ahead of the uploads (a bounded queue: one page in flight
        each way), so a full sync costs max(Jira, hub) per page, not their sum."""
        try:
            sprint_field = self.jira.sprint_field()
            start = 0
            while not stop.is_set():
                page = self.jira.search(jql, start=start, limit=page_size, fields="*all", validate=validate)
                issues = page.get("issues") or []
                keys = [raw["key"] for raw in issues]
                batch = [
                    self.map_issue(raw, sprint_field)
                    for raw in issues
                    if not (dedupe and self.seen.get(raw["key"]) == ((raw.get("fields") or {}).get("updated") or ""))
                ]
                out.put(("page", keys, batch))
                start += len(issues)
                if not issues or start >= int(page.get("total", 0)):
                    break
        except (JiraError, JiraUnavailable) as exc:
            out.put(("error", str(exc), None))
        except Exception as exc:  # noqa: BLE001 - reported as the run's error, never a hung consumer
            log.exception("sync: reading Jira failed")
            out.put(("error", f"{type(exc).__name__}: {exc}", None))
        out.put(("end", None, None))

    def _run(self, kind: str, jql: str, *, dedupe: bool, validate: bool = True) -> dict[str, Any]:
        page_size = max(10, min(500, int(self.settings().get("page_size", 100))))
        run_id = self.hub.sync_run_start(kind)
        counts = {"issues": 0, "comments": 0, "links": 0, "unchanged": 0, "stale": 0, "skipped": 0}
        errors: list[str] = []
        newest: dt.datetime | None = None
        seen_keys: list[str] = []
        pages: queue.Queue = queue.Queue(maxsize=2)
        hub_seconds, started = 0.0, time.perf_counter()
        stop = threading.Event()
        reader = threading.Thread(
            target=self._pages,
            name=f"sync-{kind}",
            daemon=True,
            kwargs={
                "jql": jql,
                "page_size": page_size,
                "validate": validate,
                "dedupe": dedupe,
                "out": pages,
                "stop": stop,
            },
        )
        reader.start()
        try:
            while True:
                what, keys, batch = pages.get()
                if what == "end":
                    break
                if what == "error":
                    errors.append(keys)
                    continue
                seen_keys.extend(keys)
                counts["skipped"] += len(keys) - len(batch)
                if not batch:
                    continue
                t0 = time.perf_counter()
                try:
                    answer = self.hub.upload(run_id, batch)
                except HubRejected as exc:
                    errors.append(f"upload of {len(batch)} issues refused: {exc}")
                    continue
                hub_seconds += time.perf_counter() - t0
                counts["issues"] += int(answer.get("upserted", 0))
                counts["unchanged"] += int(answer.get("unchanged", 0))
                counts["stale"] += int(answer.get("stale", 0))
                counts["comments"] += sum(len(i["comments"]) for i in batch)
                counts["links"] += sum(len(i["links"]) for i in batch)
                for i in batch:
                    if i["updated"]:
                        self.seen[i["key"]] = i["updated"]
                        when = jira_updated(i["updated"])
                        newest = when if newest is None or when > newest else newest
        finally:
            stop.set()
            while reader.is_alive():  # unblock a producer waiting on a full queue (we are stopping)
                try:
                    pages.get_nowait()
                except queue.Empty:
                    reader.join(0.1)
        status = "failed" if errors else "ok"
        self.hub.sync_run_finish(
            run_id,
            status=status,
            counts={k: v for k, v in counts.items() if k in ("issues", "comments", "links", "unchanged", "stale")},
            errors=errors,
        )
        # an incremental run that found nothing is routine: DEBUG, so the sync agent's log stays readable
        level = logging.DEBUG if status == "ok" and kind == "incremental" and not counts.get("issues") else logging.INFO
        log.log(
            level,
            "sync %s: %s %s in %.1f s (%.1f s waiting for hub uploads)",
            kind,
            status,
            counts,
            time.perf_counter() - started,
            hub_seconds,
        )
        return {**counts, "status": status, "errors": errors, "newest": newest, "keys": seen_keys}

    def full(self) -> dict[str, Any]:
        started = dt.datetime.now(dt.UTC)
        out = self._run("full", f"{self._jql_base()} ORDER BY updated ASC", dedupe=False)
        if out["status"] == "ok":
            self._advance(out["newest"], fallback=started)
            self.state.sync_set(last_full=iso(started))
        return out

    def incremental(self) -> dict[str, Any]:
        mark = self.state.sync_get("watermark")
        if mark is None:
            return self.full()
        overlap = dt.timedelta(minutes=int(self.settings().get("sync_overlap_minutes", 2)))
        since = parse_iso(mark) - overlap
        jql = f'{self._jql_base()} AND updated >= "{self._jql_time(since)}" ORDER BY updated ASC'
        out = self._run("incremental", jql, dedupe=True)
        if out["status"] == "ok":
            self._advance(out["newest"], fallback=None)
            self._prune_seen(since)
        return out

    def refresh(self, *, keys: list[str] | None = None, full: bool = False) -> dict[str, Any]:
        if full:
            return self.full()
        keys = sorted({k.upper() for k in keys or []})
        if not keys:
            return {"issues": 0}
        # validateQuery=false: a key deleted in Jira is a warning, not a 400 for the whole query.
        out = self._run("refresh", "key in (" + ", ".join(f'"{k}"' for k in keys) + ")", dedupe=False, validate=False)
        if out["errors"]:
            from syncagent.commands import CommandFailed  # noqa: PLC0415 (commands imports sync)

            raise CommandFailed("; ".join(out["errors"]))
        out["missing"] = [k for k in keys if k not in set(out["keys"])]
        return out

    def _jql_time(self, when: dt.datetime) -> str:
        """JQL dates are read in the Jira user's time zone (``/myself`` ``timeZone``), to the minute."""
        zone: dt.tzinfo = dt.UTC
        name = self.jira.myself().get("timeZone")
        if name:
            try:
                zone = zoneinfo.ZoneInfo(name)
            except Exception:  # noqa: BLE001 - unknown zone name: UTC, the overlap absorbs the rest
                zone = dt.UTC
        return when.astimezone(zone).strftime("%Y-%m-%d %H:%M")

    def _advance(self, newest: dt.datetime | None, *, fallback: dt.datetime | None) -> None:
        current = self.state.sync_get("watermark")
        candidates = [parse_iso(current)] if current else []
        if newest is not None:
            candidates.append(newest)
        elif fallback is not None and not candidates:
            candidates.append(fallback)
        if candidates:
            self.state.sync_set(watermark=iso(max(candidates)))

    def _prune_seen(self, since: dt.datetime) -> None:
        if len(self.seen) < 5000:
            return
        self.seen = {k: v for k, v in self.seen.items() if jira_updated(v) >= since}
