"""The emulator's JQL is strict: a clause it does not know is a 400, as in Jira (unit)."""

from __future__ import annotations

import datetime as dt

import pytest

from emulators.jira.jql import JqlError, parse, parse_date

UTC = dt.UTC


def issue(**kw):
    base = {
        "key": "AURORA-1",
        "project": "AURORA",
        "labels": ["AWPCA"],
        "status": "To Do",
        "creator": "achilles-sync",
        "summary": "Сверка платежей",
        "updated": dt.datetime(2026, 11, 30, 11, 50, 30, tzinfo=UTC),
        "created": dt.datetime(2026, 11, 1, tzinfo=UTC),
    }
    base.update(kw)
    return base


def matches(jql: str, **kw) -> bool:
    return all(c(issue(**kw), "achilles-sync") for c in parse(jql).clauses)


@pytest.mark.parametrize(
    "jql",
    [
        "foo = bar",
        "labels = AWPCA AND assignee = jdoe",
        "project = AURORA OR labels = AWPCA",
        "project != AURORA",
        "updated = 2026-11-30",
        "creator = jdoe",
        "labels = AWPCA AND",
        "project in (AURORA",
        "ORDER BY summary",
        'updated >= "30.11.2026"',
        "labels = AWPCA ORDER BY key garbage",
    ],
)
def test_unknown_or_malformed_clauses_are_refused(jql):
    with pytest.raises(JqlError):
        parse(jql)


def test_the_subset_filters_like_jira():
    assert matches('project = AURORA AND labels = "AWPCA"')
    assert matches("labels in (OTHER, awpca)")  # case-insensitive values
    assert not matches("labels = OTHER")
    assert matches('key in ("AURORA-1", "AURORA-2")') and not matches("key = AURORA-2")
    assert matches('summary ~ "Сверка"') and not matches('summary ~ "банк"')
    assert matches("creator = currentUser()") and not matches("creator = currentUser()", creator="jdoe")
    # minute granularity: 11:50 includes 11:50:30
    assert matches('updated >= "2026-11-30 11:50"') and not matches('updated >= "2026-11-30 11:51"')
    assert matches('created >= "2026/10/31"')
    assert parse("labels = AWPCA ORDER BY updated ASC, key DESC").order == [("updated", False), ("key", True)]


def test_relative_dates():
    now = dt.datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
    assert parse_date("-5m", now=now) == now - dt.timedelta(minutes=5)
    assert parse_date("-1d", now=now) == now - dt.timedelta(days=1)


@pytest.mark.parametrize(
    ("query", "summary", "hit"),
    [
        ("Remove legacy flag", "Remove -legacy flag", True),
        ("Remove -legacy flag", "Remove -legacy flag", False),  # '-legacy' is NOT legacy
        ("flags removed", "Remove the legacy flag", True),  # stemming both sides
        ("the", "the legacy flag", False),  # stop words only: an empty query matches nothing
        ('\\"legacy flag\\"', "Remove legacy flag", True),
        ('\\"flag legacy\\"', "Remove legacy flag", False),  # a phrase keeps its order
        ("legacy OR absent", "Remove legacy flag", True),
        ("+legacy absent", "Remove legacy flag", False),
        ("leg*", "Remove legacy flag", True),
        ("(legacy || absent) && remove", "Remove legacy flag", True),
        ("C\\\\+\\\\+ phase", "C++ (phase 2)?", True),  # escaped operators are plain text
        ("Сверка", "Сверка платежей 🚀", True),
        ("Remove the legacy flag 🚀", "Remove the legacy flag", True),  # stop words and emoji make no clause
    ],
)
def test_text_search_is_lucene_like(query, summary, hit):
    assert matches(f'summary ~ "{query}"', summary=summary) is hit


@pytest.mark.parametrize(
    "query", ["C++ (phase 2)?", "Remove - flag", "(phase 2", "*legacy", "a:b", "[x]", "x^", '\\"open']
)
def test_malformed_text_query_is_jiras_400(query):
    with pytest.raises(JqlError, match="The text query .* for field 'summary' is not valid"):
        parse(f'summary ~ "{query}"')
