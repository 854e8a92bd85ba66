"""Report periods in the organisation's time zone: pure date arithmetic, no ORM.

A week is the budget's week (``agents.schedule.week_bounds``: Monday 00:00 local), a month and a
quarter are calendar ones; every period is a closed range of local dates, the roll-up's days.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, timedelta
from zoneinfo import ZoneInfo

from agents.schedule import week_bounds

PERIOD_KINDS = ("week", "month", "quarter", "custom")
MAX_PERIOD_DAYS = 731


@dataclass(frozen=True)
class Period:
    """[start, end] as local dates (both included)."""

    kind: str
    start: date
    end: date

    @property
    def days(self) -> list[date]:
        return [self.start + timedelta(days=i) for i in range((self.end - self.start).days + 1)]


def week_of(tz_name: str, now: datetime) -> Period:
    start, end = week_bounds(tz_name, now)
    zone = ZoneInfo(tz_name)
    return Period("week", start.astimezone(zone).date(), (end.astimezone(zone) - timedelta(days=1)).date())


def month_of(tz_name: str, now: datetime) -> Period:
    today = now.astimezone(ZoneInfo(tz_name)).date()
    start = today.replace(day=1)
    following = (start + timedelta(days=32)).replace(day=1)
    return Period("month", start, following - timedelta(days=1))


def quarter_of(tz_name: str, now: datetime) -> Period:
    today = now.astimezone(ZoneInfo(tz_name)).date()
    first_month = 3 * ((today.month - 1) // 3) + 1
    start = date(today.year, first_month, 1)
    following = date(today.year + 1, 1, 1) if first_month == 10 else date(today.year, first_month + 3, 1)
    return Period("quarter", start, following - timedelta(days=1))


def period_for(kind: str, *, tz_name: str, now: datetime, start: date | None = None, end: date | None = None) -> Period:
    """The period a picker names; ``custom`` takes ``start`` and ``end`` (checked by the caller)."""
    if kind == "month":
        return month_of(tz_name, now)
    if kind == "quarter":
        return quarter_of(tz_name, now)
    if kind == "custom" and start is not None and end is not None:
        return Period("custom", start, end)
    return week_of(tz_name, now)
