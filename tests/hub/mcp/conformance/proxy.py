"""A small header-adding proxy for the MCP conformance suite: the suite speaks to ``/mcp`` without
credentials, the hub wants ``Authorization: Bearer ach_…`` on every call. Streams both ways (the GET
stream is SSE), forwards every other header unchanged. Stdlib server + httpx; one thread a request."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx

HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "host"}


class HeaderProxy(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, upstream: str, token: str) -> None:
        self.upstream = upstream.rstrip("/")
        self.client = httpx.Client(timeout=httpx.Timeout(30, read=120))
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:
                pass

            def _forward(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP}
                headers["Authorization"] = f"Bearer {token}"
                path = self.path if self.path.startswith("/mcp/") else self.path.replace("/mcp", "/mcp/", 1)
                request = proxy.client.build_request(self.command, proxy.upstream + path, headers=headers, content=body)
                response = proxy.client.send(request, stream=True)
                try:
                    self.send_response(response.status_code)
                    for k, v in response.headers.items():
                        if k.lower() not in HOP:
                            self.send_header(k, v)
                    self.send_header("Transfer-Encoding", "chunked")
                    self.end_headers()
                    try:
                        for chunk in response.iter_raw():
                            self.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
                            self.wfile.flush()
                        self.wfile.write(b"0\r\n\r\n")
                    except (BrokenPipeError, ConnectionResetError, httpx.HTTPError):
                        self.close_connection = True  # either side hung up (the GET stream at the end)
                finally:
                    response.close()

            do_GET = do_POST = do_DELETE = _forward  # noqa: N815

        super().__init__(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server_address[1]}/mcp"
        threading.Thread(target=self.serve_forever, name="mcp-header-proxy", daemon=True).start()

    def close(self) -> None:
        self.shutdown()
        self.server_close()
        self.client.close()
