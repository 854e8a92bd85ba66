"""``audit_record_capped``: a rate-capped append in one round trip (the withheld-hint policy's)."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.utils import timezone

from achilles.audit import audit_record_capped
from achilles.middleware import request_id_var
from achilles.models import AuditEvent

LOCK = (0x6B73, 4242)


def _capped(user_id, limit=2, details=None):
    return audit_record_capped(
        user_id=user_id,
        action="withheld_hint",
        over_action="withheld_hint_suppressed",
        limit=limit,
        since=timezone.now() - timedelta(hours=1),
        lock=LOCK,
        target="knowledge.search",
        details=details or {"query": "q"},
        over_details={**(details or {"query": "q"}), "limit_per_hour": limit},
    )


@pytest.mark.django_db
def test_the_action_until_the_limit_then_its_twin_with_actor_details_and_request_id(user):
    token = request_id_var.set("req-7")
    try:
        outcomes = [
            _capped(user.pk, details={"query": "зарплата", "withheld": [{"source_system": "hr"}]}) for _ in range(3)
        ]
    finally:
        request_id_var.reset(token)
    assert outcomes == [True, True, False]
    events = list(
        AuditEvent.objects.order_by("id").values_list("action", "actor_id", "actor", "target", "details", "request_id")
    )
    hint = (
        "withheld_hint",
        user.pk,
        "alice",
        "knowledge.search",
        {"query": "зарплата", "withheld": [{"source_system": "hr"}]},
        "req-7",
    )
    assert events[:2] == [hint, hint]
    assert events[2] == (
        "withheld_hint_suppressed",
        user.pk,
        "alice",
        "knowledge.search",
        {"query": "зарплата", "withheld": [{"source_system": "hr"}], "limit_per_hour": 2},
        "req-7",
    )


@pytest.mark.django_db
def test_anonymous_callers_share_one_bucket_and_old_events_do_not_count(user):
    assert [_capped(None) for _ in range(3)] == [True, True, False]
    assert _capped(user.pk) is True  # a user is not in the anonymous bucket
    assert set(AuditEvent.objects.filter(actor_id=None).values_list("actor", flat=True)) == {"anonymous"}
    past = audit_record_capped(
        user_id=None,
        action="withheld_hint",
        over_action="withheld_hint_suppressed",
        limit=2,
        since=timezone.now() + timedelta(minutes=1),
        lock=LOCK,
    )
    assert past is True  # nothing since a moment ahead: under the limit again


@pytest.mark.django_db(transaction=True)
def test_concurrent_callers_never_exceed_the_limit(user):
    """Eight threads, each its own connection, against a limit of three: exactly three pass."""
    barrier = threading.Barrier(8)
    outcomes: list[bool] = []

    def call():
        try:
            barrier.wait()
            outcomes.append(_capped(user.pk, limit=3))
        finally:
            connection.close()

    threads = [threading.Thread(target=call) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(outcomes) == [False] * 5 + [True] * 3
    assert AuditEvent.objects.filter(action="withheld_hint", actor_id=user.pk).count() == 3


def _wal_writes() -> int:
    """WAL writes this connection's backend made itself (a commit waiting for its flush makes one)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_force_next_flush()")
        cursor.execute(
            "SELECT writes FROM pg_stat_get_backend_io(pg_backend_pid()) WHERE object = 'wal' AND context = 'normal'"
        )
        return cursor.fetchone()[0]


@pytest.mark.django_db(transaction=True)
def test_the_twin_commits_without_waiting_for_the_wal_flush_the_action_waits(user):
    # given: the limit reached by one hint (a release, durable: its commit writes the WAL itself)
    before = _wal_writes()
    assert _capped(user.pk, limit=1) is True
    released = _wal_writes()
    # when: the next call is over the limit
    assert _capped(user.pk, limit=1) is False
    # then: its twin committed asynchronously (no WAL write of its own), and is there for the count
    assert released > before
    assert _wal_writes() == released
    assert AuditEvent.objects.filter(action="withheld_hint_suppressed", actor_id=user.pk).count() == 1
    with connection.cursor() as cursor:
        cursor.execute("SHOW synchronous_commit")
        assert cursor.fetchone()[0] == "on"  # for that transaction alone


@pytest.mark.django_db(transaction=True)
def test_inside_the_callers_transaction_the_twin_leaves_its_commit_alone(user):
    with transaction.atomic(), connection.cursor() as cursor:
        assert [_capped(user.pk, limit=0) for _ in range(2)] == [False, False]
        cursor.execute("SHOW synchronous_commit")
        assert cursor.fetchone()[0] == "on"  # the caller's other writes stay durable
