"""Datetime input the database can store: the type of every datetime an API client sends.

Python takes any UTC offset under 24 hours; PostgreSQL's timestamptz refuses one of 16 hours or more
(``InvalidTimeZoneDisplacementValue``, a 500 when a query parameter carried it). The offsets in use
on Earth run from UTC−12:00 to UTC+14:00: anything else is the client's mistake, a 422 naming the
field, before a query is built.
"""

from __future__ import annotations

import datetime as dt
from typing import Annotated

from pydantic import AfterValidator

MIN_OFFSET = dt.timedelta(hours=-12)
MAX_OFFSET = dt.timedelta(hours=14)


def offset_in_range(value: dt.datetime) -> dt.datetime:
    offset = value.utcoffset()
    if offset is not None and not MIN_OFFSET <= offset <= MAX_OFFSET:
        raise ValueError("the UTC offset must be between -12:00 and +14:00")
    return value


ApiDateTime = Annotated[dt.datetime, AfterValidator(offset_in_range)]
