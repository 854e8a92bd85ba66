"""Datetime input the database can store: the type of every datetime an API client sends.

Python takes any UTC offset under 24 hours; PostgreSQL's timestamptz refuses one of 16 hours or more
(``InvalidTimeZoneDisplacementValue``, a 500 when a query parameter carried it). The offsets in use
on Earth run from UTC−12:00 to UTC+14:00: anything else is the client's mistake, a 422 naming the
field, before a query is built.

And text only, in ISO 8601: pydantic reads a number as a Unix timestamp, so ``updated_since=20200101``
meant 1970-08-22 and ``due_from=0`` 1970-01-01 — an answer to a question nobody asked.
"""

from __future__ import annotations

import datetime as dt
from typing import Annotated, Any

from pydantic import AfterValidator, BeforeValidator

MIN_OFFSET = dt.timedelta(hours=-12)
MAX_OFFSET = dt.timedelta(hours=14)


def offset_in_range(value: dt.datetime) -> dt.datetime:
    offset = value.utcoffset()
    if offset is not None and not MIN_OFFSET <= offset <= MAX_OFFSET:
        raise ValueError("the UTC offset must be between -12:00 and +14:00")
    return value


def iso_text(value: Any) -> Any:
    """Refuse a number (or a string of one) where an ISO 8601 date or datetime is meant."""
    if isinstance(value, bool | int | float):
        raise ValueError("an ISO 8601 date or datetime, not a number")
    if isinstance(value, str):
        text = value.strip().lstrip("+-")
        if text.replace(".", "", 1).isdigit():
            raise ValueError("an ISO 8601 date or datetime (2026-01-31, 2026-01-31T09:00:00+03:00), not a number")
    return value


ApiDateTime = Annotated[dt.datetime, BeforeValidator(iso_text), AfterValidator(offset_in_range)]
ApiDate = Annotated[dt.date, BeforeValidator(iso_text)]
