"""The REST API's one list contract: keyset pages behind an opaque cursor.

Every list route takes :class:`ListParams` (``cursor``, ``limit``: default ``DEFAULT_LIMIT``, at
most ``MAX_LIMIT``; out of bounds → 422 ``validation_error``) and answers :class:`Page`,
``{"items": [...], "next_cursor": str | null}``. ``next_cursor`` is null on the last page; passing
it back continues right after the last item seen. Pages are keyset slices of a total order ending
in a unique column (``WHERE (k1, …, id) after (v1, …, id0) ORDER BY k1, …, id LIMIT n + 1``), never
OFFSET: a row inserted or deleted between two fetches shifts nothing, so a walk of all pages sees
every row that existed throughout exactly once.

The cursor is the keyset of the last item, JSON in url-safe base64, signed with the list's own
salt: a tampered cursor, or one from another list (or another order of the same list), is 422
``bad_cursor`` — never a 500, never a page of someone else's list.

Selectors call :func:`keyset_page`; thin API functions wrap its items in their schema with
``Page[T]``.
"""

from __future__ import annotations

import datetime as dt
import json
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from django.core import signing
from django.db import models
from django.db.models import Model, Q, QuerySet
from ninja import Schema
from pydantic import Field

from achilles.errors import ValidationFailed

DEFAULT_LIMIT = 50
MAX_LIMIT = 200
MAX_CURSOR_LENGTH = 1000

T = TypeVar("T")
U = TypeVar("U")


class ListParams(Schema):
    """The query parameters of every list route."""

    cursor: str | None = Field(default=None, description="`next_cursor` of the previous page; omit for the first page.")
    limit: int = Field(
        default=DEFAULT_LIMIT,
        ge=1,
        le=MAX_LIMIT,
        description=f"Items per page, 1–{MAX_LIMIT} (default {DEFAULT_LIMIT}).",
    )


class Page(Schema, Generic[T]):
    """The envelope of every list route."""

    items: list[T]
    next_cursor: str | None = Field(description="Pass back as `cursor` for the next page; null on the last page.")


@dataclass(frozen=True)
class Window(Generic[U]):
    """One page as a selector returns it: rows (or whatever they were mapped to) and the next cursor."""

    items: list[U]
    next_cursor: str | None

    def map(self, convert: Callable[[U], Any]) -> Window:
        return Window(items=[convert(item) for item in self.items], next_cursor=self.next_cursor)


class BadCursor(ValidationFailed):
    code = "bad_cursor"


class _KeysetEncoder(json.JSONEncoder):
    """Full-precision values (Django's encoder cuts datetimes to milliseconds: rows of the same
    millisecond would then be skipped or repeated)."""

    def default(self, o: Any) -> Any:
        if isinstance(o, (dt.datetime, dt.date)):
            return o.isoformat()
        if isinstance(o, uuid.UUID):
            return str(o)
        return super().default(o)


class _KeysetSerializer:
    """``signing``'s serializer protocol; UTF-8 (a keyset may hold a name in any script)."""

    def dumps(self, obj: Any) -> bytes:
        return json.dumps(obj, cls=_KeysetEncoder, separators=(",", ":"), ensure_ascii=False).encode()

    def loads(self, data: bytes) -> Any:
        return json.loads(data.decode())


def _signer(scope: str) -> signing.Signer:
    return signing.Signer(salt=f"achilles.pagination:{scope}", sep=".")


def _bad_cursor() -> BadCursor:
    return BadCursor("The cursor is not one this list issued; start again without it.", field="cursor")


def cursor_decode(cursor: str, *, scope: str, model: type[Model], keys: Sequence[str]) -> list[Any]:
    """The keyset values a cursor of list ``scope`` carries, typed by ``model``'s fields; 422 otherwise."""
    if len(cursor) > MAX_CURSOR_LENGTH:  # longer than any keyset this module signs
        raise _bad_cursor()
    try:
        values = _signer(scope).unsign_object(cursor, serializer=_KeysetSerializer)
    except (signing.BadSignature, ValueError, TypeError, UnicodeDecodeError):
        raise _bad_cursor() from None
    if not isinstance(values, list) or len(values) != len(keys):
        raise _bad_cursor()
    typed = []
    for key, value in zip(keys, values, strict=True):
        column = model._meta.get_field(key.lstrip("-"))
        if not isinstance(column, models.Field):  # a programming error: keys name concrete columns
            raise TypeError(f"{model.__name__}.{key} is not a column")
        try:
            typed.append(column.to_python(value))
        except Exception:  # a value the column cannot hold: only a forged cursor gets here
            raise _bad_cursor() from None
    return typed


def cursor_encode(row: Model, *, scope: str, keys: Sequence[str]) -> str:
    values = [getattr(row, key.lstrip("-")) for key in keys]
    return _signer(scope).sign_object(values, serializer=_KeysetSerializer)


def _after(keys: Sequence[str], values: Sequence[Any]) -> Q:
    """Rows strictly after ``values`` in the order ``keys`` (``-`` = descending): lexicographic."""
    after = Q()
    for i, key in enumerate(keys):
        clause = Q(**{f"{key.lstrip('-')}__{'lt' if key.startswith('-') else 'gt'}": values[i]})
        for prior, value in zip(keys[:i], values[:i], strict=True):
            clause &= Q(**{prior.lstrip("-"): value})
        after = clause if i == 0 else after | clause
    return after


def keyset_page(
    queryset: QuerySet,
    *,
    scope: str,
    keys: Sequence[str],
    cursor: str | None,
    limit: int,
    ordering: Sequence[Any] | None = None,
) -> Window:
    """One page of ``queryset`` in the order ``keys`` (model field names, ``-`` for descending; the last
    one unique and non-null), after ``cursor``. ``ordering`` replaces the ORDER BY with equivalent
    expressions when the planner needs them (same order, other plan). One query: LIMIT n + 1 tells
    whether another page follows."""
    if limit < 1:
        raise ValidationFailed(f"limit is 1–{MAX_LIMIT}", field="limit")
    if cursor:
        queryset = queryset.filter(_after(keys, cursor_decode(cursor, scope=scope, model=queryset.model, keys=keys)))
    rows = list(queryset.order_by(*(ordering or keys))[: limit + 1])
    if len(rows) <= limit:
        return Window(items=rows, next_cursor=None)
    rows = rows[:limit]
    return Window(items=rows, next_cursor=cursor_encode(rows[-1], scope=scope, keys=keys))


def values_cursor_encode(values: Sequence[Any], *, scope: str) -> str:
    """A cursor over plain keyset values (a list of aggregates has no model row to name)."""
    return _signer(scope).sign_object(list(values), serializer=_KeysetSerializer)


def values_cursor_decode(cursor: str, *, scope: str, count: int) -> list[Any]:
    """The ``count`` JSON values a :func:`values_cursor_encode` cursor of ``scope`` carries; 422 otherwise."""
    if len(cursor) > MAX_CURSOR_LENGTH:
        raise _bad_cursor()
    try:
        values = _signer(scope).unsign_object(cursor, serializer=_KeysetSerializer)
    except (signing.BadSignature, ValueError, TypeError, UnicodeDecodeError):
        raise _bad_cursor() from None
    if not isinstance(values, list) or len(values) != count:
        raise _bad_cursor()
    return values
