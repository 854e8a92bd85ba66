"""Fixtures for the MCP tests: a hub user with a personal token, a sync agent, mirrored issues."""

from __future__ import annotations

import datetime as dt

import pytest
from django.db import connection
from django.utils import timezone


@pytest.fixture
def hub_user(db):
    from hub.permissions import hub_group_ensure
    from tests.achilles.factories import UserFactory

    person = UserFactory(username="olga")
    person.groups.add(hub_group_ensure())
    return person


@pytest.fixture
def token(hub_user) -> str:
    from achilles.services import api_token_create

    _, raw = api_token_create(user=hub_user)
    return raw


@pytest.fixture
def staff_token(db) -> str:
    from achilles.services import api_token_create
    from hub.permissions import hub_group_ensure
    from tests.achilles.factories import UserFactory

    admin = UserFactory(username="boss", is_staff=True)
    admin.groups.add(hub_group_ensure())
    _, raw = api_token_create(user=admin)
    return raw


@pytest.fixture
def sync_agent(db):
    from hub.protocol import sync_agent_create

    agent, _raw = sync_agent_create(name="dc-1")
    return agent


def issue_dict(key: str, **kw) -> dict:
    base = {
        "key": key,
        "project": key.split("-")[0],
        "summary": f"Задача {key}",
        "status": "Open",
        "issue_type": "Task",
        "priority": "Medium",
        "assignee": "jdoe",
        "duedate": None,
        "sprint": "Спринт 1",
        "labels": ["AWPCA"],
        "fields": {},
        "updated": timezone.now() - dt.timedelta(hours=1),
        "links": [],
        "comments": [],
    }
    return base | kw


@pytest.fixture
def mirror(db):
    """``mirror(issue_dict(...), ...)`` → uploads the issues as the sync agent would."""
    from hub.protocol import mirror_upload

    def upload(*issues: dict):
        return mirror_upload(sync_agent=None, sync_run_id=None, issues=list(issues))

    return upload


def next_ids(*, batch: int | None = None, command: int | None = None) -> None:
    """Make the next batch / command get the seed's ids (the scenarios name batch 9, commands 30 and 40)."""
    with connection.cursor() as cursor:
        if batch is not None:
            cursor.execute("SELECT setval(pg_get_serial_sequence('hub_batches', 'id'), %s, false)", [batch])
        if command is not None:
            cursor.execute("SELECT setval(pg_get_serial_sequence('hub_commands', 'id'), %s, false)", [command])


@pytest.fixture(autouse=True)
def _hub_state_row(request):
    """The one-row ``hub_state`` comes from a migration; a transactional test's flush empties it."""
    if request.node.get_closest_marker("unit"):
        yield
        return
    request.getfixturevalue("db")
    # The web process is up before the test starts, as in production: importing achilles.asgi stamps
    # the hub's boot mark, and done lazily by the first MCP call it landed after the test's own claim
    # (the seed-scenario tests failed when run alone).
    import achilles.asgi  # noqa: F401, PLC0415
    from hub.models import HubState

    HubState.objects.get_or_create(pk=1)
    yield
