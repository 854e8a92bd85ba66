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


class Env:
    sprints = {1: {"state": "active", "name": "Спринт 1"}, 2: {"state": "closed", "name": "Спринт 0"}}


def matches(jql: str, **kw) -> bool:
    return all(c(issue(**kw), "achilles-sync", Env()) for c in parse(jql).clauses)


@pytest.mark.parametrize(
    "jql",
    [
        "foo = bar",
        "labels = AWPCA AND fixVersion = 1.0",
        "project = AURORA OR",
        "(project = AURORA",
        "status ~ Done",
        "summary = Сверка",
        "project = currentUser()",
        "sprint in fooSprints()",
        "sprint = openSprints()",
        "assignee is jdoe",
        "labels = AWPCA AND",
        "project in (AURORA",
        "ORDER BY labels",
        "ORDER BY nonsense",
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


def test_or_not_parentheses_and_the_user_fields():
    # given an issue assigned to jdoe, reported by the sync user
    kw = {"assignee": "jdoe", "reporter": "achilles-sync", "priority": "High", "issuetype": "Bug"}
    # then
    assert matches("project = OTHER OR labels = AWPCA", **kw)
    assert not matches("project = OTHER OR labels = OTHER", **kw)
    assert matches("NOT project = OTHER AND (labels = X OR assignee = jdoe)", **kw)
    assert matches("reporter = currentUser() AND assignee != currentUser()", **kw)
    assert not matches("assignee = currentUser()", **kw)
    assert matches("assignee in (pivanov, JDOE) AND type = Bug AND priority = High", **kw)
    assert matches("assignee is not EMPTY", **kw) and not matches("assignee is EMPTY", **kw)


def test_not_equal_never_matches_an_empty_field_as_in_jira():
    assert not matches("assignee != jdoe", assignee=None)
    assert matches("assignee is EMPTY", assignee=None)
    assert matches("assignee not in (jdoe)", assignee="pivanov") and not matches(
        "assignee not in (jdoe)", assignee=None
    )


def test_resolution_unresolved_is_an_empty_resolution():
    assert matches("resolution = Unresolved", resolution=None)
    assert not matches("resolution = Unresolved", resolution="Done")
    assert matches("resolution = Done", resolution="Done") and matches("resolution != Unresolved", resolution="Done")


def test_open_sprints_are_the_active_and_future_ones():
    assert matches("sprint in openSprints()", sprint_ids=[2, 1])
    assert not matches("sprint in openSprints()", sprint_ids=[2])
    assert matches("sprint in closedSprints()", sprint_ids=[2])
    assert not matches("sprint in openSprints()", sprint_ids=[])
    assert matches('sprint = "Спринт 1"', sprint_ids=[1]) and matches("sprint = 1", sprint_ids=[1])


def test_order_by_any_sortable_field():
    assert parse("project = AURORA ORDER BY priority DESC, duedate, assignee ASC").order == [
        ("priority", True),
        ("duedate", False),
        ("assignee", False),
    ]
    with pytest.raises(JqlError, match="Field 'labels' does not support sorting."):
        parse("ORDER BY labels")
