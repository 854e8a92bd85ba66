"""Server-side prepared statements for hot statements sent as multi-statement messages.

Django's PostgreSQL cursors bind parameters on the client (psycopg's ``ClientCursor``) and never
prepare, and psycopg's own ``prepare=True`` needs the extended protocol — one statement per
message. A search sends several statements per message to save round trips, so here a statement
becomes SQL ``PREPARE name AS …`` (once per connection) and ``EXECUTE name(%(param)s, …)`` in the
message: the client still binds the values, and PostgreSQL skips parsing and, once it settles on
a generic plan (``plan_cache_mode = auto``: after five custom plans, when the generic one costs no
more), planning — about 0.2–0.7 ms a statement for search's lexical statements at 100k chunks.

Prepared statements belong to a server session and survive rollbacks; which names a connection
holds is kept per psycopg connection object (a new connection is a new object). Should a session
lose them anyway (``DISCARD ALL`` by someone else), ``execute`` prepares them again and retries
once outside a transaction — a message's statements run in one implicit transaction, so nothing of
the failed one was kept.
"""

from __future__ import annotations

import functools
import hashlib
import re
import threading
import weakref
from collections.abc import Sequence
from typing import Any

from django.conf import settings
from django.db import connection as default_connection
from django.db import utils as db_utils
from psycopg import errors as pg_errors

# Names a connection may hold; beyond it a statement is sent as it is (a bound on server memory
# for statements whose text varies, like the lexical levels by the query's word count).
PREPARED_PER_CONNECTION = 256
ENABLED = True  # the tests and measurements compare both ways; operators: DB_PREPARED_STATEMENTS

_PARAM = re.compile(r"%\((\w+)\)s")
_prepared: weakref.WeakKeyDictionary[Any, set[str]] = weakref.WeakKeyDictionary()
# the map is shared by the request threads and the search's threads beside them; each connection's
# set is used by the one thread that holds the connection
_prepared_lock = threading.Lock()


@functools.lru_cache(maxsize=2048)
def shape(sql: str) -> tuple[str, str, str]:
    """(name, PREPARE text, EXECUTE text with ``%(param)s`` placeholders) of one statement that
    takes named parameters; the name is a hash of the text, so equal texts share it."""
    names = list(dict.fromkeys(_PARAM.findall(sql)))
    index = {name: position for position, name in enumerate(names, start=1)}
    body = _PARAM.sub(lambda m: f"${index[m.group(1)]}", sql).replace("%%", "%")
    name = "ach_" + hashlib.sha1(sql.encode()).hexdigest()[:24]
    arguments = f"({', '.join(f'%({n})s' for n in names)})" if names else ""
    return name, f"PREPARE {name} AS {body}", f"EXECUTE {name}{arguments}"


def _raw(cursor: Any) -> Any:
    """The psycopg connection under a Django cursor wrapper or a psycopg cursor."""
    return getattr(cursor, "cursor", cursor).connection


def executable(cursor: Any, statements: Sequence[tuple[str, bool]]) -> list[str]:
    """``statements`` — (one statement with ``%(param)s`` placeholders, whether to prepare it) —
    as EXECUTEs of statements prepared on ``cursor``'s connection, the others as they are; those the
    connection does not hold yet are prepared first, in one round trip. A statement whose plan
    decides its result (an approximate index, a LIMIT without a total order) is not to be
    prepared: a generic plan would change it. Nothing is prepared when preparing is off or the
    connection holds its limit."""
    if not (ENABLED and settings.DB_PREPARED_STATEMENTS):
        return [sql for sql, _ in statements]
    raw = _raw(cursor)
    with _prepared_lock:
        held = _prepared.get(raw)
        if held is None:
            held = _prepared[raw] = set()
    out: list[str] = []
    missing: list[str] = []
    for sql, prepare in statements:
        if not prepare:
            out.append(sql)
            continue
        name, preparing, execute = shape(sql)
        if name in held:
            out.append(execute)
        elif len(held) < PREPARED_PER_CONNECTION:
            missing.append(preparing)
            held.add(name)
            out.append(execute)
        else:
            out.append(sql)
    if missing:
        try:
            cursor.execute(";".join(missing))
        except Exception:
            held.difference_update(shape_name(p) for p in missing)
            raise
    return out


def shape_name(prepare: str) -> str:
    return prepare.split(" ", 2)[1]


def forget(cursor: Any) -> None:
    """Forget what ``cursor``'s connection holds (after the server lost it)."""
    with _prepared_lock:
        _prepared.pop(_raw(cursor), None)


def _lost(exc: BaseException) -> bool:
    cause = exc if isinstance(exc, pg_errors.Error) else exc.__cause__
    # a missing name, or a plan whose result type a schema change altered
    return isinstance(cause, (pg_errors.InvalidSqlStatementName, pg_errors.FeatureNotSupported))


def execute(
    cursor: Any, statements: Sequence[tuple[str, bool]], params: dict[str, Any], *, in_transaction: bool | None = None
) -> None:
    """Run ``statements`` as one message on ``cursor``, each prepared (``executable``). When the
    server no longer holds one and the connection is not inside a transaction
    (``in_transaction``; by default that of Django's connection when ``cursor`` is its cursor),
    prepare again and retry once."""
    try:
        cursor.execute(";".join(executable(cursor, statements)), params)
    except (db_utils.Error, pg_errors.Error) as exc:
        if not (ENABLED and settings.DB_PREPARED_STATEMENTS) or not _lost(exc):
            raise
        if in_transaction is None:
            in_transaction = default_connection.in_atomic_block or not default_connection.get_autocommit()
        forget(cursor)
        if in_transaction:
            raise
        cursor.execute("DEALLOCATE ALL")
        cursor.execute(";".join(executable(cursor, statements)), params)
