"""The emulator's state: one Confluence Server/Data Center instance in memory, and its REST shapes.

Everything a client can observe lives here behind one lock: users (with user keys, groups, personal
access tokens), spaces with their permissions, pages in trees with versions, read and update
restrictions, attachments with versions, the trash, a clock for ``lastmodified``, fault rules and the
request log. Every answer is computed for the calling user with Confluence's view rule: the space's
VIEWSPACE (for the user, one of their groups, or anonymous when the site allows it) AND the page's
own read restriction AND every ancestor's; an empty restriction list inherits (restricts nothing).
Edit restrictions do not restrict viewing and are not inherited. Site and space administrators do
not bypass view restrictions.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import itertools
import json
import re
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import quote, urlencode

from emulators.confluence import cql as cqlmod

MSK = dt.timezone(dt.timedelta(hours=3), "MSK")
ADMIN_GROUP = "confluence-administrators"
USERS_GROUP = "confluence-users"
RESTRICTION_LIST_LIMIT = 200
# The silent caps DC applies to `limit` (confluence.atlassian.com/confkb/…-1032258424.html).
CAP_BODY, CAP_EXPAND, CAP_NONE = 50, 200, 1000
# An expansion not in this tree is ignored, as DC ignores it (the property stays in `_expandable`).
CONTENT_EXPANDS = {
    "body": {"storage": {}},
    "version": {},
    "ancestors": {},
    "space": {},
    "history": {"lastUpdated": {}},
    "children": {"page": {}, "attachment": {}},
    "container": {},
    "restrictions": {
        "read": {"restrictions": {"user": {}, "group": {}}},
        "update": {"restrictions": {"user": {}, "group": {}}},
    },
}


class ConfluenceHttpError(Exception):
    """An answer Confluence gives as an error, in its `statusCode` / `data` / `message` / `reason` body."""

    REASONS = {
        400: "Bad Request",
        401: "Unauthorized",
        403: "Forbidden",
        404: "Not Found",
        405: "Method Not Allowed",
        409: "Conflict",
        429: "Too Many Requests",
        500: "Internal Server Error",
        503: "Service Unavailable",
    }

    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None):
        super().__init__(f"{status}: {message}")
        self.status = status
        self.message = message
        self.headers = headers or {}

    @property
    def body(self) -> dict[str, Any]:
        return error_body(self.status, self.message)


def error_body(status: int, message: str) -> dict[str, Any]:
    return {
        "statusCode": status,
        "data": {"authorized": False, "valid": True, "errors": [], "successful": False},
        "message": message,
        "reason": ConfluenceHttpError.REASONS.get(status, "Error"),
    }


def not_found(content_id: str) -> ConfluenceHttpError:
    return ConfluenceHttpError(404, f"No content found with id: ContentId{{id={content_id}}}")


def parse_expand(expand: str | None) -> dict[str, Any]:
    tree: dict[str, Any] = {}
    for item in (expand or "").split(","):
        node = tree
        for part in item.strip().split("."):
            if part:
                node = node.setdefault(part, {})
    return tree


def _known(tree: dict[str, Any], allowed: dict[str, Any]) -> dict[str, Any]:
    return {k: _known(v, allowed[k]) for k, v in tree.items() if k in allowed}


def limit_cap(expand: dict[str, Any]) -> int:
    if "body" in expand:
        return CAP_BODY
    return CAP_EXPAND if expand else CAP_NONE


def dc_time(when: dt.datetime, tz: dt.tzinfo) -> str:
    local = when.astimezone(tz)
    offset = local.strftime("%z")
    return local.strftime("%Y-%m-%dT%H:%M:%S.") + f"{local.microsecond // 1000:03d}{offset[:3]}:{offset[3:]}"


def _sort_key(field: str) -> Callable[[tuple[dict[str, Any], str]], Any]:
    if field == "id":
        return lambda row: int(row[0]["id"])
    return lambda row: row[0][field]


class Faults:
    """Fault rules, consumed in order; thread-safe.

    A rule: ``{"kind": "429" | "503" | "error" | "drop" | "drop_answer" | "latency", "method": "GET",
    "path": "<regex on the path after the context>", "times": 1 (≤ 0 = forever), "retry_after": "2",
    "status": 500, "message": "…", "seconds": 0.5}``. ``drop`` closes the connection without
    answering; ``drop_answer`` performs the request, then closes without answering; ``latency``
    delays and lets the request through; the others answer instead of the request.
    """

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.rules: list[dict[str, Any]] = []

    def add(self, *rules: dict[str, Any]) -> None:
        with self.lock:
            for r in rules:
                rule = dict(r)
                rule["kind"] = str(rule["kind"])
                rule.setdefault("times", 1)
                rule["left"] = rule["times"] if rule["times"] > 0 else None
                rule["hits"] = 0
                self.rules.append(rule)

    def clear(self) -> None:
        with self.lock:
            self.rules.clear()

    def take(self, method: str, path: str) -> tuple[float, dict[str, Any] | None]:
        latency = 0.0
        answer = None
        with self.lock:
            for rule in self.rules:
                if rule["left"] == 0:
                    continue
                if rule.get("method") and rule["method"].upper() != method:
                    continue
                if rule.get("path") and not re.search(rule["path"], path):
                    continue
                if rule["kind"] == "latency":
                    latency += float(rule.get("seconds", 0.2))
                elif answer is None:
                    answer = rule
                else:
                    continue
                rule["hits"] += 1
                if rule["left"] is not None:
                    rule["left"] -= 1
        return latency, answer

    def listing(self) -> list[dict[str, Any]]:
        with self.lock:
            return [dict(r) for r in self.rules]


class RateLimit:
    """DC's per-user token bucket: `capacity` requests, `fill_rate` tokens every `interval` seconds."""

    def __init__(self, capacity: int, fill_rate: int, interval: float, clock: Callable[[], float] = time.monotonic):
        self.capacity, self.fill_rate, self.interval = capacity, fill_rate, interval
        self.clock = clock
        self.buckets: dict[str, tuple[float, float]] = {}
        self.lock = threading.Lock()

    def take(self, who: str) -> tuple[bool, dict[str, str]]:
        now = self.clock()
        with self.lock:
            tokens, last = self.buckets.get(who, (float(self.capacity), now))
            tokens = min(float(self.capacity), tokens + (now - last) / self.interval * self.fill_rate)
            ok = tokens >= 1
            if ok:
                tokens -= 1
            self.buckets[who] = (tokens, now)
        headers = {
            "X-RateLimit-Limit": str(self.capacity),
            "X-RateLimit-Remaining": str(int(tokens)),
            "X-RateLimit-Interval-Seconds": str(
                int(self.interval) if self.interval == int(self.interval) else self.interval
            ),
            "X-RateLimit-FillRate": str(self.fill_rate),
        }
        if not ok:
            wait = (1 - tokens) / self.fill_rate * self.interval
            headers["Retry-After"] = str(max(1, int(wait + 0.999)))
        return ok, headers


