"""The emulator's HTTP side: Confluence DC REST v1 under the context path, PAT / Basic auth, faults.

``serve(store)`` binds (port 0 = any free port) and serves in a daemon thread; ``.url`` is the base
URL clients use (``http://host:port`` + the context path, ``/confluence`` by default). Admin routes
(no auth, outside the context path) under ``/_emulator/``: ``GET|POST|DELETE /_emulator/faults``
(``{"rules": [rule, …]}``, see ``store.Faults``), ``GET /_emulator/requests?since=N``,
``GET /_emulator/health``.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import json
import re
import socket
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, quote, unquote, urlsplit

from emulators.confluence.store import ConfluenceHttpError, ConfluenceStore, error_body


class ConfluenceServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128

    def __init__(self, address: tuple[str, int], store: ConfluenceStore):
        super().__init__(address, Handler)
        self.store = store
        host, port = self.server_address[:2]
        store.host_url = f"http://{host}:{port}"
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """The base URL a client is given (with the context path), e.g. ``http://127.0.0.1:8090/confluence``."""
        return self.store.base

    @property
    def faults(self) -> Any:
        return self.store.faults

    def start(self) -> ConfluenceServer:
        self._thread = threading.Thread(target=self.serve_forever, name="confluence-emulator", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self.shutdown()
        self.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)


