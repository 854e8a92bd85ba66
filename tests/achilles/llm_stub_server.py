"""An OpenAI-compatible stub server on loopback, for tests and benchmarks.

Serves ``POST /v1/chat/completions`` (SSE streams only), ``POST /v1/embeddings`` and
``GET /v1/models`` from a thread, on 127.0.0.1 and a free port::

    with StubLLMServer(replies=[StubReply(text="Привет!")], ttft=0.05, token_delay=0.01) as stub:
        spec = ModelSpec("stub", "openai", options={"base_url": stub.base_url})
        ...
        assert stub.requests[0].body["stream"] is True

Chat replies are taken from ``replies`` in order, then from ``responder(body)`` (default: a
fixed "ok"). Every request is kept in ``requests``. Embeddings are the deterministic hash
embedder's vectors, as floats or base64 float32 as the client asks.
"""

from __future__ import annotations

import base64
import json
import struct
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from achilles.llm.builtin import HashEmbeddingProvider


@dataclass(frozen=True)
class StubToolCall:
    """A tool call the stub streams, its JSON ``arguments`` split over several chunks."""

    name: str
    arguments: str | dict[str, Any]
    id: str | None = None


@dataclass(frozen=True)
class StubReply:
    """One scripted answer to a chat request.

    ``status`` other than 200 answers with an OpenAI-style error body instead of a stream.
    ``ttft`` / ``token_delay`` override the server's delays; ``stall_after`` chunks the stream
    stops sending (and holds the connection until the client leaves or the server stops);
    ``raw_data`` replaces the generated chunks with these SSE ``data:`` payloads verbatim.
    ``usage`` is (prompt, completion) tokens, ``"auto"`` to make some up, None to send none.
    """

    text: str = ""
    tool_calls: Sequence[StubToolCall] = ()
    chunk_chars: int = 4
    usage: tuple[int, int] | str | None = "auto"
    status: int = 200
    error_message: str = "stub error"
    ttft: float | None = None
    token_delay: float | None = None
    stall_after: int | None = None
    raw_data: Sequence[str] | None = None
    finish_reason: str | None = None


@dataclass(frozen=True)
class StubRequest:
    """A request the stub received; header names are lower-cased."""

    method: str
    path: str
    headers: dict[str, str]
    body: dict[str, Any]


@dataclass
class StubLLMServer:
    """The stub server; use as a context manager or call ``start()`` / ``stop()``."""

    replies: list[StubReply] = field(default_factory=list)
    responder: Callable[[dict[str, Any]], StubReply] = lambda body: StubReply(text="ok")
    ttft: float = 0.0
    token_delay: float = 0.0
    embedding_dim: int = 16
    embedding_status: int = 200
    model: str = "stub-model"
    requests: list[StubRequest] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # --- lifecycle --------------------------------------------------------------------------

    def start(self) -> StubLLMServer:
        server = ThreadingHTTPServer(("127.0.0.1", 0), _make_handler(self))
        server.daemon_threads = True
        server.block_on_close = False
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever,
            kwargs={"poll_interval": 0.05},
            name="llm-stub",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()  # releases stalled streams
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> StubLLMServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def base_url(self) -> str:
        assert self._server is not None, "start() the stub first"
        return f"http://127.0.0.1:{self._server.server_port}/v1"

    def next_reply(self, body: dict[str, Any]) -> StubReply:
        with self._lock:
            if self.replies:
                return self.replies.pop(0)
        return self.responder(body)

    def record(self, request: StubRequest) -> None:
        with self._lock:
            self.requests.append(request)

    def wait(self, seconds: float) -> bool:
        """Sleep, cut short when the server stops; True if it is stopping."""
        return self._stopping.wait(seconds) if seconds > 0 else self._stopping.is_set()

    # --- payloads ---------------------------------------------------------------------------

    def chat_chunks(self, reply: StubReply, body: dict[str, Any]) -> list[str]:
        if reply.raw_data is not None:
            return list(reply.raw_data)
        created = int(time.time())

        def chunk(delta: dict[str, Any], finish: str | None = None) -> str:
            choice = {"index": 0, "delta": delta, "finish_reason": finish}
            return json.dumps(
                {
                    "id": "chatcmpl-stub",
                    "object": "chat.completion.chunk",
                    "created": created,
                    "model": self.model,
                    "choices": [choice],
                },
                ensure_ascii=False,
            )

        step = max(1, reply.chunk_chars)
        pieces = [reply.text[i : i + step] for i in range(0, len(reply.text), step)]
        out = [chunk({"role": "assistant", "content": ""})]
        out += [chunk({"content": piece}) for piece in pieces]
        for index, call in enumerate(reply.tool_calls):
            arguments = call.arguments
            if not isinstance(arguments, str):
                arguments = json.dumps(arguments, ensure_ascii=False)
            head = {"name": call.name, "arguments": ""}
            out.append(
                chunk(
                    {
                        "tool_calls": [
                            {
                                "index": index,
                                "id": call.id or f"call_stub_{index}",
                                "type": "function",
                                "function": head,
                            }
                        ]
                    }
                )
            )
            for i in range(0, len(arguments), step):
                fragment = {
                    "index": index,
                    "function": {"arguments": arguments[i : i + step]},
                }
                out.append(chunk({"tool_calls": [fragment]}))
        finish = reply.finish_reason or ("tool_calls" if reply.tool_calls else "stop")
        out.append(chunk({}, finish))
        wants_usage = (body.get("stream_options") or {}).get("include_usage")
        if wants_usage and reply.usage is not None:
            if isinstance(reply.usage, tuple):
                prompt, completion = reply.usage
            else:  # "auto": something plausible
                messages = json.dumps(body.get("messages", []), ensure_ascii=False)
                prompt = len(messages) // 4
                completion = len(pieces) + len(reply.tool_calls)
            usage = {
                "prompt_tokens": prompt,
                "completion_tokens": completion,
                "total_tokens": prompt + completion,
            }
            out.append(
                json.dumps(
                    {
                        "id": "chatcmpl-stub",
                        "object": "chat.completion.chunk",
                        "created": created,
                        "model": self.model,
                        "choices": [],
                        "usage": usage,
                    }
                )
            )
        return out

    def embeddings(self, body: dict[str, Any]) -> dict[str, Any]:
        texts = body.get("input", [])
        texts = [texts] if isinstance(texts, str) else texts
        dim = int(body.get("dimensions") or self.embedding_dim)
        vectors = HashEmbeddingProvider(dim=dim).embed([str(t) for t in texts])
        as_base64 = body.get("encoding_format") == "base64"
        data = [
            {
                "object": "embedding",
                "index": i,
                "embedding": base64.b64encode(struct.pack(f"<{dim}f", *v)).decode() if as_base64 else v,
            }
            for i, v in enumerate(vectors)
        ]
        tokens = sum(len(str(t).split()) for t in texts)
        return {
            "object": "list",
            "data": data,
            "model": body.get("model", self.model),
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
        }


