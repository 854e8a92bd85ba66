"""A Confluence Data Center REST v1 client: PAT bearer auth, offset pagination, 429/503 waited out.

Only the calls the connector needs (CONFLUENCE.md § 1). Waits: a 429 or 503 honours ``Retry-After``
(seconds), clamped to ``[MIN_WAIT, MAX_WAIT]`` (a "block all" limit sends ``Long.MAX``); without the
header, exponential backoff from 1 s. One request at a time per client, so a throttled run never
storms. Errors name the call, never the token (httpx puts no header into its messages).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urljoin

import httpx

log = logging.getLogger(__name__)

MIN_WAIT = 1.0
MAX_WAIT = 60.0
MAX_ATTEMPTS = 6
PAGE_LIMIT = 50  # DC caps a page of body.* expansions at 50
ID_PAGE_LIMIT = 500


class ConfluenceError(Exception):
    """A call that failed for good (after the retries a 429/503/connection error gets)."""

    def __init__(self, message: str, *, status: int | None = None):
        super().__init__(message)
        self.status = status


def retry_after_seconds(value: str | None, attempt: int) -> float:
    """The wait before the next attempt: ``Retry-After`` clamped, else 1, 2, 4 … s (also clamped)."""
    if value:
        try:
            seconds = float(value.strip())
        except ValueError:
            seconds = None
        if seconds is not None:
            return min(max(seconds, MIN_WAIT), MAX_WAIT)
    return min(MIN_WAIT * 2**attempt, MAX_WAIT)


@dataclass(frozen=True)
class PageRef:
    """A page id and when it last changed (what the incremental listing needs)."""

    id: str
    when: str


class ConfluenceClient:
    def __init__(
        self,
        base_url: str,
        token: str,
        *,
        timeout: float = 30.0,
        sleep: Callable[[float], None] | None = None,
        max_wait: float = MAX_WAIT,
    ):
        self.base_url = base_url.rstrip("/") + "/"
        self._http = httpx.Client(
            base_url=self.base_url,
            headers={"Authorization": f"Bearer {token}", "Accept": "application/json"},
            timeout=timeout,
            follow_redirects=False,
        )
        self._sleep = sleep or (lambda seconds: time.sleep(seconds))
        self.max_wait = max_wait

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> ConfluenceClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ transport
    def request(
        self, path: str, *, params: dict[str, Any] | None = None, method: str = "GET", json: Any = None
    ) -> httpx.Response:
        """One call, retried on 429/503/connection errors; another non-2xx → ConfluenceError(status)."""
        for attempt in range(MAX_ATTEMPTS):
            try:
                response = self._http.request(method, path.lstrip("/"), params=params, json=json)
            except httpx.TransportError as exc:
                if attempt == MAX_ATTEMPTS - 1:
                    raise ConfluenceError(f"{method} {path}: {type(exc).__name__}") from None
                self._sleep(min(retry_after_seconds(None, attempt), self.max_wait))
                continue
            if response.status_code in (429, 503):
                if attempt == MAX_ATTEMPTS - 1:
                    break
                wait = min(retry_after_seconds(response.headers.get("Retry-After"), attempt), self.max_wait)
                log.info("confluence %s %s: %s, waiting %.1f s", method, path, response.status_code, wait)
                self._sleep(wait)
                continue
            if response.status_code >= 400:
                raise ConfluenceError(f"{method} {path}: HTTP {response.status_code}", status=response.status_code)
            return response
        raise ConfluenceError(f"{method} {path}: still throttled after {MAX_ATTEMPTS} attempts", status=429)

    def get_json(self, path: str, **params: Any) -> Any:
        response = self.request(path, params={k: v for k, v in params.items() if v is not None})
        try:
            return response.json()
        except ValueError:
            raise ConfluenceError(f"GET {path}: not JSON", status=response.status_code) from None

    def paged(
        self, path: str, *, start: int = 0, limit: int = PAGE_LIMIT, **params: Any
    ) -> Iterator[tuple[int, list[dict]]]:
        """``(next_start, results)`` per page; our own offset arithmetic (DC's ``next`` miscounts on
        capped pages), ending at a short or empty page."""
        while True:
            body = self.get_json(path, start=start, limit=limit, **params)
            results = body.get("results", [])
            start += len(results)
            yield start, results
            if not results or "next" not in body.get("_links", {}):
                return

    # ------------------------------------------------------------------ calls
    def search(self, cql: str, *, start: int = 0, limit: int = PAGE_LIMIT, expand: str | None = None):
        return self.paged("rest/api/content/search", cql=cql, start=start, limit=limit, expand=expand)

    def page(self, page_id: str, *, expand: str) -> dict:
        return self.get_json(f"rest/api/content/{page_id}", expand=expand)

    def attachments(self, page_id: str) -> list[dict]:
        found: list[dict] = []
        for _, results in self.paged(f"rest/api/content/{page_id}/child/attachment", expand="version"):
            found.extend(results)
        return found

    def download(self, link: str) -> bytes:
        return self.request(urljoin(self.base_url, link.lstrip("/"))).content

    def read_restriction(self, page_id: str) -> dict | None:
        """The page's own view restriction (``{"user": [...], "group": [...]}``), None on 404."""
        try:
            body = self.get_json(
                f"rest/api/content/{page_id}/restriction/byOperation/read",
                expand="restrictions.user,restrictions.group",
            )
        except ConfluenceError as exc:
            if exc.status == 404:
                return None
            raise
        restrictions = body.get("restrictions", {})
        return {
            "user": list(restrictions.get("user", {}).get("results", [])),
            "group": [g.get("name", "") for g in restrictions.get("group", {}).get("results", [])],
        }

    def space_permissions(self, space_key: str) -> dict:
        """Who may view the space: ``{"users": [user dicts], "groups": [names], "anonymous": bool}``
        (REST of DC 9.1+; before 9.1 that route is a 404 and the JSON-RPC API answers)."""
        try:
            items = self.get_json(f"rest/api/space/{space_key}/permissions")
        except ConfluenceError as exc:
            if exc.status != 404:
                raise
            return self.space_permissions_rpc(space_key)
        users: list[dict] = []
        groups: list[str] = []
        for item in items if isinstance(items, list) else items.get("results", []):
            if item.get("operation", {}).get("operationKey") != "read":
                continue
            subject = item.get("subject", {})
            if subject.get("type") == "group":
                groups.append(subject.get("name", ""))
            elif subject.get("type") == "user":
                users.append(subject)
        anonymous = False
        try:
            anon = self.get_json(f"rest/api/space/{space_key}/permissions/anonymous")
            rows = anon if isinstance(anon, list) else anon.get("results", [])
            anonymous = any(r.get("operation", {}).get("operationKey") == "read" for r in rows)
        except ConfluenceError as exc:
            if exc.status != 404:
                raise
        return {"users": users, "groups": groups, "anonymous": anonymous}

    def page_id_by_title(self, space_key: str, title: str) -> str | None:
        """The id of the current page titled ``title`` in the space (titles are unique per space)."""
        body = self.get_json("rest/api/content", type="page", spaceKey=space_key, title=title, limit=1)
        results = body.get("results", [])
        return str(results[0]["id"]) if results else None

    def space_permissions_rpc(self, space_key: str) -> dict:
        """The space's VIEWSPACE holders through JSON-RPC ``getSpacePermissionSets`` (DC before 9.1,
        Remote API on; space admins only). An entry without user and group is anonymous access."""
        response = self.request(
            "rpc/json-rpc/confluenceservice-v2",
            method="POST",
            json={"jsonrpc": "2.0", "method": "getSpacePermissionSets", "params": [space_key], "id": 1},
        )
        try:
            body = response.json()
        except ValueError:
            raise ConfluenceError(
                "POST json-rpc getSpacePermissionSets: not JSON", status=response.status_code
            ) from None
        if not isinstance(body, dict) or "error" in body or not isinstance(body.get("result"), list):
            message = (body.get("error") or {}).get("message", "no result") if isinstance(body, dict) else "no result"
            raise ConfluenceError(f"json-rpc getSpacePermissionSets {space_key}: {message}"[:300])
        users: list[dict] = []
        groups: list[str] = []
        anonymous = False
        for permission_set in body["result"]:
            if permission_set.get("type") != "VIEWSPACE":
                continue
            for entry in permission_set.get("spacePermissions", []):
                if entry.get("groupName"):
                    groups.append(entry["groupName"])
                elif entry.get("userName"):
                    users.append({"username": entry["userName"]})
                else:
                    anonymous = True
        return {"users": users, "groups": groups, "anonymous": anonymous}

    def current_user(self) -> dict:
        return self.get_json("rest/api/user/current")

    def user(self, *, key: str | None = None, username: str | None = None) -> dict | None:
        try:
            return self.get_json("rest/api/user", key=key, username=username)
        except ConfluenceError as exc:
            if exc.status == 404:
                return None
            raise