Answer = tuple[int, Any]
Route = tuple[str, re.Pattern[str], Callable[..., Answer]]


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    server: ConfluenceServer

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - quiet by default
        pass

    # ---- plumbing -----------------------------------------------------------------------------
    def _send(
        self, status: int, body: Any = None, headers: dict[str, str] | None = None, *, raw: bytes | None = None
    ) -> None:
        payload = raw if raw is not None else (b"" if body is None else json.dumps(body, ensure_ascii=False).encode())
        self._record(status)  # logged before the client can see the answer (and act on it)
        self.send_response(status)
        headers = {**self._extra_headers, **(headers or {})}
        if payload and raw is None:
            headers.setdefault("Content-Type", "application/json;charset=UTF-8")
        self.send_header("Content-Length", str(len(payload)))
        for k, v in headers.items():
            self.send_header(k, v)
        self.end_headers()
        if payload and self.command != "HEAD":
            self.wfile.write(payload)
        self._status = status

    def _record(self, status: int) -> None:
        if self._recorded:
            return
        self._recorded = True
        method, path, query = self._request_line
        self.server.store.record(method, path, query, status, self._user_name)

    def _body(self) -> Any:
        if not self._raw:
            return None
        try:
            return json.loads(self._raw)
        except ValueError:
            raise ConfluenceHttpError(400, "Unexpected character: the request body is not valid JSON") from None

    def _authenticate(self) -> str | None:
        """The calling user (None = anonymous); raises 401 for credentials DC refuses."""
        store = self.server.store
        auth = self.headers.get("Authorization") or ""
        if not auth:
            return None
        scheme, _, value = auth.partition(" ")
        if scheme.lower() == "bearer":
            user = store.tokens.get(value.strip())
            if user is not None:
                return user
            if store.anonymous_access:
                return None  # DC serves a bad PAT as anonymous on a public site (CONFSERVER-98199)
            raise ConfluenceHttpError(401, "Authentication failed: the personal access token is not valid")
        if scheme.lower() == "basic":
            try:
                name, _, password = base64.b64decode(value.strip()).decode().partition(":")
            except (binascii.Error, UnicodeDecodeError):
                raise ConfluenceHttpError(401, "Authentication failed") from None
            if store.check_password(name, password):
                return name
            raise ConfluenceHttpError(401, "Authentication failed: wrong username or password")
        raise ConfluenceHttpError(401, f"Unsupported authentication scheme: {scheme}")

    def do_GET(self) -> None:  # noqa: N802
        self._dispatch("GET")

    def do_HEAD(self) -> None:  # noqa: N802
        self._dispatch("HEAD")

    def do_POST(self) -> None:  # noqa: N802
        self._dispatch("POST")

    def do_PUT(self) -> None:  # noqa: N802
        self._dispatch("PUT")

    def do_DELETE(self) -> None:  # noqa: N802
        self._dispatch("DELETE")

    def do_PATCH(self) -> None:  # noqa: N802
        self._dispatch("PATCH")

    def _dispatch(self, method: str) -> None:
        store = self.server.store
        parts = urlsplit(self.path)
        path = unquote(parts.path)
        query = {k: v[-1] for k, v in parse_qs(parts.query, keep_blank_values=True).items()}
        self._status = 0
        self._extra_headers: dict[str, str] = {}
        self._request_line, self._user_name = (method, path, query), None
        self._recorded = path.startswith("/_emulator/")
        length = int(self.headers.get("Content-Length") or 0)
        self._raw = self.rfile.read(length) if length else b""  # drain first: keep-alive stays in step
        try:
            if path.startswith("/_emulator/"):
                self._admin(method, path, query)
                return
            ctx = store.context_path
            if ctx and not (path == ctx or path.startswith(ctx + "/")):
                self._send(404, error_body(404, f"null for uri: {path}"))
                return
            local = path[len(ctx) :]
            latency, rule = store.faults.take(method, local)
            if latency:
                time.sleep(latency)
            if rule is not None and rule["kind"] == "drop":
                self._drop()
                return
            user = self._user_name = self._authenticate()
            if store.rate_limit is not None:
                ok, headers = store.rate_limit.take(user or f"anonymous:{self.client_address[0]}")
                self._extra_headers.update(headers)
                if not ok:
                    self._send(429, error_body(429, "Rate limit exceeded"))
                    return
            if rule is not None and rule["kind"] != "drop_answer":
                self._fault(rule)
                return
            handler, args = self._route(method, local)
            result = handler(self, user, query, *args)
            if rule is not None:  # drop_answer: done, but the client never hears of it
                self._drop()
                return
            status, body = result
            if isinstance(body, tuple):  # (bytes, media type, filename)
                data, media_type, filename = body
                self._send(
                    status,
                    headers={
                        "Content-Type": media_type,
                        "Content-Disposition": f"attachment; filename*=UTF-8''{quote(filename)}",
                    },
                    raw=data,
                )
            else:
                self._send(status, body)
        except ConfluenceHttpError as exc:
            self._send(exc.status, exc.body, exc.headers)
        finally:
            self._record(self._status)

    def _drop(self) -> None:
        self._status = -1
        self.close_connection = True
        with contextlib.suppress(OSError):
            self.connection.shutdown(socket.SHUT_RDWR)

    def _fault(self, rule: dict[str, Any]) -> None:
        kind = rule["kind"]
        if kind == "429":
            headers = {
                "X-RateLimit-Limit": str(rule.get("limit", 20)),
                "X-RateLimit-Remaining": "0",
                "X-RateLimit-Interval-Seconds": str(rule.get("interval", 1)),
                "X-RateLimit-FillRate": str(rule.get("fill_rate", 10)),
            }
            if rule.get("retry_after") is not None:
                headers["Retry-After"] = str(rule["retry_after"])
            self._send(429, error_body(429, "Rate limit exceeded"), headers)
        elif kind == "503":
            headers = {} if rule.get("retry_after") is None else {"Retry-After": str(rule["retry_after"])}
            self._send(503, error_body(503, "Service Unavailable"), headers)
        elif kind == "error":
            status = int(rule.get("status", 500))
            self._send(status, error_body(status, rule.get("message", "Injected error")))
        else:
            self._send(500, error_body(500, f"unknown fault kind {kind}"))

    def _route(self, method: str, path: str) -> tuple[Callable[..., Answer], tuple[str, ...]]:
        allowed = False
        for m, pattern, fn in ROUTES:
            match = pattern.fullmatch(path)
            if match:
                if m == method or (method == "HEAD" and m == "GET"):
                    return fn, match.groups()
                allowed = True
        if allowed:
            raise ConfluenceHttpError(405, f"Method {method} is not allowed for {path}")
        raise ConfluenceHttpError(404, f"null for uri: {self.server.store.base}{path}")

    def _admin(self, method: str, path: str, query: dict[str, str]) -> None:
        store = self.server.store
        if path == "/_emulator/faults":
            if method == "POST":
                store.faults.add(*((self._body() or {}).get("rules", [])))
            elif method == "DELETE":
                store.faults.clear()
            self._send(200, {"rules": store.faults.listing()})
        elif path == "/_emulator/requests" and method == "GET":
            self._send(200, {"requests": store.requests(int(query.get("since", 0))), "seq": store.last_seq})
        elif path == "/_emulator/health":
            self._send(
                200, {"pages": sum(c["type"] == "page" for c in store.content.values()), "spaces": len(store.spaces)}
            )
        else:
            self._send(404, error_body(404, "unknown admin route"))