def _make_handler(stub: StubLLMServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        # HTTP/1.0: a streamed body simply ends when the connection closes.
        protocol_version = "HTTP/1.0"

        def log_message(self, format: str, *args: Any) -> None:  # keep test output clean
            pass

        def _headers(self) -> dict[str, str]:
            return {name.lower(): value for name, value in self.headers.items()}

        def _body(self) -> dict[str, Any]:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            return json.loads(raw) if raw else {}

        def _json(self, status: int, payload: dict[str, Any]) -> None:
            data = json.dumps(payload, ensure_ascii=False).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _error(self, status: int, message: str) -> None:
            self._json(
                status,
                {
                    "error": {
                        "message": message,
                        "type": "stub_error",
                        "code": str(status),
                    }
                },
            )

        def do_GET(self) -> None:
            stub.record(StubRequest("GET", self.path, self._headers(), {}))
            if self.path.rstrip("/").endswith("/models"):
                self._json(
                    200,
                    {"object": "list", "data": [{"id": stub.model, "object": "model"}]},
                )
            else:
                self._error(404, f"no route {self.path}")

        def do_POST(self) -> None:
            body = self._body()
            stub.record(StubRequest("POST", self.path, self._headers(), body))
            try:
                if self.path.endswith("/chat/completions"):
                    self._chat(body)
                elif self.path.endswith("/embeddings"):
                    if stub.embedding_status != 200:
                        self._error(stub.embedding_status, "stub embeddings error")
                    else:
                        self._json(200, stub.embeddings(body))
                else:
                    self._error(404, f"no route {self.path}")
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (timeouts are what the tests are about)

        def _chat(self, body: dict[str, Any]) -> None:
            reply = stub.next_reply(body)
            if reply.status != 200:
                self._error(reply.status, reply.error_message)
                return
            if not body.get("stream"):
                self._error(400, "the stub serves stream=true only")
                return
            ttft = stub.ttft if reply.ttft is None else reply.ttft
            delay = stub.token_delay if reply.token_delay is None else reply.token_delay
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.end_headers()
            if stub.wait(ttft):
                return
            for sent, data in enumerate(stub.chat_chunks(reply, body)):
                if reply.stall_after is not None and sent >= reply.stall_after:
                    stub.wait(3600)
                    return
                if sent and stub.wait(delay):
                    return
                self.wfile.write(f"data: {data}\n\n".encode())
                self.wfile.flush()
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()

    return Handler
