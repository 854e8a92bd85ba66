"""The emulator's HTTP side: Jira DC REST routes, PAT auth, and runtime fault injection.

Admin routes (no auth, loopback only) under ``/_emulator/``:

- ``POST /_emulator/faults`` ``{"rules": [rule, …]}`` appends rules; ``DELETE`` clears; ``GET`` lists.
  A rule: ``{"kind": "429" | "503" | "drop_answer" | "latency" | "error", "method": "POST",
  "path": "<regex on the path>", "times": 1 (≤ 0 = forever), "retry_after": "3", "seconds": 0.5,
  "status": 409, "message": "…"}``. ``drop_answer`` performs the request and then closes the
  connection without answering (a create whose answer is lost); ``latency`` delays and lets the
  request through; the others answer instead of the request.
- ``POST /_emulator/search-lag`` ``{"seconds": 5}``: issues younger than that are not yet searchable.
- ``GET /_emulator/requests?since=N`` the request log (``seq``, ``at``, ``method``, ``path``,
  ``status``, ``user``, ``query``); ``POST /_emulator/touch`` ``{"key", "summary", "user"}`` a human edit.
"""

from __future__ import annotations

import contextlib
import json
import re
import socket
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from emulators.jira.jql import JqlError
from emulators.jira.store import JiraHttpError, Store


