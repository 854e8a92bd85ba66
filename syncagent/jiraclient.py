"""Jira through ``atlassian-python-api`` with its own retries off and ONE retry loop here.

- 429: count it (reported to the hub as ``rate_limited``), sleep ``max(1, Retry-After)`` — seconds
  or an HTTP date; Jira DC sends ``Retry-After: 0`` while tokens remain and a loop that obeys 0
  storms — and try again, at most ``max_attempts`` times. A 429 means Jira did not do the request,
  so even a create may be sent again after one.
- 5xx and network errors: back off with jitter and retry — except for an *unsafe* write (create,
  comment, link, transition): there we cannot know whether Jira did it, so we raise ``AnswerLost``
  and the command re-reads Jira before deciding anything. Nothing is ever re-sent blindly.
- 400/401/403/404/409…: ``JiraError`` with Jira's own message.
"""

from __future__ import annotations

import datetime as dt
import email.utils
import logging
import random
import time
from collections.abc import Callable
from typing import Any

import requests
from atlassian import Jira

from syncagent.state import iso, utcnow

log = logging.getLogger("syncagent.jira")


class JiraError(Exception):
    """Jira refused: 4xx with its message (the command fails with it)."""

    def __init__(self, status: int, message: str):
        super().__init__(f"Jira {status}: {message}")
        self.status = status
        self.message = message


class JiraRateLimited(JiraError):
    """Still 429 after the capped number of attempts."""


class JiraUnavailable(Exception):
    """Network errors or 5xx after every retry: try again later, nothing was decided."""


class AnswerLost(Exception):
    """An unsafe write was sent and no answer came back: Jira may or may not have done it."""


def retry_after_seconds(value: str | None, *, now: dt.datetime | None = None) -> float | None:
    """``Retry-After`` as seconds (delta-seconds or HTTP date); None when absent or unreadable."""
    if value is None or not str(value).strip():
        return None
    value = str(value).strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    return max(0.0, (when - (now or utcnow())).total_seconds())


def _message(exc: requests.HTTPError) -> str:
    """Jira's own words: its ``errorMessages`` and each ``errors`` entry as ``field: message`` (field
    names kept), or a non-JSON body's text verbatim (a proxy's page, «XSRF check failed»)."""
    resp = exc.response
    if resp is not None:
        try:
            body = resp.json()
        except ValueError:
            body = None
        if isinstance(body, dict) and ("errorMessages" in body or "errors" in body):
            parts = [str(m) for m in body.get("errorMessages") or [] if m]
            errors = body.get("errors") or {}
            if isinstance(errors, dict):
                parts += [f"{field}: {message}" for field, message in errors.items()]
            if parts:
                return "; ".join(parts)[:1000]
        elif body is None and (resp.text or "").strip():
            return resp.text.strip()[:500]
    text = str(exc) or ""
    if (not text or text == "Unknown error") and resp is not None:
        text = (resp.text or resp.reason or "")[:500]
    return text.strip()