# ---- routes -----------------------------------------------------------------------------------
Q = dict[str, str]


def content_search(h: Handler, user: str | None, q: Q) -> Answer:
    return 200, h.server.store.api_content_search(user, q)


def site_search(h: Handler, user: str | None, q: Q) -> Answer:
    return 200, h.server.store.api_content_search(user, q, search_api=True)


def content_list(h: Handler, user: str | None, q: Q) -> Answer:
    return 200, h.server.store.api_content_list(user, q)


def content_get(h: Handler, user: str | None, q: Q, cid: str) -> Answer:
    return 200, h.server.store.api_content(user, cid, q)


def child_page(h: Handler, user: str | None, q: Q, cid: str) -> Answer:
    return 200, h.server.store.api_children(user, cid, "page", q)


def child_attachment(h: Handler, user: str | None, q: Q, cid: str) -> Answer:
    return 200, h.server.store.api_children(user, cid, "attachment", q)


def restrictions_all(h: Handler, user: str | None, q: Q, cid: str) -> Answer:
    return 200, h.server.store.api_restrictions(user, cid, None, q)


def restrictions_op(h: Handler, user: str | None, q: Q, cid: str, op: str) -> Answer:
    return 200, h.server.store.api_restrictions(user, cid, op, q)


def restrictions_put(h: Handler, user: str | None, q: Q, cid: str) -> Answer:
    return 200, h.server.store.api_set_restrictions(user, cid, h._body(), replace=True)


def restrictions_post(h: Handler, user: str | None, q: Q, cid: str) -> Answer:
    return 200, h.server.store.api_set_restrictions(user, cid, h._body(), replace=False)


def restrictions_delete(h: Handler, user: str | None, q: Q, cid: str) -> Answer:
    return 200, h.server.store.api_clear_restrictions(user, cid)


def _subject_user(q: Q) -> str:
    name = q.get("userName") or q.get("username")
    if not name:
        raise ConfluenceHttpError(400, "A userName parameter is required")
    return name


def restriction_user_put(h: Handler, user: str | None, q: Q, cid: str, op: str) -> Answer:
    h.server.store.api_restriction_subject(user, cid, op, "user", _subject_user(q), add=True)
    return 200, None


def restriction_user_delete(h: Handler, user: str | None, q: Q, cid: str, op: str) -> Answer:
    h.server.store.api_restriction_subject(user, cid, op, "user", _subject_user(q), add=False)
    return 204, None


def restriction_group_put(h: Handler, user: str | None, q: Q, cid: str, op: str, name: str) -> Answer:
    h.server.store.api_restriction_subject(user, cid, op, "group", name, add=True)
    return 200, None


def restriction_group_delete(h: Handler, user: str | None, q: Q, cid: str, op: str, name: str) -> Answer:
    h.server.store.api_restriction_subject(user, cid, op, "group", name, add=False)
    return 204, None


def spaces(h: Handler, user: str | None, q: Q) -> Answer:
    return 200, h.server.store.api_spaces(user, q)


def space(h: Handler, user: str | None, q: Q, key: str) -> Answer:
    return 200, h.server.store.api_space(user, key, q)


def space_permissions(h: Handler, user: str | None, q: Q, key: str) -> Answer:
    return 200, h.server.store.api_space_permissions(user, key, anonymous=False)