class ConfluenceStore:
    """One Confluence instance. Mutators are for tests and the demo; ``api_*`` methods answer REST."""

    def __init__(
        self,
        *,
        context_path: str = "/confluence",
        version: str = "9.2.0",
        timezone: dt.tzinfo = MSK,
        anonymous_access: bool = False,
        remote_api: bool = True,
    ):
        self.lock = threading.RLock()
        self.context_path = "/" + context_path.strip("/") if context_path.strip("/") else ""
        self.version = version
        self.tz = timezone
        self.anonymous_access = anonymous_access  # the global "Can use" for anonymous users
        self.remote_api = remote_api  # JSON-RPC / XML-RPC on (Remote API setting)
        self.host_url = "http://127.0.0.1"  # scheme://host:port, set by serve()
        self.users: dict[str, dict[str, Any]] = {}
        self.keys: dict[str, str] = {}  # user key → username
        self.groups: dict[str, set[str]] = {USERS_GROUP: set(), ADMIN_GROUP: set()}
        self.tokens: dict[str, str] = {}
        self.spaces: dict[str, dict[str, Any]] = {}
        self.content: dict[str, dict[str, Any]] = {}  # pages by id and attachments by "att<id>"
        self._ids = itertools.count(65537)
        self._titles: dict[tuple[str, str], list[str]] = {}  # (space, title) → ids of pages that had it
        self._now: dt.datetime | None = None
        self.clock: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC)
        self.faults = Faults()
        self.rate_limit: RateLimit | None = None
        self.quirks: set[str] = set()  # "next_on_full_page": DC's `next` on a full last page
        self.log_lock = threading.Lock()
        self.request_log: list[dict[str, Any]] = []
        self._seq = 0

    # ---- clock, log ------------------------------------------------------------------------------
    @property
    def base(self) -> str:
        """The base URL clients use (scheme://host:port + context path) = `_links.base`."""
        return self.host_url + self.context_path

    def set_now(self, when: dt.datetime | None) -> None:
        """Fix the clock (aware datetime; naive = server time zone); ``None`` = real time again."""
        if when is not None and when.tzinfo is None:
            when = when.replace(tzinfo=self.tz)
        self._now = when

    def advance(self, **delta: float) -> dt.datetime:
        self._now = self.now() + dt.timedelta(**delta)
        return self._now

    def now(self) -> dt.datetime:
        return self._now if self._now is not None else self.clock()

    def record(self, method: str, path: str, query: dict[str, str], status: int, user: str | None) -> None:
        with self.log_lock:
            self._seq += 1
            self.request_log.append(
                {
                    "seq": self._seq,
                    "at": time.time(),
                    "method": method,
                    "path": path,
                    "query": query,
                    "status": status,
                    "user": user,
                }
            )
            if len(self.request_log) > 50000:
                del self.request_log[:10000]

    def requests(self, since: int = 0, *, path: str | None = None) -> list[dict[str, Any]]:
        """The request log after `since` (sequence number), optionally those whose path matches a regex."""
        with self.log_lock:
            return [e for e in self.request_log if e["seq"] > since and (path is None or re.search(path, e["path"]))]

    @property
    def last_seq(self) -> int:
        with self.log_lock:
            return self._seq

    def set_rate_limit(self, capacity: int | None, fill_rate: int = 1, interval: float = 1.0) -> None:
        """A token bucket per user (``None`` = off): 429 with Retry-After when empty."""
        self.rate_limit = None if capacity is None else RateLimit(capacity, fill_rate, interval)

    def server_version(self) -> tuple[int, ...]:
        return tuple(int(p) for p in re.findall(r"\d+", self.version)[:3])

    # ---- users, groups, tokens ---------------------------------------------------------------------
    def add_user(
        self,
        username: str,
        *,
        email: str | None = None,
        display_name: str | None = None,
        groups: Iterable[str] = (),
        password: str | None = None,
    ) -> str:
        """Create a user (member of confluence-users and `groups`); returns their user key."""
        with self.lock:
            if username in self.users:
                raise ValueError(f"user {username} exists")
            key = hashlib.md5(f"userkey:{username}".encode()).hexdigest()  # noqa: S324 - an id, not a secret
            self.users[username] = {
                "username": username,
                "key": key,
                "email": email or f"{username}@example.com",
                "display_name": display_name or username,
                "password": password,
            }
            self.keys[key] = username
            self.groups[USERS_GROUP].add(username)
            for g in groups:
                self.add_to_group(username, g)
            return key

    def add_group(self, name: str) -> None:
        with self.lock:
            self.groups.setdefault(name, set())

    def add_to_group(self, username: str, group: str) -> None:
        with self.lock:
            self._user(username)
            self.groups.setdefault(group, set()).add(username)

    def remove_from_group(self, username: str, group: str) -> None:
        with self.lock:
            self.groups.get(group, set()).discard(username)

    def add_token(self, token: str, username: str) -> None:
        with self.lock:
            self._user(username)
            self.tokens[token] = username

    def groups_of(self, username: str | None) -> set[str]:
        if username is None:
            return set()
        with self.lock:
            return {g for g, members in self.groups.items() if username in members}

    def is_site_admin(self, username: str | None) -> bool:
        return username is not None and ADMIN_GROUP in self.groups_of(username)

    def _user(self, username: str) -> dict[str, Any]:
        try:
            return self.users[username]
        except KeyError:
            raise ValueError(f"no user {username}") from None

    def check_password(self, username: str, password: str) -> bool:
        with self.lock:
            u = self.users.get(username)
            return bool(u and u["password"] is not None and u["password"] == password)

    # ---- spaces ----------------------------------------------------------------------------------
    def add_space(self, key: str, name: str, permissions: dict[str, Any] | None = None) -> None:
        """Permissions: ``{"users": [...], "groups": [...], "anonymous": False, "admins": [...]}`` —
        VIEWSPACE for those users / groups / anonymous users; `admins` (usernames) administer the space
        (and, with every viewer, may edit pages and set restrictions)."""
        with self.lock:
            if key in self.spaces:
                raise ValueError(f"space {key} exists")
            self.spaces[key] = {"id": next(self._ids), "key": key, "name": name, "homepage": None, "perms": {}}
            self.set_space_permissions(key, permissions)

    def set_space_permissions(
        self,
        key: str,
        permissions: dict[str, Any] | None = None,
        *,
        users: Iterable[str] | None = None,
        groups: Iterable[str] | None = None,
        anonymous: bool | None = None,
        admins: Iterable[str] | None = None,
    ) -> None:
        """Replace the space's permissions: a dict as `add_space` takes it, or keywords (they win)."""
        given = dict(permissions or {})
        for name, value in (("users", users), ("groups", groups), ("anonymous", anonymous), ("admins", admins)):
            if value is not None:
                given[name] = value
        unknown = set(given) - {"users", "groups", "anonymous", "admins"}
        if unknown:
            raise ValueError(f"unknown space permission keys: {sorted(unknown)}")
        with self.lock:
            space = self._space(key)
            space["perms"] = {
                "users": set(given.get("users") or ()),
                "groups": set(given.get("groups") or ()),
                "anonymous": bool(given.get("anonymous", False)),
                "admins": set(given.get("admins") or ()),
            }

    def _space(self, key: str) -> dict[str, Any]:
        try:
            return self.spaces[key]
        except KeyError:
            raise ValueError(f"no space {key}") from None

    def can_view_space(self, user: str | None, key: str) -> bool:
        with self.lock:
            perms = self.spaces[key]["perms"]
            if perms["anonymous"] and self.anonymous_access:
                return True  # the anonymous permission covers logged-in users too
            if user is None:
                return False
            return user in perms["users"] or bool(self.groups_of(user) & perms["groups"]) or user in perms["admins"]

    def is_space_admin(self, user: str | None, key: str) -> bool:
        return user is not None and (self.is_site_admin(user) or user in self.spaces[key]["perms"]["admins"])

    # ---- pages -----------------------------------------------------------------------------------
    def add_page(
        self,
        space_key: str,
        title: str,
        body_storage: str = "",
        parent_id: str | None = None,
        author: str | None = None,
    ) -> str:
        with self.lock:
            space = self._space(space_key)
            if self._title_taken(space_key, title):
                raise ValueError(f"a page with this title already exists in {space_key}: {title}")
            if parent_id is not None:
                parent = self._page(parent_id)
                if parent["space"] != space_key:
                    raise ValueError("the parent is in another space")
            if author is not None:
                self._user(author)
            page_id = str(next(self._ids))
            now = self.now()
            self.content[page_id] = {
                "id": page_id,
                "type": "page",
                "space": space_key,
                "parent": parent_id,
                "children": [],
                "attachments": [],
                "status": "current",
                "created": now,
                "created_by": author,
                "versions": [{"number": 1, "when": now, "by": author, "title": title, "body": body_storage}],
                "read": {"users": set(), "groups": set()},
                "update": {"users": set(), "groups": set()},
            }
            self._title_note(space_key, title, page_id)
            if parent_id is not None:
                self.content[parent_id]["children"].append(page_id)
            elif space["homepage"] is None:
                space["homepage"] = page_id
            return page_id

    def _title_taken(self, space_key: str, title: str) -> bool:
        # Titles are indexed by the pages' latest versions (a scan per new page made building a
        # 10 000-page site quadratic); an entry whose page was renamed or trashed is re-checked.
        for page_id in self._titles.get((space_key, title), []):
            c = self.content[page_id]
            if c["status"] == "current" and c["versions"][-1]["title"] == title:
                return True
        return False

    def _title_note(self, space_key: str, title: str, page_id: str) -> None:
        self._titles.setdefault((space_key, title), []).append(page_id)

    def _page(self, page_id: str) -> dict[str, Any]:
        c = self.content.get(str(page_id))
        if c is None or c["type"] != "page":
            raise ValueError(f"no page {page_id}")
        return c

    def update_page(
        self, page_id: str, title: str | None = None, body: str | None = None, author: str | None = None
    ) -> int:
        """A new version (bumps `version.number` and `lastmodified`); returns the version number."""
        with self.lock:
            page = self._page(page_id)
            last = page["versions"][-1]
            number = last["number"] + 1
            if title is not None and title != last["title"]:
                self._title_note(page["space"], title, page_id)
            page["versions"].append(
                {
                    "number": number,
                    "when": self.now(),
                    "by": author if author is not None else last["by"],
                    "title": last["title"] if title is None else title,
                    "body": last["body"] if body is None else body,
                }
            )
            return number

    def move_page(self, page_id: str, new_parent_id: str | None) -> None:
        """Move under another page of the same space (or to the top); a move is no new version."""
        with self.lock:
            page = self._page(page_id)
            if new_parent_id is not None:
                new_parent = self._page(new_parent_id)
                if new_parent["space"] != page["space"]:
                    raise ValueError("cannot move to another space")
                if new_parent_id == page_id or page_id in self.ancestor_ids(new_parent_id):
                    raise ValueError("cannot move a page under itself")
            if page["parent"] is not None:
                self.content[page["parent"]]["children"].remove(page_id)
            page["parent"] = new_parent_id
            if new_parent_id is not None:
                self.content[new_parent_id]["children"].append(page_id)

    def delete_page(self, page_id: str) -> None:
        """To the trash (status ``trashed``); its children move up to its parent, as Confluence does."""
        with self.lock:
            page = self._page(page_id)
            if page["status"] == "trashed":
                return
            page["status"] = "trashed"
            parent = page["parent"]
            siblings = self.content[parent]["children"] if parent is not None else None
            for child_id in list(page["children"]):
                self.content[child_id]["parent"] = parent
                if siblings is not None:
                    siblings.append(child_id)
            page["children"] = []
            if siblings is not None:
                siblings.remove(page_id)
            page["parent"] = None
            page["trashed_from"] = parent

    def set_read_restriction(self, page_id: str, users: Iterable[str] = (), groups: Iterable[str] = ()) -> None:
        """Replace the page's view restriction (empty = none). Does not touch `lastmodified`."""
        self._restrict(page_id, "read", users, groups)

    def set_update_restriction(self, page_id: str, users: Iterable[str] = (), groups: Iterable[str] = ()) -> None:
        self._restrict(page_id, "update", users, groups)

    def _restrict(self, page_id: str, op: str, users: Iterable[str], groups: Iterable[str]) -> None:
        with self.lock:
            page = self._page(page_id)
            users, groups = set(users), set(groups)
            for u in users:
                self._user(u)
            for g in groups:
                self.groups.setdefault(g, set())
            page[op] = {"users": users, "groups": groups}

    def add_attachment(
        self,
        page_id: str,
        filename: str,
        data: bytes,
        media_type: str = "application/octet-stream",
        author: str | None = None,
    ) -> str:
        """Attach a file (a second one with the same name is its next version); returns ``att<id>``."""
        with self.lock:
            page = self._page(page_id)
            now = self.now()
            for att_id in page["attachments"]:
                att = self.content[att_id]
                if att["title"] == filename:
                    number = att["versions"][-1]["number"] + 1
                    att["versions"].append(
                        {"number": number, "when": now, "by": author, "data": data, "media_type": media_type}
                    )
                    return att_id
            att_id = f"att{next(self._ids)}"
            self.content[att_id] = {
                "id": att_id,
                "type": "attachment",
                "title": filename,
                "space": page["space"],
                "page": page["id"],
                "status": "current",
                "created": now,
                "created_by": author,
                "versions": [{"number": 1, "when": now, "by": author, "data": data, "media_type": media_type}],
            }
            page["attachments"].append(att_id)
            return att_id

    # ---- the view rule ---------------------------------------------------------------------------
    def ancestor_ids(self, page_id: str) -> list[str]:
        """Root first."""
        out: list[str] = []
        parent = self.content[page_id]["parent"]
        while parent is not None:
            out.append(parent)
            parent = self.content[parent]["parent"]
        return out[::-1]

    def _passes(self, user: str | None, groups: set[str], restriction: dict[str, set[str]]) -> bool:
        if not restriction["users"] and not restriction["groups"]:
            return True  # no restriction here: inherit
        return user is not None and (user in restriction["users"] or bool(groups & restriction["groups"]))

    def can_view(self, user: str | None, content_id: str) -> bool:
        with self.lock:
            c = self.content.get(str(content_id))
            if c is None:
                return False
            if c["type"] == "attachment":
                return self.can_view(user, c["page"])
            if not self.can_view_space(user, c["space"]):
                return False
            groups = self.groups_of(user)
            chain = [c["id"], *self.ancestor_ids(c["id"])] if c["status"] == "current" else [c["id"]]
            return all(self._passes(user, groups, self.content[i]["read"]) for i in chain)

    def can_edit(self, user: str | None, page_id: str) -> bool:
        """View, plus the space's edit right (its viewers other than anonymous, or an admin), plus the
        page's own update restriction (not inherited)."""
        with self.lock:
            if user is None or not self.can_view(user, page_id):
                return False
            page = self.content[page_id]
            perms = self.spaces[page["space"]]["perms"]
            groups = self.groups_of(user)
            space_edit = (
                user in perms["users"] or bool(groups & perms["groups"]) or self.is_space_admin(user, page["space"])
            )
            return space_edit and self._passes(user, groups, page["update"])

    def visible_page_ids(self, user: str | None) -> set[str]:
        with self.lock:
            return {
                i
                for i, c in self.content.items()
                if c["type"] == "page" and c["status"] == "current" and self.can_view(user, i)
            }

    # ---- JSON shapes -----------------------------------------------------------------------------
    def user_json(self, username: str | None, *, email: bool = False) -> dict[str, Any]:
        if username is None or username not in self.users:
            return {
                "type": "anonymous",
                "profilePicture": self._picture(),
                "displayName": "Anonymous",
                "_links": {"self": f"{self.base}/rest/api/user/anonymous"},
            }
        u = self.users[username]
        out: dict[str, Any] = {
            "type": "known",
            "username": username,
            "userKey": u["key"],
            "profilePicture": self._picture(),
            "displayName": u["display_name"],
            "_links": {"self": f"{self.base}/rest/api/user?key={u['key']}"},
            "_expandable": {"status": ""},
        }
        if email:
            out["email"] = u["email"]
        return out

    def _picture(self) -> dict[str, Any]:
        return {
            "path": f"{self.context_path}/images/icons/profilepics/default.svg",
            "width": 48,
            "height": 48,
            "isDefault": True,
        }

    def group_json(self, name: str) -> dict[str, Any]:
        return {"type": "group", "name": name, "_links": {"self": f"{self.base}/rest/api/group/{quote(name)}"}}

    def space_json(self, key: str, expand: dict[str, Any] | None = None) -> dict[str, Any]:
        s = self.spaces[key]
        out: dict[str, Any] = {
            "id": s["id"],
            "key": key,
            "name": s["name"],
            "type": "global",
            "status": "current",
            "_links": {"webui": f"/display/{key}", "self": f"{self.base}/rest/api/space/{key}"},
            "_expandable": {"metadata": "", "icon": "", "description": "", "retentionPolicy": ""},
        }
        if s["homepage"] is not None:
            out["_expandable"]["homepage"] = f"/rest/api/content/{s['homepage']}"
        if expand and "homepage" in expand and s["homepage"] is not None:
            out.pop("_expandable").pop("homepage", None)
            out["homepage"] = self._content_link(s["homepage"])
        return out

    def _version_json(self, c: dict[str, Any], v: dict[str, Any]) -> dict[str, Any]:
        return {
            "by": self.user_json(v["by"]),
            "when": dc_time(v["when"], self.tz),
            "message": "",
            "number": v["number"],
            "minorEdit": False,
            "hidden": False,
            "_links": {"self": f"{self.base}/rest/experimental/content/{c['id']}/version/{v['number']}"},
            "_expandable": {"content": f"/rest/api/content/{c['id']}"},
        }

    def _content_link(self, content_id: str) -> dict[str, Any]:
        return self.content_json(content_id, {}, None)

    def content_json(
        self, content_id: str, expand: dict[str, Any], user: str | None, version: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        c = self.content[content_id]
        expand = _known(expand, CONTENT_EXPANDS)
        v = version or c["versions"][-1]
        cid = c["id"]
        out: dict[str, Any] = {
            "id": cid,
            "type": c["type"],
            "status": c["status"],
            "title": c["title"] if c["type"] == "attachment" else v["title"],
        }
        expandable: dict[str, str] = {
            "container": f"/rest/api/space/{c['space']}" if c["type"] == "page" else f"/rest/api/content/{c['page']}",
            "metadata": "",
            "operations": "",
            "children": f"/rest/api/content/{cid}/child",
            "restrictions": f"/rest/api/content/{cid}/restriction/byOperation",
            "history": f"/rest/api/content/{cid}/history",
            "ancestors": "",
            "body": "",
            "version": "",
            "descendants": f"/rest/api/content/{cid}/descendant",
            "space": f"/rest/api/space/{c['space']}",
        }
        if c["type"] == "attachment":
            page_id = c["page"]
            latest = c["versions"][-1]
            out["metadata"] = {"mediaType": latest["media_type"], "comment": ""}
            out["extensions"] = {"mediaType": latest["media_type"], "fileSize": len(latest["data"]), "comment": ""}
            millis = int(latest["when"].timestamp() * 1000)
            links = {
                "webui": f"/pages/viewpage.action?pageId={page_id}&preview=/{page_id}/{cid[3:]}/{quote(c['title'])}",
                "download": f"/download/attachments/{page_id}/{quote(c['title'])}?version={latest['number']}"
                f"&modificationDate={millis}&api=v2",
                "self": f"{self.base}/rest/api/content/{cid}",
            }
            for k in ("children", "descendants", "ancestors", "body"):
                expandable.pop(k)
            expand = {k: val for k, val in expand.items() if k in {"version", "space", "history", "container"}}
        else:
            out["extensions"] = {"position": "none"}
            links = {
                "webui": f"/pages/viewpage.action?pageId={cid}",
                "edit": f"/pages/resumedraft.action?draftId={cid}",
                "tinyui": f"/x/{cid}",
                "self": f"{self.base}/rest/api/content/{cid}",
            }
        for name, sub in expand.items():
            expandable.pop(name, None)
            if name == "space":
                out["space"] = self.space_json(c["space"])
            elif name == "version":
                out["version"] = self._version_json(c, v)
            elif name == "history":
                hist: dict[str, Any] = {
                    "latest": v is c["versions"][-1],
                    "createdBy": self.user_json(c["created_by"]),
                    "createdDate": dc_time(c["created"], self.tz),
                    "_links": {"self": f"{self.base}/rest/api/content/{cid}/history"},
                    "_expandable": {"lastUpdated": "", "previousVersion": "", "contributors": "", "nextVersion": ""},
                }
                if "lastUpdated" in sub:
                    hist["_expandable"].pop("lastUpdated")
                    hist["lastUpdated"] = self._version_json(c, c["versions"][-1])
                out["history"] = hist
            elif name == "ancestors":
                out["ancestors"] = [self._content_link(a) for a in self.ancestor_ids(cid)] if c["parent"] else []
            elif name == "body":
                body: dict[str, Any] = {
                    "_expandable": {
                        "editor": "",
                        "view": "",
                        "export_view": "",
                        "styled_view": "",
                        "anonymous_export_view": "",
                    }
                }
                if "storage" in sub:
                    body["storage"] = {
                        "value": v["body"],
                        "representation": "storage",
                        "_expandable": {"content": f"/rest/api/content/{cid}"},
                    }
                else:
                    body["_expandable"]["storage"] = ""
                out["body"] = body
            elif name == "container":
                out["container"] = self.space_json(c["space"]) if c["type"] == "page" else self._content_link(c["page"])
            elif name == "children":
                kids: dict[str, Any] = {
                    "_links": {"self": f"{self.base}/rest/api/content/{cid}/child"},
                    "_expandable": {
                        "page": f"/rest/api/content/{cid}/child/page",
                        "attachment": f"/rest/api/content/{cid}/child/attachment",
                        "comment": f"/rest/api/content/{cid}/child/comment",
                    },
                }
                for kind in ("page", "attachment"):
                    if kind in sub:
                        kids["_expandable"].pop(kind)
                        ids = self._children(cid, kind, user)
                        kids[kind] = self._page_of(
                            ids, 0, 25, f"/rest/api/content/{cid}/child/{kind}", {}, lambda i: self._content_link(i)
                        )
                out["children"] = kids
            elif name == "restrictions":
                out["restrictions"] = self._restrictions_json(
                    cid, sub or {"read": {}, "update": {}}, include_links=False
                )
        out["_links"] = links
        out["_expandable"] = expandable
        return out

    def _restriction_json(self, cid: str, op: str, sub: dict[str, Any]) -> dict[str, Any]:
        c = self.content[cid]
        r = c[op]
        inner: dict[str, Any] = {"_expandable": {}}
        expanded = sub.get("restrictions", {})
        for kind, names, render in (
            ("user", sorted(r["users"]), lambda n: self.user_json(n)),
            ("group", sorted(r["groups"]), lambda n: self.group_json(n)),
        ):
            if kind in expanded or not sub:
                inner[kind] = {
                    "results": [render(n) for n in names[:RESTRICTION_LIST_LIMIT]],
                    "start": 0,
                    "limit": RESTRICTION_LIST_LIMIT,
                    "size": min(len(names), RESTRICTION_LIST_LIMIT),
                }
            else:
                inner["_expandable"][kind] = ""
        if not inner["_expandable"]:
            del inner["_expandable"]
        return {
            "operation": op,
            "restrictions": inner,
            "_expandable": {"content": f"/rest/api/content/{cid}"},
            "_links": {"self": f"{self.base}/rest/api/content/{cid}/restriction/byOperation/{op}"},
        }

    def _restrictions_json(self, cid: str, ops: dict[str, Any], include_links: bool = True) -> dict[str, Any]:
        out: dict[str, Any] = {
            op: self._restriction_json(cid, op, sub) for op, sub in ops.items() if op in ("read", "update")
        }
        if include_links:
            out["_links"] = {
                "base": self.base,
                "context": self.context_path,
                "self": f"{self.base}/rest/api/content/{cid}/restriction/byOperation",
            }
        else:
            out["_links"] = {"self": f"{self.base}/rest/api/content/{cid}/restriction/byOperation"}
        return out

    def _children(self, cid: str, kind: str, user: str | None) -> list[str]:
        c = self.content[cid]
        ids = c["children"] if kind == "page" else c["attachments"]
        return [i for i in ids if self.can_view(user, i) and self.content[i]["status"] == "current"]

    def _page_of(
        self,
        ids: list[str],
        start: int,
        limit: int,
        path: str,
        params: dict[str, str],
        render: Callable[[str], dict[str, Any]],
        *,
        top: bool = False,
    ) -> dict[str, Any]:
        chunk = ids[start : start + limit]
        links: dict[str, str] = {"self": f"{self.base}{path}"}
        if top:
            links = {"base": self.base, "context": self.context_path, **links}
        more = start + len(chunk) < len(ids) or (
            "next_on_full_page" in self.quirks and len(chunk) == limit and limit > 0
        )
        if more:
            rest = {k: v for k, v in params.items() if k not in ("start", "limit")}
            links["next"] = f"{path}?{urlencode({'limit': limit, 'start': start + len(chunk), **rest})}"
        if start > 0:
            rest = {k: v for k, v in params.items() if k not in ("start", "limit")}
            links["prev"] = f"{path}?{urlencode({'limit': limit, 'start': max(0, start - limit), **rest})}"
        return {
            "results": [render(i) for i in chunk],
            "start": start,
            "limit": limit,
            "size": len(chunk),
            "_links": links,
        }

    # ---- REST answers ----------------------------------------------------------------------------
    @staticmethod
    def paging(params: dict[str, str], default_limit: int, cap: int) -> tuple[int, int]:
        try:
            start = int(params.get("start", 0))
            limit = int(params.get("limit", default_limit))
        except ValueError:
            raise ConfluenceHttpError(400, "start and limit must be numbers") from None
        if start < 0 or limit < 0:
            raise ConfluenceHttpError(400, "start and limit must not be negative")
        return start, min(limit, cap)

    def _cql_view(self, c: dict[str, Any]) -> dict[str, Any]:
        if c["type"] == "attachment":
            page = self.content[c["page"]]
            return {
                "id": c["id"][3:],
                "type": "attachment",
                "space": c["space"],
                "title": c["title"],
                "ancestors": [],
                "container": page["id"],
                "lastmodified": c["versions"][-1]["when"],
                "created": c["created"],
            }
        return {
            "id": c["id"],
            "type": "page",
            "space": c["space"],
            "title": c["versions"][-1]["title"],
            "ancestors": self.ancestor_ids(c["id"]) if c["status"] == "current" else [],
            "container": None,
            "lastmodified": c["versions"][-1]["when"],
            "created": c["created"],
        }

    def cql_ids(self, user: str | None, cql: str, statuses: set[str] | None = None) -> list[str]:
        try:
            query = cqlmod.parse(cql, self.tz)
        except cqlmod.CqlError:
            raise ConfluenceHttpError(400, f"Could not parse cql : {cql}") from None
        statuses = statuses or {"current"}
        with self.lock:
            rows = []
            for cid, c in self.content.items():
                if c["status"] not in statuses:
                    continue
                if c["type"] == "attachment" and self.content[c["page"]]["status"] != "current":
                    continue
                view = self._cql_view(c)
                if query.match(view) and self.can_view(user, cid):
                    rows.append((view, cid))
            order = query.order or [("id", False)]
            for field, desc in reversed(order):
                rows.sort(key=_sort_key(field), reverse=desc)
            return [cid for _, cid in rows]

    def api_content_search(
        self, user: str | None, params: dict[str, str], *, search_api: bool = False
    ) -> dict[str, Any]:
        cql = params.get("cql")
        if cql is None:
            raise ConfluenceHttpError(400, "The CQL query parameter is required")
        statuses = None
        if params.get("cqlcontext"):
            try:
                ctx = json.loads(params["cqlcontext"])
                statuses = set(ctx.get("contentStatuses") or []) or None
            except (ValueError, AttributeError, TypeError):
                raise ConfluenceHttpError(400, f"Could not parse cqlcontext : {params['cqlcontext']}") from None
        expand = parse_expand(params.get("expand"))
        start, limit = self.paging(params, 25, limit_cap(_known(expand, CONTENT_EXPANDS)))
        ids = self.cql_ids(user, cql, statuses)
        path = "/rest/api/search" if search_api else "/rest/api/content/search"
        with self.lock:
            if not search_api:
                return self._page_of(
                    ids, start, limit, path, params, lambda i: self.content_json(i, expand, user), top=True
                )

            def item(i: str) -> dict[str, Any]:
                content = self.content_json(i, expand, user)
                c = self.content[i]
                return {
                    "content": content,
                    "title": content["title"],
                    "excerpt": "",
                    "url": content["_links"]["webui"],
                    "resultGlobalContainer": {
                        "title": self.spaces[c["space"]]["name"],
                        "displayUrl": f"/display/{c['space']}",
                    },
                    "entityType": "content",
                    "iconCssClass": f"aui-icon content-type-{c['type']}",
                    "lastModified": dc_time(c["versions"][-1]["when"], self.tz),
                }

            out = self._page_of(ids, start, limit, path, params, item, top=True)
            out.update(totalSize=len(ids), cqlQuery=cql, searchDuration=1)
            return out

    def _readable(self, user: str | None, content_id: str, status: str = "current") -> dict[str, Any]:
        c = self.content.get(content_id)
        if c is None or not self.can_view(user, content_id):
            raise not_found(content_id)
        wanted = {"current": {"current"}, "trashed": {"trashed"}, "any": {"current", "trashed"}, "draft": set()}.get(
            status
        )
        if wanted is None:
            raise ConfluenceHttpError(400, f"Unknown content status: {status}")
        if c["status"] not in wanted:
            raise not_found(content_id)
        return c

    def api_content(self, user: str | None, content_id: str, params: dict[str, str]) -> dict[str, Any]:
        expand = parse_expand(params.get("expand", "space,history,version"))
        with self.lock:
            c = self._readable(user, content_id, params.get("status", "current"))
            version = None
            if params.get("version"):
                try:
                    number = int(params["version"])
                except ValueError:
                    raise ConfluenceHttpError(400, "version must be a number") from None
                matches = [v for v in c["versions"] if v["number"] == number]
                if not matches:
                    raise not_found(content_id)
                version = matches[0]
            return self.content_json(content_id, expand, user, version)

    def api_content_list(self, user: str | None, params: dict[str, str]) -> dict[str, Any]:
        expand = parse_expand(params.get("expand"))
        start, limit = self.paging(params, 25, limit_cap(_known(expand, CONTENT_EXPANDS)))
        ctype = params.get("type", "page")
        with self.lock:
            ids = [
                i
                for i, c in self.content.items()
                if c["type"] == ctype == "page"
                and c["status"] == params.get("status", "current")
                and (not params.get("spaceKey") or c["space"] == params["spaceKey"])
                and (not params.get("title") or c["versions"][-1]["title"] == params["title"])
                and self.can_view(user, i)
            ]
            return self._page_of(
                ids, start, limit, "/rest/api/content", params, lambda i: self.content_json(i, expand, user), top=True
            )

    def api_children(self, user: str | None, content_id: str, kind: str, params: dict[str, str]) -> dict[str, Any]:
        expand = parse_expand(params.get("expand"))
        start, limit = self.paging(params, 25 if kind == "page" else 50, limit_cap(_known(expand, CONTENT_EXPANDS)))
        with self.lock:
            self._readable(user, content_id)
            if self.content[content_id]["type"] != "page":
                raise not_found(content_id)
            ids = self._children(content_id, kind, user)
            if kind == "attachment":
                if params.get("filename"):
                    ids = [i for i in ids if self.content[i]["title"] == params["filename"]]
                if params.get("mediaType"):
                    ids = [i for i in ids if self.content[i]["versions"][-1]["media_type"] == params["mediaType"]]
            return self._page_of(
                ids,
                start,
                limit,
                f"/rest/api/content/{content_id}/child/{kind}",
                params,
                lambda i: self.content_json(i, expand, user),
                top=True,
            )

    def api_restrictions(
        self, user: str | None, content_id: str, op: str | None, params: dict[str, str]
    ) -> dict[str, Any]:
        with self.lock:
            self._readable(user, content_id)
            if self.content[content_id]["type"] != "page":
                raise not_found(content_id)
            if op is None:
                return self._restrictions_json(content_id, {"read": {}, "update": {}})
            if op not in ("read", "update"):
                raise ConfluenceHttpError(400, f"Operation key not valid: {op}")
            expand = parse_expand(params.get("expand", "restrictions.user,restrictions.group"))
            out = self._restriction_json(content_id, op, expand)
            out["_links"] = {"base": self.base, "context": self.context_path, **out["_links"]}
            return out

    def api_set_restrictions(self, user: str | None, content_id: str, body: Any, *, replace: bool) -> dict[str, Any]:
        """PUT (replace the operations given) / POST (add to them) ``/rest/api/content/{id}/restriction``
        with ``[{"operation": "read", "restrictions": {"user": [{"type": "known", "username": …}],
        "group": [{"type": "group", "name": …}]}}]``."""
        items = body.get("results") if isinstance(body, dict) else body
        if not isinstance(items, list):
            raise ConfluenceHttpError(400, "Expected a list of content restrictions")
        with self.lock:
            self._readable(user, content_id)
            if not self.can_edit(user, content_id):
                raise ConfluenceHttpError(403, f"Not permitted to modify restrictions on content with id: {content_id}")
            changes: dict[str, tuple[set[str], set[str]]] = {}
            for item in items:
                if not isinstance(item, dict) or item.get("operation") not in ("read", "update"):
                    raise ConfluenceHttpError(400, "Each restriction needs an operation: read or update")
                r = item.get("restrictions") or {}
                users, groups = set(), set()
                for u in self._listish(r.get("user")):
                    name = u.get("username") or self.keys.get(u.get("userKey", ""))
                    if not name or name not in self.users:
                        raise ConfluenceHttpError(400, f"No user found for: {u}")
                    users.add(name)
                for g in self._listish(r.get("group")):
                    if g.get("name") not in self.groups:
                        raise ConfluenceHttpError(400, f"No group found with name: {g.get('name')}")
                    groups.add(g["name"])
                changes[item["operation"]] = (users, groups)
            for op, (users, groups) in changes.items():
                page = self.content[content_id]
                if not replace:
                    users |= page[op]["users"]
                    groups |= page[op]["groups"]
                self._restrict(content_id, op, users, groups)
            return self._restrictions_json(content_id, {"read": {}, "update": {}})

    @staticmethod
    def _listish(value: Any) -> list[dict[str, Any]]:
        if isinstance(value, dict):
            value = value.get("results", [])
        if value is None:
            return []
        if not isinstance(value, list) or not all(isinstance(x, dict) for x in value):
            raise ConfluenceHttpError(400, "Restriction subjects must be a list of objects")
        return value

    def api_clear_restrictions(self, user: str | None, content_id: str) -> dict[str, Any]:
        with self.lock:
            self._readable(user, content_id)
            if not self.can_edit(user, content_id):
                raise ConfluenceHttpError(403, f"Not permitted to modify restrictions on content with id: {content_id}")
            self._restrict(content_id, "read", (), ())
            self._restrict(content_id, "update", (), ())
            return self._restrictions_json(content_id, {"read": {}, "update": {}})

    def api_restriction_subject(
        self, user: str | None, content_id: str, op: str, kind: str, name: str, add: bool
    ) -> None:
        """PUT / DELETE ``…/restriction/byOperation/{op}/user?userName=`` or ``…/group/{name}``."""
        if op not in ("read", "update"):
            raise ConfluenceHttpError(400, f"Operation key not valid: {op}")
        with self.lock:
            self._readable(user, content_id)
            if not self.can_edit(user, content_id):
                raise ConfluenceHttpError(403, f"Not permitted to modify restrictions on content with id: {content_id}")
            page = self.content[content_id]
            users, groups = set(page[op]["users"]), set(page[op]["groups"])
            target, known = (users, self.users) if kind == "user" else (groups, self.groups)
            if name not in known:
                raise ConfluenceHttpError(404, f"No {kind} found with name: {name}")
            if add:
                target.add(name)
            elif name in target:
                target.discard(name)
            else:
                raise ConfluenceHttpError(404, f"The {kind} {name} is not in the {op} restriction of {content_id}")
            self._restrict(content_id, op, users, groups)

    def api_attachment_download(
        self, user: str | None, page_id: str, filename: str, params: dict[str, str]
    ) -> tuple[bytes, str]:
        with self.lock:
            page = self.content.get(page_id)
            if (
                page is None
                or page["type"] != "page"
                or page["status"] != "current"
                or not self.can_view(user, page_id)
            ):
                raise not_found(page_id)
            for att_id in page["attachments"]:
                att = self.content[att_id]
                if att["title"] != filename:
                    continue
                if params.get("version"):
                    try:
                        number = int(params["version"])
                    except ValueError:
                        raise ConfluenceHttpError(400, "version must be a number") from None
                    versions = [v for v in att["versions"] if v["number"] == number]
                    if not versions:
                        break
                    v = versions[0]
                else:
                    v = att["versions"][-1]
                return v["data"], v["media_type"]
            raise ConfluenceHttpError(404, f"Attachment not found: {filename}")

    def api_spaces(self, user: str | None, params: dict[str, str]) -> dict[str, Any]:
        start, limit = self.paging(params, 25, 500)
        keys_wanted = {k for k in params.get("spaceKey", "").split(",") if k}
        if params.get("type") not in (None, "global", "personal"):
            raise ConfluenceHttpError(400, f"Unknown space type: {params['type']}")
        if params.get("status") not in (None, "current", "archived"):
            raise ConfluenceHttpError(400, f"Unknown space status: {params['status']}")
        expand = parse_expand(params.get("expand"))
        with self.lock:
            keys = [
                k
                for k in sorted(self.spaces)
                if self.can_view_space(user, k)
                and (not keys_wanted or k in keys_wanted)
                and params.get("type", "global") == "global"
                and params.get("status", "current") == "current"
            ]
            return self._page_of(
                keys, start, limit, "/rest/api/space", params, lambda k: self.space_json(k, expand), top=True
            )

    def api_space(self, user: str | None, key: str, params: dict[str, str]) -> dict[str, Any]:
        with self.lock:
            if key not in self.spaces or not self.can_view_space(user, key):
                raise ConfluenceHttpError(404, f"No space with key : {key}")
            return self.space_json(key, parse_expand(params.get("expand")))

    def api_space_permissions(self, user: str | None, key: str, anonymous: bool) -> list[dict[str, Any]]:
        """9.1+: ``GET /rest/api/space/{key}/permissions`` (and ``/anonymous``); space admins only —
        DC answers others with a 500 (CONFSERVER-99908)."""
        if self.server_version() < (9, 1):
            raise ConfluenceHttpError(404, "null for uri: /rest/api/space/{key}/permissions")
        with self.lock:
            if key not in self.spaces or not self.can_view_space(user, key):
                raise ConfluenceHttpError(404, f"No space with key : {key}")
            if not self.is_space_admin(user, key):
                raise ConfluenceHttpError(
                    500,
                    "com.atlassian.confluence.api.service.exceptions.PermissionException: User not permitted to view space permissions",
                )
            s = self.spaces[key]
            perms = s["perms"]

            def entry(op: str, subject: dict[str, Any] | None) -> dict[str, Any]:
                e: dict[str, Any] = {
                    "operation": {"targetType": "space", "operationKey": op},
                    "spaceKey": key,
                    "spaceId": s["id"],
                }
                if subject is not None:
                    e["subject"] = subject
                return e

            if anonymous:
                return [entry("read", None)] if perms["anonymous"] else []
            out = [entry("read", {"type": "group", "name": g}) for g in sorted(perms["groups"])]
            out += [
                entry("read", {"type": "user", "userKey": self.users[u]["key"]})
                for u in sorted(perms["users"] | perms["admins"])
            ]
            out += [
                entry("administer", {"type": "user", "userKey": self.users[u]["key"]}) for u in sorted(perms["admins"])
            ]
            return out

    def rpc(self, user: str | None, body: Any) -> dict[str, Any]:
        """JSON-RPC ``/rpc/json-rpc/confluenceservice-v2``: ``getSpacePermissionSets`` (space admins)."""
        if not self.remote_api:
            raise ConfluenceHttpError(401, "Remote API is disabled")
        if not isinstance(body, dict) or body.get("jsonrpc") != "2.0" or not isinstance(body.get("params", []), list):
            return {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "Invalid Request"}}
        rid = body.get("id")
        method = body.get("method")
        params = body.get("params") or []
        if method != "getSpacePermissionSets":
            return {"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": f"Method not found: {method}"}}
        if len(params) != 1 or not isinstance(params[0], str):
            return {"jsonrpc": "2.0", "id": rid, "error": {"code": -32602, "message": "Invalid params"}}
        key = params[0]
        with self.lock:
            if key not in self.spaces or not self.is_space_admin(user, key):
                return {
                    "jsonrpc": "2.0",
                    "id": rid,
                    "error": {
                        "code": 0,
                        "message": f"com.atlassian.confluence.rpc.NotPermittedException: Not permitted to view permissions of space {key}",
                    },
                }
            perms = self.spaces[key]["perms"]
            view = [{"type": "VIEWSPACE", "userName": None, "groupName": g} for g in sorted(perms["groups"])]
            view += [
                {"type": "VIEWSPACE", "userName": u, "groupName": None}
                for u in sorted(perms["users"] | perms["admins"])
            ]
            if perms["anonymous"]:
                view.append({"type": "VIEWSPACE", "userName": None, "groupName": None})
            admin = [{"type": "SETSPACEPERMISSIONS", "userName": u, "groupName": None} for u in sorted(perms["admins"])]
            return {
                "jsonrpc": "2.0",
                "id": rid,
                "result": [
                    {"type": "VIEWSPACE", "spacePermissions": view},
                    {"type": "SETSPACEPERMISSIONS", "spacePermissions": admin},
                ],
            }

    def api_user(self, user: str | None, params: dict[str, str]) -> dict[str, Any]:
        return self.user_json(self._lookup_user(user, params), email=True)

    def _lookup_user(self, user: str | None, params: dict[str, str]) -> str:
        if user is None:
            raise ConfluenceHttpError(401, "User not permitted to view user profiles")
        with self.lock:
            if params.get("username"):
                name = params["username"]
            elif params.get("key"):
                name = self.keys.get(params["key"], "")
            else:
                raise ConfluenceHttpError(400, "A username or key parameter is required")
            if name not in self.users:
                raise ConfluenceHttpError(404, f"No user found with: {params}")
            return name

    def api_memberof(self, user: str | None, params: dict[str, str]) -> dict[str, Any]:
        name = self._lookup_user(user, params)
        start, limit = self.paging(params, 200, 1000)
        groups = sorted(self.groups_of(name))
        return self._page_of(groups, start, limit, "/rest/api/user/memberof", params, self.group_json, top=True)

    def api_groups(self, user: str | None, params: dict[str, str]) -> dict[str, Any]:
        if user is None:
            raise ConfluenceHttpError(401, "User not permitted to view groups")
        start, limit = self.paging(params, 200, 1000)
        with self.lock:
            return self._page_of(
                sorted(self.groups), start, limit, "/rest/api/group", params, self.group_json, top=True
            )

    def api_group(self, user: str | None, name: str) -> dict[str, Any]:
        if user is None:
            raise ConfluenceHttpError(401, "User not permitted to view groups")
        if name not in self.groups:
            raise ConfluenceHttpError(404, f"No group found with name: {name}")
        return self.group_json(name)

    def api_group_members(self, user: str | None, name: str, params: dict[str, str]) -> dict[str, Any]:
        self.api_group(user, name)
        start, limit = self.paging(params, 200, 1000)
        with self.lock:
            members = sorted(self.groups[name])
            return self._page_of(
                members, start, limit, f"/rest/api/group/{quote(name)}/member", params, self.user_json, top=True
            )

    def api_server_information(self) -> dict[str, Any]:
        major, minor, patch = (*self.server_version(), 0, 0, 0)[:3]
        return {
            "baseUrl": self.base,
            "version": self.version,
            "buildNumber": str(major * 1000 + minor * 10 + patch),
            "buildDate": "2026-06-01T00:00:00.000+0000",
            "serverId": "BX0Q-EMUL-ATOR-CONF",
            "displayUrl": self.base,
            "_links": {"base": self.base, "context": self.context_path},
        }