class Faults:
    """Fault rules, consumed in order; thread-safe."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.rules: list[dict[str, Any]] = []

    def add(self, rules: list[dict[str, Any]]) -> None:
        with self.lock:
            for r in rules:
                rule = dict(r)
                rule.setdefault("times", 1)
                rule["left"] = rule["times"] if rule["times"] > 0 else None
                rule["hits"] = 0
                self.rules.append(rule)

    def clear(self) -> None:
        with self.lock:
            self.rules.clear()

    def take(self, method: str, path: str) -> tuple[float, dict[str, Any] | None]:
        """(latency seconds, the answering rule or None) for this request."""
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


class EmulatorServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128

    def __init__(self, address: tuple[str, int], store: Store):
        super().__init__(address, Handler)
        self.store = store
        self.faults = Faults()
        self.log_lock = threading.Lock()
        self.request_log: list[dict[str, Any]] = []
        self.seq = 0
        host, port = self.server_address[:2]
        store.base_url = f"http://{host}:{port}"

    @property
    def url(self) -> str:
        return self.store.base_url

    def record(
        self, method: str, path: str, status: int, user: str | None, query: dict[str, str] | None = None
    ) -> None:
        with self.log_lock:
            self.seq += 1
            self.request_log.append(
                {
                    "seq": self.seq,
                    "at": time.time(),
                    "method": method,
                    "path": path,
                    "status": status,
                    "user": user,
                    "query": query or {},
                }
            )
            if len(self.request_log) > 20000:
                del self.request_log[:5000]


Route = tuple[str, re.Pattern[str], Callable[..., Any]]


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body are two writes: Nagle + delayed ACK = 40 ms each
    server: EmulatorServer

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - quiet by default
        pass

    # ---- plumbing -----------------------------------------------------------------------------
    def _send(self, status: int, body: Any = None, headers: dict[str, str] | None = None) -> None:
        payload = b"" if body is None else json.dumps(body, ensure_ascii=False).encode()
        self._record(status)  # logged before the client can see the answer (and act on it)
        self.send_response(status)
        if payload:
            self.send_header("Content-Type", "application/json;charset=UTF-8")
        self.send_header("Content-Length", str(len(payload)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if payload:
            self.wfile.write(payload)
        self._status = status

    def _send_text(self, status: int, text: str) -> None:
        payload = text.encode()
        self._record(status)
        self.send_response(status)
        self.send_header("Content-Type", "text/plain;charset=UTF-8")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)
        self._status = status

    def _record(self, status: int) -> None:
        if getattr(self, "_recorded", True):
            return
        self._recorded = True
        method, path, query = self._request_line
        self.server.record(method, path, status, self._user_name, query)

    def _body(self) -> Any:
        raw = self._raw
        if not raw:
            return {}
        try:
            return json.loads(raw)
        except ValueError:
            raise JiraHttpError(400, ["Unexpected character: the request body is not valid JSON."]) from None

    def _user(self) -> str | None:
        auth = self.headers.get("Authorization") or ""
        if auth.startswith("Bearer "):
            return self.server.store.tokens.get(auth[7:].strip())
        return None

    def do_GET(self) -> None:  # noqa: N802
        self._dispatch("GET")

    def do_POST(self) -> None:  # noqa: N802
        self._dispatch("POST")

    def do_PUT(self) -> None:  # noqa: N802
        self._dispatch("PUT")

    def do_DELETE(self) -> None:  # noqa: N802
        self._dispatch("DELETE")

    def _dispatch(self, method: str) -> None:
        parts = urlsplit(self.path)
        path = unquote(parts.path)
        query = _query(parts.query)
        self._status = 0
        user = None
        # The request log entry is written before the answer leaves (see _send): a client that acts on
        # an answer and then reads the log must find that request in it.
        self._request_line, self._user_name = (method, path, query), None
        self._recorded = path.startswith("/_emulator/")
        # Always drain the body first: an answer that skips it (a fault) must not desync keep-alive.
        length = int(self.headers.get("Content-Length") or 0)
        self._raw = self.rfile.read(length) if length else b""
        try:
            if path.startswith("/_emulator/"):
                self._admin(method, path, query)
                return
            latency, rule = self.server.faults.take(method, path)
            if latency:
                time.sleep(latency)
            user = self._user_name = self._user()
            if user is None:
                self._send(
                    401,
                    {
                        "errorMessages": [
                            "You are not authenticated. Authentication required to perform this operation."
                        ],
                        "errors": {},
                    },
                )
                return
            if rule is not None and rule["kind"] != "drop_answer":
                self._fault(rule)
                return
            # `latest` is Jira's alias of the newest version of a REST API (here: api/2, agile/1.0)
            route_path = re.sub(
                r"^/rest/(api|agile)/latest/", lambda m: f"/rest/{m[1]}/{'2' if m[1] == 'api' else '1.0'}/", path
            )
            handler, args = self._route(method, route_path)
            if handler is None:
                self._send(404, {"errorMessages": [f"No resource found for {method} {path}"], "errors": {}})
                return
            result = handler(self, user, query, *args)
            if rule is not None:  # drop_answer: done, but the client never hears of it
                self._status = -1
                self.close_connection = True
                with contextlib.suppress(OSError):
                    self.connection.shutdown(socket.SHUT_RDWR)
                return
            status, body = result
            self._send(status, body)
        except JiraHttpError as exc:
            self._send(exc.status, exc.body)
        except JqlError as exc:
            self._send(400, {"errorMessages": [str(exc)], "errors": {}})
        finally:
            self._record(self._status)  # an answer that was never sent (a dropped one: -1)

    def _fault(self, rule: dict[str, Any]) -> None:
        kind = rule["kind"]
        if kind == "429":
            headers = {} if rule.get("retry_after") is None else {"Retry-After": str(rule["retry_after"])}
            self._send(429, {"errorMessages": ["Rate limit exceeded."], "errors": {}}, headers)
        elif kind == "503":
            self._send(503, {"errorMessages": ["Service Unavailable"], "errors": {}})
        elif kind == "error" and rule.get("text") is not None:  # a non-JSON body (a proxy's, Jira's XSRF check)
            self._send_text(int(rule.get("status", 500)), str(rule["text"]))
        elif kind == "error":
            message = rule.get("message", "Injected error")
            self._send(
                int(rule.get("status", 500)),
                {"errorMessages": [message] if message else [], "errors": dict(rule.get("errors") or {})},
            )
        else:
            self._send(500, {"errorMessages": [f"unknown fault kind {kind}"], "errors": {}})

    def _route(self, method: str, path: str) -> tuple[Callable[..., Any] | None, tuple[str, ...]]:
        for m, pattern, fn in ROUTES:
            if m == method:
                match = pattern.fullmatch(path)
                if match:
                    return fn, match.groups()
        return None, ()

    def _admin(self, method: str, path: str, query: dict[str, str]) -> None:
        srv = self.server
        if path == "/_emulator/faults":
            if method == "POST":
                srv.faults.add(self._body().get("rules", []))
            elif method == "DELETE":
                srv.faults.clear()
            self._send(200, {"rules": srv.faults.listing()})
        elif path == "/_emulator/search-lag" and method == "POST":
            srv.store.search_lag_seconds = float(self._body().get("seconds", 0))
            self._send(200, {"seconds": srv.store.search_lag_seconds})
        elif path == "/_emulator/requests" and method == "GET":
            since = int(query.get("since", 0))
            with srv.log_lock:
                entries = [e for e in srv.request_log if e["seq"] > since]
            self._send(200, {"requests": entries, "seq": srv.seq})
        elif path == "/_emulator/touch" and method == "POST":
            body = self._body()
            updated = srv.store.touch_as(body["key"], user=body.get("user", "jdoe"), summary=body["summary"])
            self._send(200, {"key": body["key"], "updated": updated})
        elif path == "/_emulator/health":
            self._send(200, {"issues": len(srv.store.issues)})
        else:
            self._send(404, {"errorMessages": ["unknown admin route"], "errors": {}})


# ---- Jira routes ------------------------------------------------------------------------------
# Parameters Jira declares as lists (``List<StringList>``): every occurrence counts, ``fields=a&fields=b,c``
# is ``a,b,c``. Any other parameter repeated: JAX-RS hands the resource its first value.
_LIST_PARAMS = {"fields", "properties"}


def _query(raw: str) -> dict[str, str]:
    out = {}
    for k, v in parse_qs(raw, keep_blank_values=True).items():
        out[k] = ",".join(x for x in v if x) if k in _LIST_PARAMS else v[0]
    return out


def _int(query: dict[str, str], name: str, default: int) -> int:
    try:
        return int(query.get(name, default))
    except ValueError:
        raise JiraHttpError(400, [f"'{name}' must be a number"]) from None


def server_info(h: Handler, user: str, q: dict[str, str]) -> tuple[int, Any]:
    return 200, {
        "baseUrl": h.server.url,
        "version": "9.12.2",
        "versionNumbers": [9, 12, 2],
        "deploymentType": "Server",
        "buildNumber": 9120002,
        "serverTitle": "Jira (emulator)",
    }


def myself(h: Handler, user: str, q: dict[str, str]) -> tuple[int, Any]:
    return 200, h.server.store.user_json(user)


def fields(h: Handler, user: str, q: dict[str, str]) -> tuple[int, Any]:
    return 200, h.server.store.fields()


def search_get(h: Handler, user: str, q: dict[str, str]) -> tuple[int, Any]:
    return 200, h.server.store.search(
        user=user,
        jql=q.get("jql", ""),
        start=_int(q, "startAt", 0),
        max_results=_int(q, "maxResults", 50),
        fields=q.get("fields"),
        expand=q.get("expand"),
        validate=q.get("validateQuery", "true").lower() not in ("false", "none", "warn"),
    )


def search_post(h: Handler, user: str, q: dict[str, str]) -> tuple[int, Any]:
    b = h._body()
    flds = b.get("fields")
    return 200, h.server.store.search(
        user=user,
        jql=b.get("jql", ""),
        start=int(b.get("startAt", 0)),
        max_results=int(b.get("maxResults", 50)),
        fields=",".join(flds) if isinstance(flds, list) else flds,
        expand=b.get("expand"),
        validate=str(b.get("validateQuery", "true")).lower() not in ("false", "none", "warn"),
    )


def cloud_only(h: Handler, user: str, q: dict[str, str]) -> tuple[int, Any]:
    raise JiraHttpError(404, ["null for uri: /rest/api/3/search/jql (Cloud only)"])


def issue_get(h: Handler, user: str, q: dict[str, str], key: str) -> tuple[int, Any]:
    return 200, h.server.store.get_issue(key, fields=q.get("fields"), expand=q.get("expand"), user=user)


def issue_create(h: Handler, user: str, q: dict[str, str]) -> tuple[int, Any]:
    return 201, h.server.store.create_issue(h._body(), user=user)


def issue_edit(h: Handler, user: str, q: dict[str, str], key: str) -> tuple[int, Any]:
    h.server.store.edit_issue(key, h._body(), user=user)
    return 204, None


def prop_get(h: Handler, user: str, q: dict[str, str], key: str, prop: str) -> tuple[int, Any]:
    return 200, h.server.store.get_property(key, prop)


def prop_put(h: Handler, user: str, q: dict[str, str], key: str, prop: str) -> tuple[int, Any]:
    existed = h.server.store.put_property(key, prop, h._body(), user=user)
    return (200 if existed else 201), None


def transitions_get(h: Handler, user: str, q: dict[str, str], key: str) -> tuple[int, Any]:
    return 200, h.server.store.transitions(
        key, with_fields="transitions.fields" in (q.get("expand") or ""), transition_id=q.get("transitionId")
    )


def transitions_post(h: Handler, user: str, q: dict[str, str], key: str) -> tuple[int, Any]:
    h.server.store.transition(key, h._body(), user=user)
    return 204, None


def comments_get(h: Handler, user: str, q: dict[str, str], key: str) -> tuple[int, Any]:
    return 200, h.server.store.comments(key, start=_int(q, "startAt", 0), max_results=_int(q, "maxResults", 5000))


def comment_post(h: Handler, user: str, q: dict[str, str], key: str) -> tuple[int, Any]:
    return 201, h.server.store.add_comment(key, h._body(), user=user)


def issue_delete(h: Handler, user: str, q: dict[str, str], key: str) -> tuple[int, Any]:
    h.server.store.delete_issue(key, delete_subtasks=q.get("deleteSubtasks", "false").lower() == "true", user=user)
    return 204, None


def issue_bulk(h: Handler, user: str, q: dict[str, str]) -> tuple[int, Any]:
    return h.server.store.bulk_create(h._body(), user=user)


def assignee_put(h: Handler, user: str, q: dict[str, str], key: str) -> tuple[int, Any]:
    h.server.store.assign(key, h._body(), user=user)
    return 204, None


def comment_get(h: Handler, user: str, q: dict[str, str], key: str, cid: str) -> tuple[int, Any]:
    return 200, h.server.store.comment_get(key, cid)


def comment_put(h: Handler, user: str, q: dict[str, str], key: str, cid: str) -> tuple[int, Any]:
    return 200, h.server.store.comment_edit(key, cid, h._body(), user=user)


def comment_delete(h: Handler, user: str, q: dict[str, str], key: str, cid: str) -> tuple[int, Any]:
    h.server.store.comment_delete(key, cid, user=user)
    return 204, None


def worklogs_get(h: Handler, user: str, q: dict[str, str], key: str) -> tuple[int, Any]:
    return 200, h.server.store.worklogs(key)


def worklog_post(h: Handler, user: str, q: dict[str, str], key: str) -> tuple[int, Any]:
    return 201, h.server.store.worklog_add(key, h._body(), user=user)


def worklog_get(h: Handler, user: str, q: dict[str, str], key: str, wid: str) -> tuple[int, Any]:
    return 200, h.server.store.worklog_get(key, wid)


def worklog_put(h: Handler, user: str, q: dict[str, str], key: str, wid: str) -> tuple[int, Any]:
    return 200, h.server.store.worklog_edit(key, wid, h._body(), user=user)


def worklog_delete(h: Handler, user: str, q: dict[str, str], key: str, wid: str) -> tuple[int, Any]:
    h.server.store.worklog_delete(key, wid, user=user)
    return 204, None


def watchers_get(h: Handler, user: str, q: dict[str, str], key: str) -> tuple[int, Any]:
    return 200, h.server.store.watchers(key, user=user)


def watcher_post(h: Handler, user: str, q: dict[str, str], key: str) -> tuple[int, Any]:
    h.server.store.watcher_add(key, h._body(), user=user)
    return 204, None


def watcher_delete(h: Handler, user: str, q: dict[str, str], key: str) -> tuple[int, Any]:
    h.server.store.watcher_remove(key, q.get("username"), user=user)
    return 204, None


def props_get(h: Handler, user: str, q: dict[str, str], key: str) -> tuple[int, Any]:
    return 200, h.server.store.property_keys(key)


def prop_delete(h: Handler, user: str, q: dict[str, str], key: str, prop: str) -> tuple[int, Any]:
    h.server.store.property_delete(key, prop, user=user)
    return 204, None


def projects(h: Handler, user: str, q: dict[str, str]) -> tuple[int, Any]:
    return 200, h.server.store.project_list()


def project_get(h: Handler, user: str, q: dict[str, str], key: str) -> tuple[int, Any]:
    return 200, h.server.store.project_get(key)


def project_components(h: Handler, user: str, q: dict[str, str], key: str) -> tuple[int, Any]:
    return 200, h.server.store.project_components(key)


def createmeta_types(h: Handler, user: str, q: dict[str, str], key: str) -> tuple[int, Any]:
    return 200, h.server.store.createmeta_issue_types(key, _int(q, "startAt", 0), _int(q, "maxResults", 50))


def issue_types(h: Handler, user: str, q: dict[str, str]) -> tuple[int, Any]:
    return 200, h.server.store.issue_types()


def priorities(h: Handler, user: str, q: dict[str, str]) -> tuple[int, Any]:
    return 200, h.server.store.priorities()


def resolutions(h: Handler, user: str, q: dict[str, str]) -> tuple[int, Any]:
    return 200, h.server.store.resolutions()


def statuses(h: Handler, user: str, q: dict[str, str]) -> tuple[int, Any]:
    return 200, h.server.store.statuses()


def user_get(h: Handler, user: str, q: dict[str, str]) -> tuple[int, Any]:
    return 200, h.server.store.user_get(q.get("username"), q.get("key"))


def user_search(h: Handler, user: str, q: dict[str, str]) -> tuple[int, Any]:
    return 200, h.server.store.user_search(q.get("username"), _int(q, "startAt", 0), _int(q, "maxResults", 50))


def link_types(h: Handler, user: str, q: dict[str, str]) -> tuple[int, Any]:
    return 200, h.server.store.link_types()


def link_create(h: Handler, user: str, q: dict[str, str]) -> tuple[int, Any]:
    h.server.store.create_link(h._body(), user=user)
    return 201, None


def link_delete(h: Handler, user: str, q: dict[str, str], link_id: str) -> tuple[int, Any]:
    h.server.store.delete_link(int(link_id), user=user)
    return 204, None


def boards(h: Handler, user: str, q: dict[str, str]) -> tuple[int, Any]:
    return 200, h.server.store.boards_for(q.get("projectKeyOrId"))


def board_sprints(h: Handler, user: str, q: dict[str, str], board_id: str) -> tuple[int, Any]:
    states = {s.strip() for s in q["state"].split(",")} if q.get("state") else None
    return 200, h.server.store.board_sprints(int(board_id), states, _int(q, "startAt", 0), _int(q, "maxResults", 50))


def sprint_get(h: Handler, user: str, q: dict[str, str], sprint_id: str) -> tuple[int, Any]:
    return 200, h.server.store.get_sprint(int(sprint_id))


def sprint_move(h: Handler, user: str, q: dict[str, str], sprint_id: str) -> tuple[int, Any]:
    h.server.store.move_to_sprint(int(sprint_id), h._body(), user=user)
    return 204, None


def agile_issue(h: Handler, user: str, q: dict[str, str], key: str) -> tuple[int, Any]:
    return 200, h.server.store.agile_issue(key)


_API = "/rest/api/2"
ROUTES: list[Route] = [
    (m, re.compile(p), f)
    for m, p, f in [
        ("GET", rf"{_API}/serverInfo", server_info),
        ("GET", rf"{_API}/myself", myself),
        ("GET", rf"{_API}/field", fields),
        ("GET", rf"{_API}/search", search_get),
        ("POST", rf"{_API}/search", search_post),
        ("GET", r"/rest/api/3/search/jql", cloud_only),
        ("POST", r"/rest/api/3/search/jql", cloud_only),
        ("GET", rf"{_API}/search/jql", cloud_only),
        ("POST", rf"{_API}/issue", issue_create),
        ("POST", rf"{_API}/issue/bulk", issue_bulk),
        ("DELETE", rf"{_API}/issue/([^/]+)", issue_delete),
        ("PUT", rf"{_API}/issue/([^/]+)/assignee", assignee_put),
        ("GET", rf"{_API}/issue/([^/]+)/comment/([^/]+)", comment_get),
        ("PUT", rf"{_API}/issue/([^/]+)/comment/([^/]+)", comment_put),
        ("DELETE", rf"{_API}/issue/([^/]+)/comment/([^/]+)", comment_delete),
        ("GET", rf"{_API}/issue/([^/]+)/worklog", worklogs_get),
        ("POST", rf"{_API}/issue/([^/]+)/worklog", worklog_post),
        ("GET", rf"{_API}/issue/([^/]+)/worklog/([^/]+)", worklog_get),
        ("PUT", rf"{_API}/issue/([^/]+)/worklog/([^/]+)", worklog_put),
        ("DELETE", rf"{_API}/issue/([^/]+)/worklog/([^/]+)", worklog_delete),
        ("GET", rf"{_API}/issue/([^/]+)/watchers", watchers_get),
        ("POST", rf"{_API}/issue/([^/]+)/watchers", watcher_post),
        ("DELETE", rf"{_API}/issue/([^/]+)/watchers", watcher_delete),
        ("GET", rf"{_API}/issue/([^/]+)/properties", props_get),
        ("DELETE", rf"{_API}/issue/([^/]+)/properties/([^/]+)", prop_delete),
        ("GET", rf"{_API}/issue/createmeta/([^/]+)/issuetypes", createmeta_types),
        ("GET", rf"{_API}/project", projects),
        ("GET", rf"{_API}/project/([^/]+)", project_get),
        ("GET", rf"{_API}/project/([^/]+)/components", project_components),
        ("GET", rf"{_API}/issuetype", issue_types),
        ("GET", rf"{_API}/priority", priorities),
        ("GET", rf"{_API}/resolution", resolutions),
        ("GET", rf"{_API}/status", statuses),
        ("GET", rf"{_API}/user", user_get),
        ("GET", rf"{_API}/user/search", user_search),
        ("GET", rf"{_API}/issue/([^/]+)", issue_get),
        ("PUT", rf"{_API}/issue/([^/]+)", issue_edit),
        ("GET", rf"{_API}/issue/([^/]+)/properties/([^/]+)", prop_get),
        ("PUT", rf"{_API}/issue/([^/]+)/properties/([^/]+)", prop_put),
        ("GET", rf"{_API}/issue/([^/]+)/transitions", transitions_get),
        ("POST", rf"{_API}/issue/([^/]+)/transitions", transitions_post),
        ("GET", rf"{_API}/issue/([^/]+)/comment", comments_get),
        ("POST", rf"{_API}/issue/([^/]+)/comment", comment_post),
        ("GET", rf"{_API}/issueLinkType", link_types),
        ("POST", rf"{_API}/issueLink", link_create),
        ("DELETE", rf"{_API}/issueLink/(\d+)", link_delete),
        ("GET", r"/rest/agile/1\.0/board", boards),
        ("GET", r"/rest/agile/1\.0/board/(\d+)/sprint", board_sprints),
        ("GET", r"/rest/agile/1\.0/sprint/(\d+)", sprint_get),
        ("POST", r"/rest/agile/1\.0/sprint/(\d+)/issue", sprint_move),
        ("GET", r"/rest/agile/1\.0/issue/([^/]+)", agile_issue),
    ]
]


def serve(store: Store, *, host: str = "127.0.0.1", port: int = 0) -> EmulatorServer:
    """Bind (port 0 = any free port); call ``serve_forever`` or use ``start_in_thread``."""
    return EmulatorServer((host, port), store)


def start_in_thread(store: Store, *, host: str = "127.0.0.1", port: int = 0) -> EmulatorServer:
    server = serve(store, host=host, port=port)
    threading.Thread(target=server.serve_forever, name="jira-emulator", daemon=True).start()
    return server
