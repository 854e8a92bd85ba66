"""``achilles.prepared``: statements of a multi-statement message prepared once per connection."""

from __future__ import annotations

import pytest
from django.db import DatabaseError, connection, transaction

from achilles import prepared

STATEMENT = "SELECT n, %(label)s::text AS label FROM generate_series(1, %(upto)s) AS n WHERE n %% 2 = 1"
OTHER = "SELECT %(label)s::text || '!'"


def _held() -> set[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT name FROM pg_prepared_statements")
        return {row[0] for row in cursor.fetchall()}


class _Counting:
    """A cursor that counts the messages sent through it."""

    def __init__(self, cursor):
        self.cursor = cursor.cursor
        self._wrapped = cursor
        self.sent: list[str] = []

    def execute(self, sql, params=None):
        self.sent.append(sql)
        return self._wrapped.execute(sql, params)


def test_shape_numbers_parameters_and_unescapes_percent():
    name, prepare, execute = prepared.shape(STATEMENT)
    assert prepare == (
        f"PREPARE {name} AS SELECT n, $1::text AS label FROM generate_series(1, $2) AS n WHERE n % 2 = 1"
    )
    assert execute == f"EXECUTE {name}(%(label)s, %(upto)s)"
    assert prepared.shape(STATEMENT)[0] == name and prepared.shape(OTHER)[0] != name


@pytest.mark.django_db(transaction=True)
def test_prepared_once_per_connection_same_rows(monkeypatch):
    monkeypatch.setattr(prepared, "ENABLED", True)
    name = prepared.shape(STATEMENT)[0]
    params = {"label": "x", "upto": 7}
    with connection.cursor() as cursor:
        cursor.execute(STATEMENT + ";" + OTHER, params)
        plain = cursor.fetchall()
        cursor.nextset()
        plain_other = cursor.fetchall()
        counting = _Counting(cursor)
        for _ in range(3):
            prepared.execute(counting, [(STATEMENT, True), (OTHER, False)], params)
            assert cursor.fetchall() == plain == [(1, "x"), (3, "x"), (5, "x"), (7, "x")]
            cursor.nextset()
            assert cursor.fetchall() == plain_other
    # one PREPARE, then the message three times; the statement marked False is never prepared
    assert [sql.startswith("PREPARE") for sql in counting.sent] == [True, False, False, False]
    assert name in _held() and prepared.shape(OTHER)[0] not in _held()


@pytest.mark.django_db(transaction=True)
def test_lost_statements_are_prepared_again_outside_a_transaction(monkeypatch):
    monkeypatch.setattr(prepared, "ENABLED", True)
    params = {"label": "y", "upto": 3}
    with connection.cursor() as cursor:
        prepared.execute(cursor, [(STATEMENT, True)], params)
        cursor.execute("DEALLOCATE ALL")  # someone else's reset: our bookkeeping is now stale
        prepared.execute(cursor, [(STATEMENT, True)], params)
        assert cursor.fetchall() == [(1, "y"), (3, "y")]
    # inside a transaction the failed statement aborted it: the error is raised, the bookkeeping
    # forgotten, and the next transaction prepares again
    with connection.cursor() as cursor:
        cursor.execute("DEALLOCATE ALL")
    with pytest.raises(DatabaseError), transaction.atomic(), connection.cursor() as cursor:
        prepared.execute(cursor, [(STATEMENT, True)], params)
    with transaction.atomic(), connection.cursor() as cursor:
        prepared.execute(cursor, [(STATEMENT, True)], params)
        assert cursor.fetchall() == [(1, "y"), (3, "y")]


@pytest.mark.django_db(transaction=True)
def test_a_rolled_back_transaction_keeps_what_it_prepared(monkeypatch):
    """PREPARE is not transactional: what the bookkeeping says stays true after a rollback."""
    monkeypatch.setattr(prepared, "ENABLED", True)
    with pytest.raises(RuntimeError), transaction.atomic(), connection.cursor() as cursor:
        prepared.execute(cursor, [(OTHER, True)], {"label": "z"})
        raise RuntimeError("roll back")
    with connection.cursor() as cursor:
        counting = _Counting(cursor)
        prepared.execute(counting, [(OTHER, True)], {"label": "z"})
        assert cursor.fetchall() == [("z!",)]
    assert len(counting.sent) == 1 and counting.sent[0].startswith("EXECUTE")


@pytest.mark.django_db(transaction=True)
def test_beyond_the_limit_and_when_off_statements_go_as_they_are(monkeypatch):
    monkeypatch.setattr(prepared, "ENABLED", True)
    monkeypatch.setattr(prepared, "PREPARED_PER_CONNECTION", 1)
    with connection.cursor() as cursor:
        cursor.execute("DEALLOCATE ALL")
        prepared.forget(cursor)
        counting = _Counting(cursor)
        prepared.execute(counting, [(STATEMENT, True), (OTHER, True)], {"label": "w", "upto": 1})
        assert cursor.fetchall() == [(1, "w")]
        assert counting.sent[-1].startswith("EXECUTE") and counting.sent[-1].endswith(OTHER)
        monkeypatch.setattr(prepared, "ENABLED", False)
        prepared.execute(counting, [(STATEMENT, True)], {"label": "w", "upto": 1})
        assert counting.sent[-1] == STATEMENT


@pytest.mark.django_db(transaction=True)
def test_off_by_setting_as_behind_a_transaction_pooler(monkeypatch, settings):
    """DB_PREPARED_STATEMENTS=false (or no pool: DB_POOL_MAX_SIZE=0) sends every statement as it is."""
    monkeypatch.setattr(prepared, "ENABLED", True)
    settings.DB_PREPARED_STATEMENTS = False
    with connection.cursor() as cursor:
        counting = _Counting(cursor)
        prepared.execute(counting, [(STATEMENT, True), (OTHER, True)], {"label": "v", "upto": 1})
        assert cursor.fetchall() == [(1, "v")]
    assert counting.sent == [STATEMENT + ";" + OTHER]
