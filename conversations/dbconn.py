"""Give the database connection back between the steps of a stream.

A streamed turn lives for seconds; Django only returns a request's connection (to the pool)
when the request finishes. Holding it across model rounds would pin one connection per open
stream, so each sync step of a turn hands its connection back as soon as it is done. Inside a
transaction (a test's, or a caller's atomic block) the connection is left alone.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import ParamSpec, TypeVar

from asgiref.sync import sync_to_async
from django.db import connection

P = ParamSpec("P")
R = TypeVar("R")


def release_connection() -> None:
    if not connection.in_atomic_block:
        connection.close()


def released(fn: Callable[P, R]) -> Callable[P, R]:
    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return fn(*args, **kwargs)
        finally:
            release_connection()

    return wrapper


def db_step(fn: Callable[P, R]):
    """``await db_step(fn)(...)``: run ``fn`` in the request's thread, then release the connection."""
    return sync_to_async(released(fn))
