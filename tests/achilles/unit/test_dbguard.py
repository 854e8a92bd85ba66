"""The connect breaker and the sliced checkout (achilles/dbguard.py), without a database: a fake
clock and a fake pool's ``getconn``."""

from __future__ import annotations

import django.db
import psycopg
import pytest
from psycopg_pool import PoolTimeout

from achilles import errors
from achilles.dbguard import ConnectBreaker, DatabaseUnreachable, checkout

pytestmark = [pytest.mark.unit]


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class Pool:
    """``getconn(timeout)``: a connection, or a PoolTimeout after ``timeout`` (the clock moves on);
    ``on_wait`` runs while a client waits (the pool's worker failing to connect, say)."""

    def __init__(self, clock: Clock, *, answers: list, on_wait=None):
        self.clock, self.answers, self.on_wait, self.waits = clock, answers, on_wait, []

    def getconn(self, timeout: float):
        self.waits.append(round(timeout, 3))
        answer = self.answers.pop(0) if self.answers else None
        if answer is not None:
            return answer
        if self.on_wait is not None:
            self.on_wait()
        self.clock.now += timeout
        raise PoolTimeout(f"couldn't get a connection after {timeout:.2f} sec")


@pytest.fixture
def clock():
    return Clock()


@pytest.fixture
def breaker(clock):
    return ConnectBreaker(retry_every=0.5, clock=clock)


def test_a_closed_breaker_admits_every_caller(breaker):
    assert all(breaker.admit() for _ in range(5))


def test_an_open_breaker_admits_one_probe_per_interval(breaker, clock):
    # given: a connection attempt failed just now
    breaker.failed(OSError("no such socket"))

    # then: callers fail at once until the interval has passed, then one of them tries
    assert [breaker.admit() for _ in range(3)] == [False, False, False]
    clock.now += 0.5
    assert [breaker.admit() for _ in range(3)] == [True, False, False]


def test_a_successful_connect_closes_the_breaker(breaker):
    breaker.failed()
    breaker.succeeded()
    assert not breaker.is_open and breaker.admit()


def test_checkout_waits_for_a_busy_pool_up_to_its_timeout_while_the_database_answers(breaker, clock):
    # given: the pool is exhausted for 0.6 s (the database answers: no failed connect)
    pool = Pool(clock, answers=[None, None, "conn"])

    # when / then: the request keeps waiting in slices and gets its connection
    assert checkout(pool.getconn, timeout=10, breaker=breaker, slice_seconds=0.25) == "conn"
    assert pool.waits == [0.25, 0.25, 0.25]


def test_checkout_gives_up_at_the_pool_timeout(breaker, clock):
    pool = Pool(clock, answers=[])

    with pytest.raises(PoolTimeout):
        checkout(pool.getconn, timeout=0.6, breaker=breaker, slice_seconds=0.25)
    assert pool.waits == [0.25, 0.25, 0.1]


def test_checkout_fails_after_one_slice_once_a_connect_failed(breaker, clock):
    # given: while the request waits, the pool's worker fails to connect (the server is down)
    pool = Pool(clock, answers=[], on_wait=lambda: breaker.failed(OSError("connection refused")))
    started = clock.now

    # then: the request fails after its first slice, not after the pool's 10 s
    with pytest.raises(DatabaseUnreachable):
        checkout(pool.getconn, timeout=10, breaker=breaker, slice_seconds=0.25)
    assert clock.now - started == pytest.approx(0.25)


def test_checkout_fails_at_once_while_the_breaker_is_open(breaker, clock):
    breaker.failed()
    pool = Pool(clock, answers=["conn"])

    with pytest.raises(DatabaseUnreachable):
        checkout(pool.getconn, timeout=10, breaker=breaker)
    assert pool.waits == []  # the pool was not even asked


def test_the_probe_that_gets_a_connection_closes_the_breaker(breaker, clock):
    # given: the database was down, and is back when the interval's probe comes
    breaker.failed()
    clock.now += 0.5
    pool = Pool(clock, answers=["conn"])

    # then: the probe gets its connection and every caller after it is admitted
    assert checkout(pool.getconn, timeout=10, breaker=breaker) == "conn"
    assert not breaker.is_open and breaker.admit()


def test_an_unreachable_database_renders_as_the_503_database_unavailable():
    for cause in (
        DatabaseUnreachable("down"),
        PoolTimeout("couldn't get a connection after 10.00 sec"),
        psycopg.OperationalError("server closed the connection unexpectedly"),
        psycopg.errors.AdminShutdown("terminating connection due to administrator command"),
    ):
        try:
            raise django.db.OperationalError(str(cause)) from cause
        except Exception as wrapped:
            assert errors.render(wrapped).status == 503
            assert errors.render(wrapped).body["code"] == "database_unavailable", cause


def test_a_query_s_own_failure_is_not_an_unreachable_database():
    for cause in (psycopg.errors.UniqueViolation("dup"), psycopg.errors.QueryCanceled("statement timeout")):
        try:
            raise django.db.DatabaseError(str(cause)) from cause
        except Exception as wrapped:
            assert not errors.database_unreachable(wrapped), cause
