"""batch_wait (HUB-8) wakes on the finishing commit through Redis pub/sub, not by polling the database."""

import asyncio
import threading
import time

import pytest
from asgiref.sync import sync_to_async
from django.db import close_old_connections, connection

from achilles.errors import NotFound, ValidationFailed
from hub import protocol, services

pytestmark = pytest.mark.django_db(transaction=True)

COMMENT = {"type": "ensure_comment", "key": "AURORA-1", "body": "x"}


def _finish_later(agent, batch_id, delay, finished_at: list):
    def run():
        try:
            time.sleep(delay)
            got = protocol.sync_agent_claim(sync_agent=agent, version=6, launcher_version=None)
            protocol.sync_agent_report(
                sync_agent=agent,
                results=[
                    {"command_id": c["id"], "lease_token": c["lease_token"], "status": "done", "result": {}}
                    for c in got["commands"]
                ],
                rate_limited=[],
            )
            finished_at.append(time.monotonic())
        finally:
            connection.close()

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def test_batch_wait_returns_within_a_second_of_the_finishing_commit(hub_user, sync_agent):
    batch = services.batch_create(user=hub_user, title="one", commands=[{"type": "refresh", "keys": ["AURORA-1"]}])
    finished_at: list[float] = []
    thread = _finish_later(sync_agent, batch.id, 0.5, finished_at)
    started = time.monotonic()
    view = services.batch_wait(user=hub_user, batch_id=batch.id, timeout_minutes=1)
    returned = time.monotonic()
    thread.join()
    assert view.finished and view.state == "done" and not view.timed_out
    assert returned - finished_at[0] < 1.0
    assert returned - started < 5


def test_async_batch_wait_wakes_too(hub_user, sync_agent):
    batch = services.batch_create(user=hub_user, title="one", commands=[{"type": "refresh", "keys": ["AURORA-1"]}])
    finished_at: list[float] = []
    thread = _finish_later(sync_agent, batch.id, 0.5, finished_at)

    async def wait():
        try:
            return await services.batch_wait_async(user=hub_user, batch_id=batch.id, timeout_minutes=1)
        finally:
            # as the end of a request does: asgiref's shared sync thread would keep its connection
            await sync_to_async(close_old_connections)()

    view = asyncio.run(wait())
    returned = time.monotonic()
    thread.join()
    assert view.finished and returned - finished_at[0] < 1.0


def test_batch_wait_returns_at_its_timeout_without_polling_the_database(hub_user):
    from django.test.utils import CaptureQueriesContext

    batch = services.batch_create(user=hub_user, title="one", commands=[COMMENT])
    started = time.monotonic()
    with CaptureQueriesContext(connection) as queries:
        view = services.batch_wait(user=hub_user, batch_id=batch.id, timeout_minutes=0.05)
    assert 2.9 <= time.monotonic() - started < 5
    assert view.timed_out and not view.finished and view.state == "queued"
    # A few reads before and after the sleep, none during it.
    assert len(queries) < 15, [q["sql"] for q in queries]


def test_batch_wait_of_a_finished_batch_returns_at_once(hub_user):
    batch = services.batch_create(user=hub_user, title="one", commands=[COMMENT])
    services.batch_cancel(user=hub_user, batch_id=batch.id)
    started = time.monotonic()
    view = services.batch_wait(user=hub_user, batch_id=batch.id, timeout_minutes=60)
    assert time.monotonic() - started < 0.5 and view.state == "cancelled" and not view.timed_out


@pytest.mark.parametrize("timeout", [0, 61, -1, "10", True, None])
def test_batch_wait_timeout_must_be_within_an_hour(hub_user, timeout):
    batch = services.batch_create(user=hub_user, title="one", commands=[COMMENT])
    with pytest.raises(ValidationFailed):
        services.batch_wait(user=hub_user, batch_id=batch.id, timeout_minutes=timeout)


def test_batch_wait_of_an_unknown_batch_is_404(hub_user):
    with pytest.raises(NotFound):
        services.batch_wait(user=hub_user, batch_id=10**9, timeout_minutes=1)