class JiraGateway:
    """Every Jira call of the sync agent goes through ``call``; the rest are thin named helpers."""

    def __init__(
        self,
        url: str,
        token: str,
        *,
        max_attempts: int = 8,
        timeout: float = 30.0,
        verify_ssl: bool = True,
        on_rate_limited: Callable[[dict[str, Any]], None] | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ):
        self.jira = Jira(
            url=url,
            token=token,
            retry_with_header=False,
            backoff_and_retry=False,
            timeout=int(max(1, timeout)),
            verify_ssl=verify_ssl,
        )
        self.max_attempts = max(1, max_attempts)
        self.on_rate_limited = on_rate_limited or (lambda event: None)
        self.sleep = sleep
        self.rate_limited_total = 0
        self._sprint_field: str | None = None
        self._me: dict[str, Any] | None = None

    def call(self, path: str, fn: Callable[..., Any], *args: Any, unsafe: bool = False, **kwargs: Any) -> Any:
        attempt = 0
        while True:
            attempt += 1
            try:
                return fn(*args, **kwargs)
            except requests.HTTPError as exc:
                resp = exc.response
                status = resp.status_code if resp is not None else 0
                if status == 429:
                    header = resp.headers.get("Retry-After")
                    wait = retry_after_seconds(header)
                    self.rate_limited_total += 1
                    self.on_rate_limited(
                        {"at": iso(utcnow()), "retry_after_seconds": wait if wait is not None else 0, "path": path}
                    )
                    if attempt >= self.max_attempts:
                        raise JiraRateLimited(
                            429, f"rate limited {attempt} times in a row on {path}; gave up"
                        ) from None
                    delay = max(1.0, wait) if wait is not None else min(60.0, 2.0**attempt)
                    log.warning("Jira 429 on %s (Retry-After: %s): waiting %.1f s", path, header, delay)
                    self.sleep(delay)
                    continue
                if status >= 500 or status == 0:
                    if unsafe:
                        raise AnswerLost(f"Jira {status} on {path}") from None
                    self._backoff(attempt, path, f"Jira {status}")
                    continue
                raise JiraError(status, _message(exc)) from None
            except (requests.ConnectionError, requests.Timeout) as exc:
                if unsafe:
                    raise AnswerLost(f"{type(exc).__name__} on {path}") from None
                self._backoff(attempt, path, type(exc).__name__)

    def _backoff(self, attempt: int, path: str, what: str) -> None:
        if attempt >= self.max_attempts:
            raise JiraUnavailable(f"{what} on {path} after {attempt} attempts")
        delay = min(30.0, 0.5 * 2 ** (attempt - 1)) * (0.5 + random.random())
        log.warning("%s on %s: retrying in %.1f s", what, path, delay)
        self.sleep(delay)

    # ---- reads ----------------------------------------------------------------------------------
    def myself(self) -> dict[str, Any]:
        if self._me is None:
            self._me = self.call("/rest/api/2/myself", self.jira.myself)
        return self._me

    def sprint_field(self) -> str | None:
        """The Sprint custom field's id, discovered from ``/field`` (ids differ per instance)."""
        if self._sprint_field is None:
            for f in self.call("/rest/api/2/field", self.jira.get_all_fields) or []:
                if (f.get("schema") or {}).get("custom") == "com.pyxis.greenhopper.jira:gh-sprint":
                    self._sprint_field = f["id"]
                    break
            else:
                self._sprint_field = ""
        return self._sprint_field or None

    def search(
        self,
        jql: str,
        *,
        start: int = 0,
        limit: int = 100,
        fields: str = "*all",
        expand: str | None = None,
        validate: bool = True,
    ) -> dict[str, Any]:
        return self.call(
            "/rest/api/2/search",
            self.jira.jql,
            jql,
            fields=fields,
            start=start,
            limit=limit,
            expand=expand,
            validate_query=None if validate else "false",
        )

    def search_all(self, jql: str, *, limit: int = 100, fields: str = "*all") -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        start = 0
        while True:
            page = self.search(jql, start=start, limit=limit, fields=fields)
            issues = page.get("issues") or []
            out.extend(issues)
            start += len(issues)
            if not issues or start >= int(page.get("total", 0)):
                return out

    def issue(self, key: str, *, fields: str | None = None, expand: str | None = None) -> dict[str, Any]:
        return self.call(
            f"/rest/api/2/issue/{key}", self.jira.get_issue, key, fields=fields, expand=expand, update_history=False
        )

    def issue_property(self, key: str, prop: str) -> Any:
        try:
            return (
                self.call(f"/rest/api/2/issue/{key}/properties/{prop}", self.jira.get_issue_property, key, prop) or {}
            ).get("value")
        except JiraError as exc:
            if exc.status == 404:
                return None
            raise

    def comments(self, key: str) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        url = self.jira.resource_url(f"issue/{key}/comment")
        while True:
            page = (
                self.call(
                    f"/rest/api/2/issue/{key}/comment",
                    self.jira.get,
                    url,
                    params={"startAt": len(out), "maxResults": 1000},
                )
                or {}
            )
            got = page.get("comments") or []
            out.extend(got)
            if not got or len(out) >= int(page.get("total", 0)):
                return out

    def transitions(self, key: str) -> list[dict[str, Any]]:
        url = self.jira.resource_url(f"issue/{key}/transitions")
        return (self.call(f"/rest/api/2/issue/{key}/transitions", self.jira.get, url) or {}).get("transitions") or []

    def link_types(self) -> list[dict[str, Any]]:
        return self.call("/rest/api/2/issueLinkType", self.jira.get_issue_link_types) or []

    def boards(self, project: str) -> list[dict[str, Any]]:
        return (self.call("/rest/agile/1.0/board", self.jira.get_all_agile_boards, project_key=project) or {}).get(
            "values"
        ) or []

    def board_sprints(self, board_id: int) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        while True:
            page = (
                self.call(
                    f"/rest/agile/1.0/board/{board_id}/sprint",
                    self.jira.get_all_sprints_from_board,
                    board_id,
                    start=len(out),
                    limit=50,
                )
                or {}
            )
            out.extend(page.get("values") or [])
            if page.get("isLast", True) or not page.get("values"):
                return out

    def agile_issue(self, key: str) -> dict[str, Any]:
        return (
            self.call(
                f"/rest/agile/1.0/issue/{key}",
                self.jira.get,
                f"rest/agile/1.0/issue/{key}",
                params={"fields": "sprint,closedSprints"},
            )
            or {}
        )

    # ---- writes ---------------------------------------------------------------------------------
    def create_issue(self, fields: dict[str, Any], properties: list[dict[str, Any]]) -> dict[str, Any]:
        # `create_issue` of the library cannot carry `properties`; its plain `post` can (same session, same loop).
        return self.call(
            "/rest/api/2/issue",
            self.jira.post,
            self.jira.resource_url("issue"),
            data={"fields": fields, "properties": properties},
            unsafe=True,
        )

    def edit_issue(self, key: str, fields: dict[str, Any]) -> None:
        # PUT is idempotent: safe to retry on 5xx.
        self.call(f"/rest/api/2/issue/{key}", self.jira.update_issue_field, key, fields)

    def add_comment(self, key: str, body: str) -> dict[str, Any]:
        return self.call(f"/rest/api/2/issue/{key}/comment", self.jira.issue_add_comment, key, body, unsafe=True)

    def create_link(self, link_type: str, source: str, dest: str) -> None:
        # Jira's naming: the link reads "inwardIssue <outward verb> outwardIssue" (source blocks dest).
        self.call(
            "/rest/api/2/issueLink",
            self.jira.create_issue_link,
            {"type": {"name": link_type}, "inwardIssue": {"key": source}, "outwardIssue": {"key": dest}},
            unsafe=True,
        )

    def transition(self, key: str, transition_id: str) -> None:
        self.call(
            f"/rest/api/2/issue/{key}/transitions",
            self.jira.set_issue_status_by_transition_id,
            key,
            transition_id,
            unsafe=True,
        )

    def add_to_sprint(self, sprint_id: int, key: str) -> None:
        # Moving into the sprint it is already in changes nothing: safe to retry.
        self.call(f"/rest/agile/1.0/sprint/{sprint_id}/issue", self.jira.add_issues_to_sprint, sprint_id, [key])
