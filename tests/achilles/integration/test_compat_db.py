"""The private names of ``achilles.compat`` behave, against the real database, as the code relies on
in the pinned versions: psycopg_pool's unchecked take skips only the health check, and a prefetch
cache filled by hand is Django's own (answered without a statement, dropped by a write)."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group
from django.db import connection
from django.test.utils import CaptureQueriesContext
from psycopg_pool import ConnectionPool

from achilles import compat
from achilles.models import User
from tests.achilles.factories import UserFactory

pytestmark = [pytest.mark.integration]


def _conninfo_kwargs() -> dict:
    params = connection.get_connection_params()
    for key in ("cursor_factory", "context", "prepare_threshold"):
        params.pop(key, None)
    return params


@pytest.mark.django_db
def test_the_unchecked_take_skips_the_pools_check_and_getconn_runs_it():
    checks: list[int] = []

    def check(conn) -> None:
        checks.append(1)
        ConnectionPool.check_connection(conn)

    with ConnectionPool(kwargs=_conninfo_kwargs(), min_size=1, max_size=1, check=check, open=True) as pool:
        pool.wait(timeout=10)
        conn = compat.pool_getconn_unchecked(pool, 5.0)
        try:
            assert conn.execute("SELECT 1").fetchone() == (1,)
        finally:
            pool.putconn(conn)
        assert checks == []

        conn = pool.getconn(timeout=5.0)
        pool.putconn(conn)
        assert checks == [1]
    # a closed pool: the public path, which says the pool is closed
    with pytest.raises(Exception, match="closed"):
        compat.pool_getconn_unchecked(pool, 0.1)


@pytest.mark.django_db
def test_a_hand_filled_prefetch_is_read_without_a_statement_and_dropped_by_a_write():
    owner = UserFactory(username="erin", groups=["hr"])
    user = User.objects.get(pk=owner.pk)
    hr = Group.objects.get(name="hr")
    assert compat.prefetch_cache_get(user, "groups") is None

    compat.prefetch_cache_fill(user, "groups", [hr])
    with CaptureQueriesContext(connection) as captured:
        assert [g.name for g in user.groups.all()] == ["hr"]
        assert compat.prefetch_cache_get(user, "groups") == [hr]
    assert captured.captured_queries == []

    user.groups.add(Group.objects.create(name="legal"))  # Django drops the prefetched groups
    assert compat.prefetch_cache_get(user, "groups") is None
    assert sorted(g.name for g in user.groups.all()) == ["hr", "legal"]


@pytest.mark.django_db
def test_prefetch_cache_get_reads_what_prefetch_related_left():
    UserFactory(username="frank", groups=["finance"])
    user = User.objects.prefetch_related("groups").get(username="frank")
    with CaptureQueriesContext(connection) as captured:
        assert [g.name for g in compat.prefetch_cache_get(user, "groups") or []] == ["finance"]
    assert captured.captured_queries == []
