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


@dataclass(frozen=True)
class Spans:
    """A period cut into whole calendar months, whole weeks (Monday-based) and single days — each day
    of the period in exactly one piece; ranges are half-open [start, end)."""

    months: list[tuple[date, date]]
    weeks: list[tuple[date, date]]
    days: list[tuple[date, date]]


def _next_month(day: date) -> date:
    return (day.replace(day=1) + timedelta(days=32)).replace(day=1)


def _weeks_and_days(start: date, end: date, spans: Spans) -> None:
    """[start, end): whole weeks inside it, the days around them."""
    if start >= end:
        return
    first_monday = start + timedelta(days=(7 - start.weekday()) % 7)
    last_monday = end - timedelta(days=end.weekday())
    if first_monday < last_monday:
        spans.weeks.append((first_monday, last_monday))
        for a, b in ((start, first_monday), (last_monday, end)):
            if a < b:
                spans.days.append((a, b))
    else:
        spans.days.append((start, end))


def period_spans(start: date, end: date) -> Spans:
    """[start, end] (both included) as months, weeks and days for the roll-ups to read."""
    stop = end + timedelta(days=1)
    first_month = start if start.day == 1 else _next_month(start)
    last_month = stop.replace(day=1)
    spans = Spans([], [], [])
    if first_month < last_month:
        spans.months.append((first_month, last_month))
        _weeks_and_days(start, first_month, spans)
        _weeks_and_days(last_month, stop, spans)
    else:
        _weeks_and_days(start, stop, spans)
    return spans
