"""Report periods and their cut into months, weeks and days (pure: no database)."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from usage.periods import period_spans, quarter_of, week_of

pytestmark = [pytest.mark.unit]


@given(start=st.dates(date(2024, 1, 1), date(2027, 12, 31)), length=st.integers(0, 400))
def test_every_day_of_a_period_is_in_exactly_one_piece(start, length):
    end = start + timedelta(days=length)
    spans = period_spans(start, end)
    covered: list[date] = []
    for a, b in spans.months:
        assert a.day == 1 and b.day == 1
        covered += [a + timedelta(days=i) for i in range((b - a).days)]
    for a, b in spans.weeks:
        assert a.weekday() == 0 and b.weekday() == 0
        covered += [a + timedelta(days=i) for i in range((b - a).days)]
    for a, b in spans.days:
        covered += [a + timedelta(days=i) for i in range((b - a).days)]
    assert sorted(covered) == [start + timedelta(days=i) for i in range(length + 1)]


def test_the_week_is_the_budget_s_week_in_the_organisation_s_zone():
    # Sunday 21:30 UTC is Monday 00:30 in Moscow: the new week
    week = week_of("Europe/Moscow", datetime(2026, 11, 22, 21, 30, tzinfo=UTC))
    assert (week.start, week.end) == (date(2026, 11, 23), date(2026, 11, 29))
    assert week_of("UTC", datetime(2026, 11, 22, 21, 30, tzinfo=UTC)).start == date(2026, 11, 16)
    quarter = quarter_of("Europe/Moscow", datetime(2026, 12, 31, 21, 30, tzinfo=UTC))  # 1 January in Moscow
    assert (quarter.start, quarter.end) == (date(2027, 1, 1), date(2027, 3, 31))
