"""The report shows exactly the stored tokens: known ``tokens_used`` written through real chat turns
(the scripted model reporting usage) and a real agent run, read back through ``GET /api/usage`` and
the CSV per person, group, model, agent and day — at the week boundary in the organisation's time
zone (Moscow: Monday 00:00 MSK is Sunday 21:00 UTC)."""

from __future__ import annotations

import csv
import io

import pytest
from django.contrib.auth.models import Permission

from conversations.models import Message
from tests.usage.conftest import WEEK

pytestmark = [pytest.mark.api, pytest.mark.p1, pytest.mark.django_db]


def _items(client, **params):
    response = client.get("/api/usage", params=params)
    assert response.status_code == 200, response.text
    return {item["key"]: item for item in response.json()["items"]}


def _tokens(items):
    return {key: item["tokens"] for key, item in items.items()}


def test_the_split_and_the_model_are_stored(spend):
    run = spend["run"]
    assert (run.tokens_used, run.input_tokens, run.output_tokens, run.model) == (1000, 700, 300, "agent-model")
    assert list(
        Message.objects.filter(role="assistant").values_list("tokens_used", "input_tokens", "output_tokens")
    ) == [
        (460, 400, 60),
        (60, 50, 10),
    ]


def test_the_week_by_person_group_model_agent_and_day(spend, asgi_client, user_factory):
    admin = asgi_client(user_factory(username="root", is_staff=True))
    assert _tokens(_items(admin, group_by="user", **WEEK)) == {"alice": 60, "bob": 1000}
    assert _tokens(_items(admin, group_by="group", **WEEK)) == {"dev": 1000, "finance": 1060}
    assert _tokens(_items(admin, group_by="model", **WEEK)) == {"agent-model": 1000, "fake-chat": 60}
    assert _tokens(_items(admin, group_by="agent", **WEEK)) == {str(spend["agent"].pk): 1000}
    assert _tokens(_items(admin, group_by="day", **WEEK)) == {"2026-11-23": 1060}
    # last Sunday holds alice's first answer only
    assert _tokens(_items(admin, group_by="day", **{"from": "2026-11-16", "to": "2026-11-22"})) == {"2026-11-22": 460}
    # sources apart
    assert _tokens(_items(admin, group_by="user", source="chat", **WEEK)) == {"alice": 60}
    assert _tokens(_items(admin, group_by="user", source="agents", **WEEK)) == {"bob": 1000}
    alice = _items(admin, group_by="user", **WEEK)["alice"]
    # 50 input at 1.5 and 10 output at 6 per million; the agent's model has no prices: no cost
    assert alice == {
        "key": "alice",
        "label": "Алиса Котова",
        "events": 1,
        "tokens": 60,
        "input_tokens": 50,
        "output_tokens": 10,
        "unsplit_tokens": 0,
        "cost": "0.000135",
        "currency": "USD",
    }
    assert _items(admin, group_by="user", **WEEK)["bob"]["cost"] is None
    assert _items(admin, group_by="agent", **WEEK)[str(spend["agent"].pk)]["label"] == "Сводка"


def test_the_csv_holds_the_same_sums(spend, asgi_client, user_factory):
    admin = asgi_client(user_factory(username="root", is_staff=True))
    response = admin.get("/api/usage.csv", params={"group_by": "user", **WEEK})
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(response.content.decode("utf-8-sig"))))
    assert [(r["key"], r["tokens"], r["input_tokens"], r["output_tokens"], r["cost"]) for r in rows] == [
        ("alice", "60", "50", "10", "0.000135"),
        ("bob", "1000", "700", "300", ""),
    ]


def test_a_person_sees_only_their_own_spend(spend, asgi_client):
    bob = asgi_client(spend["bob"])
    assert _tokens(_items(bob, group_by="user", **WEEK)) == {"bob": 1000}
    assert _tokens(_items(bob, group_by="group", **WEEK)) == {"dev": 1000, "finance": 1000}
    assert _tokens(_items(bob, group_by="user", user="bob", **WEEK)) == {"bob": 1000}
    for url in ("/api/usage", "/api/usage.csv"):
        response = bob.get(url, params={"user": "alice", **WEEK})
        assert response.status_code == 403, response.text
        assert response.json()["code"] == "permission_denied"


def test_the_permission_opens_everyone_s_spend_without_staff(spend, asgi_client, user_factory):
    finance = user_factory(username="controller")
    finance.user_permissions.add(Permission.objects.get(codename="view_usage", content_type__app_label="usage"))
    client = asgi_client(finance)
    assert _tokens(_items(client, group_by="user", **WEEK)) == {"alice": 60, "bob": 1000}
    assert _tokens(_items(client, group_by="user", user="alice", **WEEK)) == {"alice": 60}


def test_errors_follow_the_contract(spend, asgi_client, user_factory):
    assert asgi_client().get("/api/usage").status_code == 401
    assert asgi_client().get("/api/usage.csv").status_code == 401
    admin = asgi_client(user_factory(username="root", is_staff=True))
    response = admin.get("/api/usage", params={"from": "2026-11-29", "to": "2026-11-23"})
    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"] == ["query", "to"]
    # {"from": "0"}: found by `make fuzz` (a number was read as a Unix time, 1970-01-01)
    for params in ({"group_by": "mood"}, {"source": "email"}, {"from": "yesterday"}, {"from": "0"}, {"to": "20261201"}):
        response = admin.get("/api/usage", params=params)
        assert response.status_code == 422, params
        assert response.json()["code"] == "validation_error"
    assert admin.get("/api/usage", params={"user": "nobody"}).status_code == 404


def test_whole_months_and_the_days_around_them_add_up_alike(spend, asgi_client, user_factory):
    # given a period made of a whole month (read from usage_monthly) and days on either side
    admin = asgi_client(user_factory(username="root", is_staff=True))
    everything = {"alice": 520, "bob": 1000}
    assert _tokens(_items(admin, group_by="user", **{"from": "2026-10-15", "to": "2026-12-05"})) == everything
    assert _tokens(_items(admin, group_by="user", **{"from": "2026-11-01", "to": "2026-11-30"})) == everything
    assert _tokens(_items(admin, group_by="model", **{"from": "2026-11-01", "to": "2026-12-31"})) == {
        "agent-model": 1000,
        "fake-chat": 520,
    }
    # whole weeks and days: 16–22 November is a week (alice's 460), 23 November starts the next
    assert _tokens(_items(admin, group_by="user", **{"from": "2026-11-16", "to": "2026-11-22"})) == {"alice": 460}
    assert _tokens(_items(admin, group_by="user", **{"from": "2026-11-14", "to": "2026-12-02"})) == everything
    assert _tokens(_items(admin, group_by="user", **{"from": "2026-11-23", "to": "2026-12-31"})) == {
        "alice": 60,
        "bob": 1000,
    }