def space_permissions_anonymous(h: Handler, user: str | None, q: Q, key: str) -> Answer:
    return 200, h.server.store.api_space_permissions(user, key, anonymous=True)


def user_get(h: Handler, user: str | None, q: Q) -> Answer:
    return 200, h.server.store.api_user(user, q)


def user_current(h: Handler, user: str | None, q: Q) -> Answer:
    return 200, h.server.store.user_json(user)


def user_memberof(h: Handler, user: str | None, q: Q) -> Answer:
    return 200, h.server.store.api_memberof(user, q)


def groups(h: Handler, user: str | None, q: Q) -> Answer:
    return 200, h.server.store.api_groups(user, q)


def group(h: Handler, user: str | None, q: Q, name: str) -> Answer:
    return 200, h.server.store.api_group(user, name)


def group_members(h: Handler, user: str | None, q: Q, name: str) -> Answer:
    return 200, h.server.store.api_group_members(user, name, q)


def server_information(h: Handler, user: str | None, q: Q) -> Answer:
    return 200, h.server.store.api_server_information()


def json_rpc(h: Handler, user: str | None, q: Q) -> Answer:
    return 200, h.server.store.rpc(user, h._body())


def download(h: Handler, user: str | None, q: Q, page_id: str, filename: str) -> Answer:
    data, media_type = h.server.store.api_attachment_download(user, page_id, filename, q)
    return 200, (data, media_type, filename)


_C = r"/rest/api/content/(\d+)"
ROUTES: list[Route] = [
    (m, re.compile(p), f)
    for m, p, f in [
        ("GET", r"/rest/api/content/search", content_search),
        ("GET", r"/rest/api/search", site_search),
        ("GET", r"/rest/api/content", content_list),
        ("GET", _C, content_get),
        ("GET", rf"{_C}/child/page", child_page),
        ("GET", rf"{_C}/child/attachment", child_attachment),
        ("GET", rf"{_C}/restriction/byOperation", restrictions_all),
        ("GET", rf"{_C}/restriction/byOperation/([^/]+)", restrictions_op),
        ("PUT", rf"{_C}/restriction", restrictions_put),
        ("POST", rf"{_C}/restriction", restrictions_post),
        ("DELETE", rf"{_C}/restriction", restrictions_delete),
        ("PUT", rf"{_C}/restriction/byOperation/([^/]+)/user", restriction_user_put),
        ("DELETE", rf"{_C}/restriction/byOperation/([^/]+)/user", restriction_user_delete),
        ("PUT", rf"{_C}/restriction/byOperation/([^/]+)/group/([^/]+)", restriction_group_put),
        ("DELETE", rf"{_C}/restriction/byOperation/([^/]+)/group/([^/]+)", restriction_group_delete),
        ("GET", r"/rest/api/space", spaces),
        ("GET", r"/rest/api/space/([^/]+)", space),
        ("GET", r"/rest/api/space/([^/]+)/permissions", space_permissions),
        ("GET", r"/rest/api/space/([^/]+)/permissions/anonymous", space_permissions_anonymous),
        ("GET", r"/rest/api/user", user_get),
        ("GET", r"/rest/api/user/current", user_current),
        ("GET", r"/rest/api/user/memberof", user_memberof),
        ("GET", r"/rest/api/group", groups),
        ("GET", r"/rest/api/group/([^/]+)", group),
        ("GET", r"/rest/api/group/([^/]+)/member", group_members),
        ("GET", r"/rest/api/server-information", server_information),
        ("POST", r"/rpc/json-rpc/confluenceservice-v2", json_rpc),
        ("GET", r"/download/attachments/(\d+)/([^/]+)", download),
    ]
]


def serve(
    store: ConfluenceStore, host: str = "127.0.0.1", port: int = 0, *, background: bool = True
) -> ConfluenceServer:
    """Bind and (by default) serve in a daemon thread; ``.url`` for clients, ``.stop()`` to end."""
    server = ConfluenceServer((host, port), store)
    return server.start() if background else server
