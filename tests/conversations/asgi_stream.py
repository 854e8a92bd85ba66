"""An httpx transport that streams an in-process ASGI app's response chunk by chunk.

httpx's own ``ASGITransport`` buffers the whole body, which hides streaming. Here each
``http.response.body`` chunk reaches the client as it is sent, and closing the response
makes the app's ``receive()`` answer ``http.disconnect`` — what daphne does when a client
goes away — so the server-side cancellation path runs for real.
"""

from __future__ import annotations

import asyncio
import contextlib

import httpx


class StreamingASGITransport(httpx.AsyncBaseTransport):
    def __init__(self, app, client=("127.0.0.1", 50000)):
        self.app = app
        self.client = client
        self.tasks: list[asyncio.Task] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        body = b"".join([chunk async for chunk in request.stream])
        chunks: asyncio.Queue = asyncio.Queue()
        started = asyncio.Event()
        disconnected = asyncio.Event()
        head: dict = {}
        body_sent = False

        scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": request.method,
            "headers": [(k.lower(), v) for k, v in request.headers.raw],
            "scheme": request.url.scheme,
            "path": request.url.path,
            "raw_path": request.url.raw_path.split(b"?")[0],
            "query_string": request.url.query,
            "server": (request.url.host, request.url.port or 80),
            "client": self.client,
            "root_path": "",
        }

        async def receive():
            nonlocal body_sent
            if not body_sent:
                body_sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            await disconnected.wait()
            return {"type": "http.disconnect"}

        async def send(message):
            if message["type"] == "http.response.start":
                head["status"] = message["status"]
                head["headers"] = message.get("headers", [])
                started.set()
            elif message["type"] == "http.response.body":
                if message.get("body"):
                    await chunks.put(message["body"])
                if not message.get("more_body", False):
                    await chunks.put(None)

        task = asyncio.create_task(self.app(scope, receive, send))
        self.tasks.append(task)
        waiter = asyncio.create_task(started.wait())
        await asyncio.wait([task, waiter], return_when=asyncio.FIRST_COMPLETED)
        if not started.is_set():
            waiter.cancel()
            task.result()  # re-raise the app's error
            raise RuntimeError("app finished without a response")

        class Stream(httpx.AsyncByteStream):
            async def __aiter__(self):
                while True:
                    chunk = await chunks.get()
                    if chunk is None:
                        return
                    yield chunk

            async def aclose(self):
                disconnected.set()
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(asyncio.shield(task), 10)

        return httpx.Response(head["status"], headers=head["headers"], stream=Stream())


def parse_sse(text: str) -> list[tuple[str, dict]]:
    import json

    events = []
    for block in text.split("\n\n"):
        if not block.strip():
            continue
        name, data = "message", ""
        for line in block.splitlines():
            if line.startswith("event:"):
                name = line[6:].strip()
            elif line.startswith("data:"):
                data += line[5:].strip()
        events.append((name, json.loads(data) if data else {}))
    return events
