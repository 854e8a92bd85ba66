"""The ASGI application's middleware chain without thread hops (issue 15: CPU per chat turn).

``InlineHooksASGIHandler`` builds Django's chain with subclasses whose hooks run on the event loop
(``achilles.inline_middleware``). The same requests through it and through Django's own handler
must answer the same — a sign-in that saves its session (the hook that goes to the thread), CSRF
refusals, a page read with the session, the API — while it crosses to a thread far less often.
"""

from __future__ import annotations

import asyncio
import re
from http.cookies import SimpleCookie

import pytest
from asgiref import sync as asgiref_sync
from django.core.asgi import ASGIHandler

from achilles.inline_middleware import InlineHooksASGIHandler
from achilles.services import api_token_create, user_ensure

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

PASSWORD = "inline-hooks-Pass-42"


async def _call(app, method: str, path: str, *, headers=(), body: bytes = b"") -> tuple[int, dict, bytes]:
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", b"localhost"), *[(k.lower().encode(), v.encode()) for k, v in headers]],
        "client": ("127.0.0.1", 40000),
        "server": ("localhost", 80),
    }
    sent = False
    status, response_headers, chunks = 0, {}, []

    async def receive():
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        await asyncio.sleep(3600)

    async def send(message):
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]
            for name, value in message["headers"]:
                response_headers.setdefault(name.decode().lower(), []).append(value.decode())
        elif message["type"] == "http.response.body":
            chunks.append(message.get("body", b""))

    await app(scope, receive, send)
    return status, response_headers, b"".join(chunks)


def _cookies(headers: dict) -> dict:
    jar = SimpleCookie()
    for value in headers.get("set-cookie", []):
        jar.load(value)
    return {name: morsel.value for name, morsel in jar.items()}


def _session_flow(app, username: str, token: str) -> list[tuple]:
    """A person signs in and opens the chat page; a script calls the API. What each answer was."""

    async def flow():
        seen = []
        status, headers, page = await _call(app, "GET", "/accounts/login/")
        cookies = _cookies(headers)
        seen.append((status, headers.get("x-frame-options"), "csrftoken" in cookies))
        csrf = re.search(rb'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1).decode()
        form = f"username={username}&password={PASSWORD}&csrfmiddlewaretoken={csrf}".encode()
        form_headers = [("content-type", "application/x-www-form-urlencoded"), ("origin", "http://localhost")]
        # without the CSRF cookie: refused
        status, headers, _ = await _call(app, "POST", "/accounts/login/", headers=form_headers, body=form)
        seen.append((status,))
        # with it: signed in, the session saved and its cookie set
        cookie = ("cookie", f"csrftoken={cookies['csrftoken']}")
        status, headers, _ = await _call(app, "POST", "/accounts/login/", headers=[*form_headers, cookie], body=form)
        session = _cookies(headers).get("sessionid")
        seen.append((status, headers.get("location"), session is not None))
        session_cookie = ("cookie", f"sessionid={session}; csrftoken={cookies['csrftoken']}")
        status, headers, _ = await _call(app, "GET", "/chat/", headers=[session_cookie])
        seen.append((status, "Cookie" in ",".join(headers.get("vary", []))))
        # a session POST to the chat without the CSRF header: refused as JSON
        status, _, body = await _call(
            app, "POST", "/api/chat", headers=[session_cookie, ("content-type", "application/json")], body=b"{}"
        )
        seen.append((status, body))
        status, _, body = await _call(app, "GET", "/api/me", headers=[("authorization", f"Bearer {token}")])
        seen.append((status, username.encode() in body))
        return seen

    return asyncio.run(flow())


def test_the_inline_chain_answers_as_djangos_own():
    user, _ = user_ensure(username="inline-hooks")
    user.set_password(PASSWORD)
    user.save()
    token = api_token_create(user=user, name="inline")[1]

    ours = _session_flow(InlineHooksASGIHandler(), "inline-hooks", token)
    django = _session_flow(ASGIHandler(), "inline-hooks", token)

    assert ours == django
    assert ours[0] == (200, ["DENY"], True)
    assert ours[1] == (403,)
    assert ours[2][0] == 302 and ours[2][2]
    assert ours[3] == (200, True)
    assert ours[4][0] == 403


def test_the_inline_chain_crosses_to_a_thread_far_less_often(monkeypatch):
    hops = 0
    call = asgiref_sync.SyncToAsync.__call__

    async def counted(self, *args, **kwargs):
        nonlocal hops
        hops += 1
        return await call(self, *args, **kwargs)

    monkeypatch.setattr(asgiref_sync.SyncToAsync, "__call__", counted)

    def hops_for(app) -> int:
        nonlocal hops
        asyncio.run(_call(app, "GET", "/healthz"))  # warm: first-request work is not the chain's
        hops = 0
        asyncio.run(_call(app, "GET", "/healthz"))
        return hops

    ours, django = hops_for(InlineHooksASGIHandler()), hops_for(ASGIHandler())
    assert django - ours >= 10
