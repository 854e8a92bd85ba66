"""Schedule arithmetic (pure): interval grid, calendar in a zone across DST, the budget week."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from agents.schedule import calendar_next, interval_next, next_run_at, parse_hhmm, preview, week_bounds

pytestmark = [pytest.mark.unit]
NOW = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)


@pytest.mark.p1
def test_interval_slots_stay_on_the_grid_and_skip_missed_slots_without_replay():
    assert interval_next(30, None, NOW) == NOW + timedelta(minutes=30)
    assert interval_next(30, NOW, NOW + timedelta(minutes=7)) == NOW + timedelta(minutes=30)
    assert interval_next(30, NOW, NOW + timedelta(minutes=30)) == NOW + timedelta(minutes=60)
    assert interval_next(30, NOW, NOW + timedelta(hours=3, minutes=1)) == NOW + timedelta(hours=3, minutes=30)


@pytest.mark.p1
def test_calendar_spring_forward_gap_runs_right_after_the_gap_and_fall_back_runs_once():
    from zoneinfo import ZoneInfo

    berlin = ZoneInfo("Europe/Berlin")
    # 2026-03-29 02:30 does not exist in Berlin: the slot lands at 03:30 CEST = 01:30 UTC
    gap = calendar_next(6, parse_hhmm("02:30"), berlin, datetime(2026, 3, 28, tzinfo=UTC))
    assert gap == datetime(2026, 3, 29, 1, 30, tzinfo=UTC)
    # 2026-10-25 02:30 exists twice: the first one (CEST, 00:30 UTC), and the next slot is a week later
    first = calendar_next(6, parse_hhmm("02:30"), berlin, datetime(2026, 10, 24, tzinfo=UTC))
    assert first == datetime(2026, 10, 25, 0, 30, tzinfo=UTC)
    assert calendar_next(6, parse_hhmm("02:30"), berlin, first) == datetime(2026, 11, 1, 1, 30, tzinfo=UTC)


@pytest.mark.p1
def test_manual_only_schedule_has_no_next_run_and_no_preview():
    assert next_run_at(None, "UTC", now=NOW) is None
    assert preview(None, "UTC", now=NOW) == []


@pytest.mark.p1
def test_preview_lists_the_next_five_calendar_slots_a_week_apart():
    times = preview({"type": "calendar", "weekday": 0, "time": "09:00"}, "Europe/Moscow", now=NOW)
    assert times == [datetime(2026, 11, 30, 6, 0, tzinfo=UTC) + timedelta(weeks=k) for k in range(5)]


@pytest.mark.p0
def test_budget_week_is_monday_midnight_to_monday_midnight_in_the_zone():
    start, end = week_bounds("Europe/Moscow", NOW)
    assert (start, end) == (datetime(2026, 11, 22, 21, 0, tzinfo=UTC), datetime(2026, 11, 29, 21, 0, tzinfo=UTC))
    # just before Monday 00:00 local the previous week still holds
    assert week_bounds("Europe/Moscow", start - timedelta(seconds=1))[1] == start
