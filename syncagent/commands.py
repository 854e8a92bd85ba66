"""The commands, each idempotent in Jira: read first, change only what differs, verify.

A command may arrive twice (its lease expired while we worked, or ``kill -9`` before the report):
the second run must find Jira already so and change nothing. Results say what changed:
``{"key", "created", "changed": [...], "message"}`` — ``changed`` empty means "already so".
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import logging
import re
import time
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from syncagent.command_types import COMMAND_TYPES
from syncagent.jiraclient import AnswerLost, JiraError, JiraGateway
from syncagent.state import State, iso, parse_iso, utcnow

log = logging.getLogger("syncagent.commands")
PROPERTY = "achilles.hub"
ALREADY = "уже так"  # "already so": nothing to change in Jira
RECOVERY_WINDOW = dt.timedelta(minutes=2)


class CommandFailed(Exception):
    """A command that cannot be done as asked; the message goes to the hub as the error."""


@dataclass
class Claimed:
    id: int
    batch_id: int
    seq: int
    claims: int
    lease_token: str
    lease_expires_at: str | None
    command: dict[str, Any]


def normalise_body(text: str) -> str:
    text = unicodedata.normalize("NFC", text.replace("\r\n", "\n").replace("\r", "\n"))
    return re.sub(r"\s+", " ", text).strip()


def body_hash(text: str) -> str:
    return hashlib.sha256(normalise_body(text).encode()).hexdigest()


def _jql_string(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


# Lucene's English stop words (Jira's text index drops them): a summary of these alone has no text to search.
_STOP_WORDS = frozenset(
    ["a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "if", "in", "into", "is", "it", "no", "not"]
    + ["of", "on", "or", "such", "that", "the", "their", "then", "there", "these", "they", "this", "to", "was"]
    + ["will", "with"]
)
_LUCENE_SPECIAL = re.compile(r'([+\-&|!(){}\[\]^~*?\\:"/])')
_LUCENE_KEYWORD = re.compile(r"\b(AND|OR|NOT)\b")


def text_query(text: str) -> str | None:
    """``text`` as a Lucene query that is valid whatever it holds and finds what holds it: every operator
    character escaped, the keywords AND/OR/NOT made plain terms. ``None`` when nothing would be left to
    search after Jira's analysis (stop words, emoji, punctuation only)."""
    if not any(w not in _STOP_WORDS for w in re.findall(r"\w+", text.casefold())):
        return None
    escaped = _LUCENE_SPECIAL.sub(r"\\\1", " ".join(text.split()))
    return _LUCENE_KEYWORD.sub(lambda m: "\\" + m.group(1), escaped)


def normalise_summary(text: str) -> str:
    """A summary as Jira compares it: NFC, whitespace runs as one space, trimmed."""
    return " ".join(unicodedata.normalize("NFC", text or "").split())


def _jql_time(when: dt.datetime) -> str:
    return when.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M")


# ---- field shapes ---------------------------------------------------------------------------------
def field_current(name: str, value: Any) -> Any:
    """A Jira field value in the command's flat form (priority name, assignee username, …)."""
    if name in ("priority", "issuetype", "status"):
        return (value or {}).get("name") if isinstance(value, dict) else value
    if name == "assignee":
        return (value or {}).get("name") if isinstance(value, dict) else value
    if name == "components":
        return sorted((c or {}).get("name") for c in (value or []))
    if name == "labels":
        return sorted(value or [])
    if name in ("description", "summary"):
        return value or ""
    if isinstance(value, dict) and "value" in value:
        return value["value"]
    if isinstance(value, list) and value and all(isinstance(v, dict) and "value" in v for v in value):
        return [v["value"] for v in value]
    return value


def field_wanted(name: str, value: Any) -> Any:
    if name in ("components", "labels"):
        return sorted(value or [])
    if name in ("description", "summary"):
        return value or ""
    return value


def field_jira(name: str, value: Any) -> Any:
    """The command's flat value in the shape Jira's REST v2 accepts."""
    if name in ("priority", "issuetype"):
        return {"name": value} if value is not None else None
    if name == "assignee":
        return {"name": value}
    if name == "components":
        return [{"name": c} for c in value or []]
    return value


def _show(value: Any) -> str:
    if value in (None, "", []):
        return "∅"
    if isinstance(value, list):
        return ", ".join(map(str, value))
    text = str(value)
    return text if len(text) <= 60 else text[:59] + "…"


