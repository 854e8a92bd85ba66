"""The agents API for hub-event subscriptions, and the events each run carries."""

from __future__ import annotations

import pytest
from django.utils import timezone

from agents.models import Agent, AgentEvent, AgentRun
from tests.achilles.factories import UserFactory

pytestmark = [pytest.mark.api, pytest.mark.django_db]


@pytest.fixture
def api(owner, asgi_client):
    client = asgi_client(owner)

    def call(method, path, body=None):
        return client.request(method, f"/api{path}", json=body)

    return call


def test_subscribe_list_and_unsubscribe(api, owner, chat_model):
    agent = Agent.objects.create(owner=owner, name="наблюдатель", model=chat_model)
    created = api(
        "POST",
        f"/agents/{agent.pk}/subscriptions",
        {"events": ["transitioned"], "project": "aurora", "status": "In Progress", "debounce_seconds": 5},
    )
    assert created.status_code == 201, created.content
    sub = created.json()
    assert (sub["events"], sub["project"], sub["status"], sub["debounce_seconds"]) == (
        ["transitioned"],
        "AURORA",
        "In Progress",
        5,
    )
    assert [s["id"] for s in api("GET", f"/agents/{agent.pk}/subscriptions").json()] == [sub["id"]]
    assert api("DELETE", f"/agents/{agent.pk}/subscriptions/{sub['id']}").status_code == 204
    assert api("DELETE", f"/agents/{agent.pk}/subscriptions/{sub['id']}").status_code == 404
    assert api("GET", f"/agents/{agent.pk}/subscriptions").json() == []


@pytest.mark.parametrize(
    "body",
    [
        {"events": []},
        {"events": ["deleted"]},
        {"events": ["updated"], "debounce_seconds": 3601},
        {"events": ["updated"], "debounce_seconds": -1},
        {"events": ["updated"], "jql": "project = X"},
    ],
)
def test_an_invalid_subscription_is_a_422(api, owner, chat_model, body):
    agent = Agent.objects.create(owner=owner, name="a", model=chat_model)
    response = api("POST", f"/agents/{agent.pk}/subscriptions", body)
    assert response.status_code == 422 and response.json()["code"] == "validation_error"


def test_someone_else_s_agent_is_not_found(api, chat_model):
    other = Agent.objects.create(owner=UserFactory(username="other"), name="чужой", model=chat_model)
    assert api("GET", f"/agents/{other.pk}/subscriptions").status_code == 404
    assert api("POST", f"/agents/{other.pk}/subscriptions", {"events": ["updated"]}).status_code == 404


def test_a_run_shows_the_events_that_started_it(api, owner, chat_model):
    agent = Agent.objects.create(owner=owner, name="a", model=chat_model)
    run = AgentRun.objects.create(agent=agent, trigger="event", state="queued")
    AgentEvent.objects.create(
        agent=agent,
        run=run,
        issue_key="AURORA-7",
        kinds=["transitioned"],
        changes={"status": ["To Do", "In Progress"]},
        hits=2,
        fire_at=timezone.now(),
    )
    [item] = api("GET", f"/agents/{agent.pk}/runs").json()["items"]
    assert item["trigger"] == "event"
    assert [(e["issue_key"], e["kinds"], e["changes"], e["hits"]) for e in item["events"]] == [
        ("AURORA-7", ["transitioned"], {"status": ["To Do", "In Progress"]}, 2)
    ]


def test_an_agent_has_at_most_twenty_subscriptions(api, owner, chat_model):
    # given an agent with twenty subscriptions
    agent = Agent.objects.create(owner=owner, name="много", model=chat_model)
    for n in range(20):
        created = api("POST", f"/agents/{agent.pk}/subscriptions", {"events": ["updated"], "label": f"l{n}"})
        assert created.status_code == 201, created.content
    # when a twenty-first is asked for
    refused = api("POST", f"/agents/{agent.pk}/subscriptions", {"events": ["updated"], "label": "extra"})
    # then it is a 409 and the list stays at twenty
    assert refused.status_code == 409 and refused.json()["code"] == "subscription_limit"
    assert len(api("GET", f"/agents/{agent.pk}/subscriptions").json()) == 20


@pytest.mark.parametrize("debounce", [False, True, "5", 5.5])
def test_a_debounce_that_is_not_an_integer_is_422_and_nothing_is_stored(api, owner, chat_model, debounce):
    # the fuzzer's case: {"debounce_seconds": false} was stored as 0 (a JSON boolean taken for an integer)
    agent = Agent.objects.create(owner=owner, name="наблюдатель", model=chat_model)
    answer = api("POST", f"/agents/{agent.pk}/subscriptions", {"events": ["created"], "debounce_seconds": debounce})
    assert answer.status_code == 422, answer.content
    assert api("GET", f"/agents/{agent.pk}/subscriptions").json() == []
