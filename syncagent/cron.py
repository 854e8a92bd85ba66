"""Five-field cron (``minute hour day-of-month month day-of-week``, UTC) for the hub's ``full_sync_cron``."""

from __future__ import annotations

import datetime as dt

_RANGES = [(0, 59), (0, 23), (1, 31), (1, 12), (0, 6)]


def _field(text: str, lo: int, hi: int) -> set[int]:
    out: set[int] = set()
    for part in text.split(","):
        step = 1
        if "/" in part:
            part, step_text = part.split("/", 1)
            step = int(step_text)
            if step < 1:
                raise ValueError("cron step must be ≥ 1")
        if part == "*":
            a, b = lo, hi
        elif "-" in part:
            a, b = (int(x) for x in part.split("-", 1))
        else:
            a = b = int(part)
            if step > 1:
                b = hi
        if a < lo or b > hi or a > b:
            raise ValueError(f"cron value {part!r} outside {lo}-{hi}")
        out.update(range(a, b + 1, step))
    return out


def parse(expr: str) -> list[set[int]]:
    parts = expr.split()
    if len(parts) != 5:
        raise ValueError("cron needs 5 fields: minute hour day-of-month month day-of-week")
    sets = [_field(p, lo, hi) for p, (lo, hi) in zip(parts[:4], _RANGES[:4], strict=True)]
    sets.append({d % 7 for d in _field(parts[4], 0, 7)})  # 0 and 7 are both Sunday
    return sets


def matches(sets: list[set[int]], when: dt.datetime) -> bool:
    minute, hour, dom, month, dow = sets
    return (
        when.minute in minute
        and when.hour in hour
        and when.day in dom
        and when.month in month
        and (when.isoweekday() % 7) in dow
    )


def fired_between(expr: str, after: dt.datetime, until: dt.datetime) -> bool:
    """Did the schedule fire in (after, until]? (At most the last two days are looked at.)"""
    sets = parse(expr)
    start = max(after, until - dt.timedelta(days=2)).replace(second=0, microsecond=0) + dt.timedelta(minutes=1)
    t = start
    while t <= until:
        if matches(sets, t):
            return True
        t += dt.timedelta(minutes=1)
    return False
