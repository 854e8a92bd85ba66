"""Schedule arithmetic (AE-SCHED): pure functions, no ORM, so unit tests need no database.

A schedule is ``None`` (manual only), ``{"type": "interval", "every_minutes": N}`` or
``{"type": "calendar", "weekday": 0-6, "time": "HH:MM"}`` (Monday = 0) read in the owner's
time zone. Every instant in and out is an aware UTC ``datetime``.

DST: a calendar time is resolved in the zone with ``fold=0``. A time that does not exist on a
spring-forward day (02:30 in a gap) therefore lands on the first instant after the gap; a time
that exists twice on a fall-back day runs once, at its first occurrence.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo

PREVIEW_COUNT = 5


def parse_hhmm(value: str) -> time:
    hours, minutes = value.split(":")
    return time(int(hours), int(minutes))


def _local_to_utc(day: date, at: time, tz: ZoneInfo) -> datetime:
    local = datetime.combine(day, at).replace(tzinfo=tz, fold=0)
    return local.astimezone(UTC)


def calendar_next(weekday: int, at: time, tz: ZoneInfo, after: datetime) -> datetime:
    """The first instant strictly after ``after`` that is ``weekday`` ``at`` local time in ``tz``."""
    local_after = after.astimezone(tz)
    day = local_after.date() + timedelta(days=(weekday - local_after.weekday()) % 7)
    while True:
        candidate = _local_to_utc(day, at, tz)
        if candidate > after:
            return candidate
        day += timedelta(days=7)


def interval_next(every_minutes: int, previous: datetime | None, now: datetime) -> datetime:
    """Slots stay on the grid ``previous + k·every`` (no drift from late ticks or run time).

    Without a previous slot (new agent, gate reopened) the first run is one interval from now.
    Slots missed while the scheduler was down are not replayed: the next slot after ``now``.
    """
    step = timedelta(minutes=every_minutes)
    if previous is None:
        return now + step
    nxt = previous + step
    if nxt <= now:
        missed = (now - nxt) // step + 1
        nxt += step * missed
    return nxt


def next_run_at(
    schedule: dict | None, tz_name: str, *, now: datetime, previous: datetime | None = None
) -> datetime | None:
    """When the agent should run next; ``None`` for a manual-only agent."""
    if not schedule:
        return None
    if schedule["type"] == "interval":
        return interval_next(int(schedule["every_minutes"]), previous, now)
    if schedule["type"] == "calendar":
        return calendar_next(int(schedule["weekday"]), parse_hhmm(schedule["time"]), ZoneInfo(tz_name), now)
    raise ValueError(f"unknown schedule type {schedule.get('type')!r}")


def preview(
    schedule: dict | None, tz_name: str, *, now: datetime, first: datetime | None = None, count: int = PREVIEW_COUNT
) -> list[datetime]:
    """The next ``count`` run times (starting from ``first`` when the agent already has one)."""
    if not schedule:
        return []
    times: list[datetime] = []
    current = first or next_run_at(schedule, tz_name, now=now)
    while current is not None and len(times) < count:
        times.append(current)
        current = next_run_at(schedule, tz_name, now=current, previous=current)
    return times


def week_bounds(tz_name: str, now: datetime) -> tuple[datetime, datetime]:
    """[Monday 00:00, next Monday 00:00) of the week containing ``now`` in ``tz_name``, as UTC."""
    tz = ZoneInfo(tz_name)
    local = now.astimezone(tz)
    monday = local.date() - timedelta(days=local.weekday())
    return _local_to_utc(monday, time(0, 0), tz), _local_to_utc(monday + timedelta(days=7), time(0, 0), tz)