class Executor:
    def __init__(
        self,
        jira: JiraGateway,
        state: State,
        settings: Callable[[], dict[str, Any]],
        refresher: Callable[..., dict[str, Any]],
        sleep: Callable[[float], None] = time.sleep,
    ):
        self.jira = jira
        self.state = state
        self.settings = settings
        self.refresher = refresher
        self.sleep = sleep
        self.index_lag_retries = 3

    def execute(self, claimed: Claimed) -> dict[str, Any]:
        """One command → its report entry (``status`` done | failed). Jira errors fail it; the batch goes on."""
        cmd = claimed.command
        kind = cmd.get("type")
        handler = getattr(self, f"_{kind}", None) if kind in COMMAND_TYPES else None
        base = {"command_id": claimed.id, "lease_token": claimed.lease_token}
        if handler is None:
            return {**base, "status": "failed", "error": f"unknown command type {kind!r}"}
        try:
            result = handler(cmd, claimed)
        except JiraError as exc:
            return {**base, "status": "failed", "error": str(exc)}
        except CommandFailed as exc:
            return {**base, "status": "failed", "error": str(exc)}
        return {**base, "status": "done", "result": result}

    # ---- ensure_issue ------------------------------------------------------------------------------
    def _ensure_issue(self, cmd: dict[str, Any], claimed: Claimed) -> dict[str, Any]:
        project, summary = cmd["project"], cmd["summary"]
        marker = self.state.marker("creates", claimed.id)
        suspicious = marker is not None or claimed.claims > 1
        key = self._find_by_identity(project, summary)
        if key is None and suspicious:
            key = self._recover_created(project, claimed, marker, tries=self.index_lag_retries)
            if key is not None:
                return {
                    "key": key,
                    "created": True,
                    "changed": [],
                    "message": f"{key} уже создана этой командой; {ALREADY}",
                }
        if key is not None:
            changed, message = self._apply_fields(key, cmd.get("fields") or {})
            return {
                "key": key,
                "created": False,
                "changed": changed,
                "message": f"{key} уже есть — " + (message or ALREADY),
            }
        return self._create(cmd, claimed)

    def _find_by_identity(self, project: str, summary: str) -> str | None:
        base = self.settings().get("base_label", "AWPCA")
        jql = f"project = {_jql_string(project)} AND labels = {_jql_string(base)}"
        query = text_query(summary)
        if query is not None:  # else: every issue under the label, compared one by one
            jql += f" AND summary ~ {_jql_string(query)}"
        wanted = normalise_summary(summary)
        # Decided by exact comparison, never by the search's ranking: all candidates are read.
        for issue in self.jira.search_all(jql + " ORDER BY key ASC", fields="summary,project", limit=100):
            fields = issue.get("fields") or {}
            same_project = ((fields.get("project") or {}).get("key") or issue["key"].rsplit("-", 1)[0]) == project
            if same_project and normalise_summary(fields.get("summary") or "") == wanted:
                return issue["key"]
        return None

    def _recover_created(
        self, project: str, claimed: Claimed, marker: dict[str, Any] | None, *, tries: int
    ) -> str | None:
        """A create of this very command that Jira did (its answer lost, or we died before reporting)."""
        lease = int(self.settings().get("lease_seconds", 120))
        since = parse_iso(marker["at"]) if marker else utcnow() - dt.timedelta(seconds=lease * claimed.claims)
        jql = (
            f"project = {_jql_string(project)} AND creator = currentUser() AND "
            f"created >= {_jql_string(_jql_time(since - RECOVERY_WINDOW))}"
        )
        for attempt in range(tries):
            for issue in self.jira.search_all(jql, fields="summary", limit=100):
                value = self.jira.issue_property(issue["key"], PROPERTY)
                if isinstance(value, dict) and value.get("command") == claimed.id:
                    return issue["key"]
            if attempt + 1 < tries:
                self.sleep(min(3.0, 1.0 + attempt))  # the search index may not have the issue yet: 1, 2, 3, 3 s
        return None

    def _create(self, cmd: dict[str, Any], claimed: Claimed) -> dict[str, Any]:
        fields = dict(cmd.get("fields") or {})
        jira_fields: dict[str, Any] = {
            "project": {"key": cmd["project"]},
            "summary": cmd["summary"],
            "issuetype": {"name": cmd.get("issue_type") or "Task"},
            "labels": list(cmd.get("labels") or []),
        }
        for name, value in fields.items():
            jira_fields[name] = field_jira(name, value)
        properties = [{"key": PROPERTY, "value": {"command": claimed.id, "batch": claimed.batch_id}}]
        for _attempt in range(2):
            # Written before the create is sent: a crash right after it still knows to look first.
            self.state.set_marker(
                "creates", claimed.id, {"project": cmd["project"], "at": iso(utcnow() - dt.timedelta(seconds=5))}
            )
            marker = self.state.marker("creates", claimed.id)
            try:
                created = self.jira.create_issue(jira_fields, properties)
            except AnswerLost as exc:
                log.warning("create for command %s: answer lost (%s); looking for it in Jira", claimed.id, exc)
                key = self._recover_created(cmd["project"], claimed, marker, tries=self.index_lag_retries + 2)
                if key is None:
                    key = self._find_by_identity(cmd["project"], cmd["summary"])
                if key is not None:
                    return {
                        "key": key,
                        "created": True,
                        "changed": ["created", *sorted(fields)],
                        "message": f"создана {key} (ответ Jira потерян, задача найдена по свойству {PROPERTY})",
                    }
                continue  # verified absent: sending the create again is not blind
            key = created["key"]
            return {"key": key, "created": True, "changed": ["created", *sorted(fields)], "message": f"создана {key}"}
        raise CommandFailed("Jira did not answer the create twice and the issue is not there; try again later")

    # ---- ensure_fields -----------------------------------------------------------------------------
    def _apply_fields(self, key: str, wanted: dict[str, Any]) -> tuple[list[str], str]:
        if not wanted:
            return [], ""
        issue = self.jira.issue(key, fields=",".join(wanted))
        current = issue.get("fields") or {}
        diff: dict[str, Any] = {}
        notes = []
        for name, value in wanted.items():
            before = field_current(name, current.get(name))
            if before != field_wanted(name, value):
                diff[name] = field_jira(name, value)
                notes.append(f"{name}: {_show(before)} → {_show(field_wanted(name, value))}")
        if diff:
            self.jira.edit_issue(key, diff)
        return sorted(diff), "; ".join(notes)

    def _ensure_fields(self, cmd: dict[str, Any], claimed: Claimed) -> dict[str, Any]:
        key = cmd["key"]
        changed, message = self._apply_fields(key, cmd.get("fields") or {})
        return {"key": key, "created": False, "changed": changed, "message": message or ALREADY}

    # ---- ensure_link -------------------------------------------------------------------------------
    def _link_present(self, key: str, link_type: str, direction: str, other: str) -> bool:
        issue = self.jira.issue(key, fields="issuelinks")
        side = "outwardIssue" if direction == "outward" else "inwardIssue"
        for link in (issue.get("fields") or {}).get("issuelinks") or []:
            if (link.get("type") or {}).get("name", "").casefold() == link_type.casefold() and (
                link.get(side) or {}
            ).get("key", "").upper() == other.upper():
                return True
        return False

    def _ensure_link(self, cmd: dict[str, Any], claimed: Claimed) -> dict[str, Any]:
        key, other, direction = cmd["key"], cmd["other_key"], cmd.get("direction", "outward")
        types = {t["name"].casefold(): t["name"] for t in self.jira.link_types()}
        link_type = types.get(cmd["link_type"].casefold())
        if link_type is None:
            raise CommandFailed(
                f"Jira has no link type {cmd['link_type']!r} (known: {', '.join(sorted(types.values()))})"
            )
        verb = f"{key} {link_type} {other}" if direction == "outward" else f"{other} {link_type} {key}"
        # Jira happily stores identical duplicates: read first.
        if self._link_present(key, link_type, direction, other):
            return {"key": key, "created": False, "changed": [], "message": f"связь {verb}: {ALREADY}"}
        source, dest = (key, other) if direction == "outward" else (other, key)
        for _ in range(2):
            try:
                self.jira.create_link(link_type, source, dest)
                break
            except AnswerLost:
                if self._link_present(key, link_type, direction, other):
                    break
        else:
            raise CommandFailed("Jira did not answer the link create twice and the link is not there")
        return {"key": key, "created": False, "changed": ["link"], "message": f"связь {verb} добавлена"}

    # ---- ensure_sprint -----------------------------------------------------------------------------
    def _ensure_sprint(self, cmd: dict[str, Any], claimed: Claimed) -> dict[str, Any]:
        key, wanted = cmd["key"], str(cmd["sprint"]).strip()
        project = key.rsplit("-", 1)[0]
        sprints: dict[int, dict[str, Any]] = {}
        for board in self.jira.boards(project):
            for s in self.jira.board_sprints(board["id"]):
                sprints[int(s["id"])] = s
        target = sprints.get(int(wanted)) if wanted.isdigit() else None
        if target is None:
            named = [s for s in sprints.values() if s["name"] == wanted] or [
                s for s in sprints.values() if s["name"].casefold() == wanted.casefold()
            ]
            open_named = [s for s in named if s.get("state") != "closed"]
            target = (open_named or named or [None])[0]
        if target is None:
            known = ", ".join(s["name"] for s in sprints.values() if s.get("state") != "closed")
            raise CommandFailed(f"no sprint {wanted!r} on the boards of {project} (open: {known or 'none'})")
        current = (self.jira.agile_issue(key).get("fields") or {}).get("sprint")
        if current and int(current["id"]) == int(target["id"]):
            return {"key": key, "created": False, "changed": [], "message": f"спринт «{target['name']}»: {ALREADY}"}
        self.jira.add_to_sprint(int(target["id"]), key)
        after = (self.jira.agile_issue(key).get("fields") or {}).get("sprint")
        if not after or int(after["id"]) != int(target["id"]):
            raise CommandFailed(f"{key} is not in sprint {target['name']!r} after the move")
        before = current["name"] if current else "∅"
        return {"key": key, "created": False, "changed": ["sprint"], "message": f"спринт: {before} → {target['name']}"}

    # ---- ensure_comment ----------------------------------------------------------------------------
    def _ensure_comment(self, cmd: dict[str, Any], claimed: Claimed) -> dict[str, Any]:
        key, body = cmd["key"], cmd["body"]
        me = self.jira.myself().get("name")
        digest = body_hash(body)

        def find() -> str | None:
            ledger = self.state.marker("comments", claimed.id)
            comments = self.jira.comments(key)
            if ledger and ledger.get("comment_id") and any(c["id"] == ledger["comment_id"] for c in comments):
                return ledger["comment_id"]
            for c in comments:
                if (c.get("author") or {}).get("name") == me and body_hash(c.get("body") or "") == digest:
                    return c["id"]
            return None

        found = find()
        if found:
            self.state.set_marker("comments", claimed.id, {"key": key, "comment_id": found, "hash": digest})
            return {
                "key": key,
                "created": False,
                "changed": [],
                "message": f"комментарий уже есть (#{found}); {ALREADY}",
            }
        self.state.set_marker("comments", claimed.id, {"key": key, "comment_id": None, "hash": digest})
        for _ in range(2):
            try:
                comment = self.jira.add_comment(key, body)
                found = comment["id"]
                break
            except AnswerLost:
                found = find()
                if found:
                    break
        else:
            raise CommandFailed("Jira did not answer the comment twice and the comment is not there")
        self.state.set_marker("comments", claimed.id, {"key": key, "comment_id": found, "hash": digest})
        return {"key": key, "created": False, "changed": ["comment"], "message": f"комментарий #{found} добавлен"}

    # ---- ensure_transition -------------------------------------------------------------------------
    def _status(self, key: str) -> dict[str, Any]:
        return (self.jira.issue(key, fields="status").get("fields") or {}).get("status") or {}

    @staticmethod
    def _is(status: dict[str, Any], wanted: str) -> bool:
        return str(status.get("id")) == wanted or (status.get("name") or "").casefold() == wanted.casefold()

    def _ensure_transition(self, cmd: dict[str, Any], claimed: Claimed) -> dict[str, Any]:
        key, wanted = cmd["key"], str(cmd["status"]).strip()
        status = self._status(key)
        if self._is(status, wanted):
            return {"key": key, "created": False, "changed": [], "message": f"статус «{status.get('name')}»: {ALREADY}"}
        options = self.jira.transitions(key)
        chosen = next((t for t in options if self._is(t.get("to") or {}, wanted)), None)
        if chosen is None:
            reachable = ", ".join(sorted({(t.get("to") or {}).get("name", "?") for t in options})) or "none"
            raise CommandFailed(
                f"status {wanted!r} is not reachable from {status.get('name')!r} in one step; reachable: {reachable}"
            )
        with contextlib.suppress(AnswerLost):  # verified below either way
            self.jira.transition(key, str(chosen["id"]))
        after = self._status(key)
        if not self._is(after, wanted):
            raise CommandFailed(
                f"{key} is in {after.get('name')!r} after transition {chosen.get('name')!r}, not {wanted!r}"
            )
        return {
            "key": key,
            "created": False,
            "changed": ["status"],
            "message": f"статус: {status.get('name')} → {after.get('name')}",
        }

    # ---- refresh -------------------------------------------------------------------------------------
    def _refresh(self, cmd: dict[str, Any], claimed: Claimed) -> dict[str, Any]:
        if cmd.get("full"):
            counts = self.refresher(full=True)
            return {
                "key": None,
                "created": False,
                "changed": [],
                "message": f"полная синхронизация: {counts.get('issues', 0)} задач",
            }
        keys = [k for k in cmd.get("keys") or [] if k]
        counts = self.refresher(keys=keys)
        missing = counts.get("missing") or []
        message = f"обновлено задач: {counts.get('issues', 0)}"
        if missing:
            message += f"; нет в Jira: {', '.join(missing)}"
        return {"key": keys[0] if len(keys) == 1 else None, "created": False, "changed": [], "message": message}
