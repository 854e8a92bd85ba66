"""Small pure parts of the sync agent: Retry-After, the DC sprint string, the cron schedule."""

from __future__ import annotations

import datetime as dt

import pytest

from syncagent import cron
from syncagent.commands import body_hash
from syncagent.jiraclient import retry_after_seconds
from syncagent.sync import current_sprint, parse_sprint

UTC = dt.UTC


def test_retry_after_seconds_and_http_date():
    now = dt.datetime(2026, 11, 30, 12, 0, 0, tzinfo=UTC)
    assert retry_after_seconds("3") == 3
    assert retry_after_seconds("0") == 0
    assert retry_after_seconds("Mon, 30 Nov 2026 12:00:07 GMT", now=now) == 7
    assert retry_after_seconds("Mon, 30 Nov 2026 11:59:00 GMT", now=now) == 0
    assert retry_after_seconds(None) is None and retry_after_seconds("soon") is None


def test_dc_sprint_string():
    value = (
        "com.atlassian.greenhopper.service.sprint.Sprint@1a2b[id=2,rapidViewId=1,state=FUTURE,name=Спринт 2, хвост,"
        "startDate=<null>,endDate=<null>,completeDate=<null>,sequence=2,goal=<null>]"
    )
    assert parse_sprint(value) == {"id": "2", "name": "Спринт 2, хвост", "state": "FUTURE"}
    closed = value.replace("id=2", "id=1").replace("FUTURE", "CLOSED").replace("Спринт 2, хвост", "Спринт 1")
    assert current_sprint([closed, value]) == "Спринт 2, хвост"
    assert current_sprint([closed]) == "Спринт 1"
    assert current_sprint(None) == "" and current_sprint([{"id": 3, "name": "S3", "state": "active"}]) == "S3"


def test_cron_fires_between():
    at = dt.datetime(2026, 11, 30, 2, 59, 30, tzinfo=UTC)
    assert cron.fired_between("0 3 * * *", at, at + dt.timedelta(minutes=1))
    assert not cron.fired_between("0 3 * * *", at + dt.timedelta(minutes=1), at + dt.timedelta(minutes=30))
    assert cron.fired_between("*/15 * * * 1-5", at, at + dt.timedelta(minutes=20))  # Monday
    assert not cron.fired_between("0 3 * * 0", at, at + dt.timedelta(hours=2))  # Sundays only
    with pytest.raises(ValueError):
        cron.parse("0 25 * * *")


def test_comment_hash_is_whitespace_and_line_ending_blind():
    assert body_hash("Сверить  выписки\r\nза ноябрь ") == body_hash("Сверить выписки\nза ноябрь")
    assert body_hash("a") != body_hash("b")
