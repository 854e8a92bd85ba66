"""HTTP contract of /api/agents: CRUD, run now, runs list, validation (no 500 anywhere)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from achilles.platform import platform_settings_update
from achilles.services import user_timezone_set
from agents.models import Agent, AgentRun
from tests.achilles.factories import AllowedModelFactory

pytestmark = [pytest.mark.api, pytest.mark.django_db]


@pytest.fixture
def api(owner, asgi_client):
    """The owner's calls through the ASGI application (httpx), with their Bearer token."""
    client = asgi_client(owner)

    def call(method, path, body=None):
        return client.request(method, f"/api{path}", json=body)

    return call


def _create(api, **body):
    body = {"name": "Сводка", "instructions": "Что нового про отпуск?", **body}
    response = api("POST", "/agents", body)
    assert response.status_code == 201, response.content
    return response.json()


@pytest.mark.p1
def test_owner_crud_on_own_agents(api, chat_model):
    created = _create(api, schedule={"type": "interval", "every_minutes": 60})
    assert created["model"] == chat_model.name and created["enabled"] is True and created["admin_paused"] is False
    assert created["status"] == "scheduled" and len(created["next_runs"]) == 5
    agent_id = created["id"]
    assert [a["id"] for a in api("GET", "/agents").json()["items"]] == [agent_id]
    assert api("GET", f"/agents/{agent_id}").json()["name"] == "Сводка"
    patched = api("PATCH", f"/agents/{agent_id}", {"name": "Новое имя", "schedule": None, "enabled": False}).json()
    assert (patched["name"], patched["schedule"], patched["enabled"], patched["next_run_at"]) == (
        "Новое имя",
        None,
        False,
        None,
    )
    assert patched["status"] == "disabled"
    assert api("DELETE", f"/agents/{agent_id}").status_code == 204
    assert api("GET", f"/agents/{agent_id}").status_code == 404


@pytest.mark.p0
def test_model_from_allow_list_is_saved_and_used_in_the_run_default_preset_on_create(
    api, chat_model, fake_chat, fake_ks, dispatched, run_task
):
    # on create without `model` the list's default is set
    assert _create(api)["model"] == chat_model.name
    # a named chat model from the allow-list is saved …
    chosen = AllowedModelFactory(name="chosen-model", provider=chat_model.provider)
    created = _create(api, model="chosen-model")
    assert created["model"] == "chosen-model"
    assert Agent.objects.get(pk=created["id"]).model_id == chosen.pk
    # … and applied in the run
    used = []
    from achilles.llm.registry import register_provider
    from tests.agents.conftest import FAKE_PROVIDER

    def factory(spec):
        used.append(spec.name)
        return fake_chat

    register_provider(FAKE_PROVIDER, factory)
    fake_chat.add_round([*__import__("tests.llm_fake", fromlist=["answer"]).answer("ok")])
    run_id = api("POST", f"/agents/{created['id']}/run").json()["run_id"]
    run_task(run_id)
    assert used == ["chosen-model"]


@pytest.mark.p0
@pytest.mark.parametrize("model", ["not-on-the-list", "embedder"])
def test_model_outside_agent_models_or_embedding_kind_is_422_not_500(api, chat_model, model):
    AllowedModelFactory(name="embedder", kind="embedding", provider="hash")
    response = api("POST", "/agents", {"name": "x", "model": model})
    assert response.status_code == 422
    assert response.json()["code"] in {"unknown_model", "wrong_model_kind"}
    agent_id = _create(api)["id"]
    assert api("PATCH", f"/agents/{agent_id}", {"model": model}).status_code == 422
    assert Agent.objects.get(pk=agent_id).model_id == chat_model.pk


@pytest.mark.p0
def test_post_run_returns_202_with_run_id_manual_queued_and_task_enqueued(
    api, chat_model, dispatched, django_capture_on_commit_callbacks
):
    agent_id = _create(api)["id"]
    with django_capture_on_commit_callbacks(execute=True):
        response = api("POST", f"/agents/{agent_id}/run")
    assert response.status_code == 202
    body = response.json()
    run = AgentRun.objects.get(pk=body["run_id"])
    assert (run.trigger, run.state, run.agent_id) == ("manual", "queued", agent_id)
    assert dispatched == [run.pk]


@pytest.mark.p0
def test_post_run_while_a_run_is_running_is_409_conflict_single_flight(api, chat_model, run_factory):
    agent_id = _create(api)["id"]
    run_factory(
        agent=Agent.objects.get(pk=agent_id), state="running", started_at=timezone.now(), heartbeat_at=timezone.now()
    )
    response = api("POST", f"/agents/{agent_id}/run")
    assert response.status_code == 409 and response.json()["code"] == "already_running"
    assert AgentRun.objects.filter(agent_id=agent_id).count() == 1


@pytest.mark.p0
def test_unknown_or_foreign_agent_id_is_404_not_500(api, chat_model, agent_factory, user_factory):
    foreign = agent_factory(owner=user_factory(username="someone-else"))
    for agent_id in (foreign.pk, 999_999):
        for method, path, body in (
            ("GET", "", None),
            ("PATCH", "", {"name": "mine"}),
            ("DELETE", "", None),
            ("POST", "/run", None),
            ("GET", "/runs", None),
        ):
            response = api(method, f"/agents/{agent_id}{path}", body)
            assert response.status_code == 404, (method, path, response.content)
            assert response.json()["code"] == "agent_not_found"
    foreign.refresh_from_db()
    assert foreign.name != "mine"


@pytest.mark.p0
def test_post_run_over_budget_is_409_budget_exceeded_not_500(api, chat_model):
    platform_settings_update(weekly_token_budget=100)
    agent_id = _create(api)["id"]
    AgentRun.objects.create(
        agent_id=agent_id,
        trigger="manual",
        state="succeeded",
        tokens_used=100,
        started_at=timezone.now() - timedelta(minutes=5),
        finished_at=timezone.now(),
    )
    response = api("POST", f"/agents/{agent_id}/run")
    assert response.status_code == 409 and response.json()["code"] == "budget_exceeded"


@pytest.mark.p0
@pytest.mark.parametrize(
    ("change", "code"),
    [
        ({"enabled": False}, "agent_disabled"),
        ({"admin_paused": True}, "agent_paused"),
        ({"model": None}, "model_missing"),
    ],
)
def test_post_run_with_a_closed_gate_is_409_with_code(api, chat_model, change, code):
    agent_id = _create(api)["id"]
    Agent.objects.filter(pk=agent_id).update(**change)
    response = api("POST", f"/agents/{agent_id}/run")
    assert response.status_code == 409 and response.json()["code"] == code
    assert AgentRun.objects.filter(agent_id=agent_id).count() == 0


@pytest.mark.p0
@pytest.mark.parametrize(
    "body",
    [
        {"name": "x", "trigger": "scheduled"},
        {"name": "x", "state": "running"},
        {"name": ""},
        {"name": "   "},
        {"instructions": "no name"},
    ],
)
def test_trigger_or_state_in_body_or_empty_name_is_422_not_500(api, chat_model, body):
    response = api("POST", "/agents", body)
    assert response.status_code == 422, response.content
    assert response.json()["code"] == "validation_error"
    agent_id = _create(api)["id"]
    patch = {k: v for k, v in body.items() if k != "instructions"}
    if patch:
        assert api("PATCH", f"/agents/{agent_id}", patch).status_code == 422
    assert Agent.objects.get(pk=agent_id).name == "Сводка"


@pytest.mark.p0
@pytest.mark.parametrize(
    "schedule",
    [
        pytest.param({"type": "cron", "expr": "* * * * *"}, id="a-unknown-type"),
        pytest.param({"type": "calendar", "weekday": 1}, id="b-calendar-without-time"),
        pytest.param({"type": "calendar", "weekday": 7, "time": "09:00"}, id="c-weekday-out-of-0-6"),
        pytest.param({"type": "calendar", "weekday": -1, "time": "09:00"}, id="c-weekday-negative"),
        pytest.param({"type": "calendar", "weekday": 1, "time": "25:00"}, id="time-not-hhmm"),
        pytest.param({"type": "interval", "every_minutes": 0}, id="interval-zero"),
        pytest.param({"every_minutes": 5}, id="no-type"),
        pytest.param("daily", id="not-an-object"),
    ],
)
def test_schedule_is_a_discriminated_union_on_type_malformed_input_is_422_not_500(api, chat_model, schedule):
    response = api("POST", "/agents", {"name": "x", "schedule": schedule})
    assert response.status_code == 422, response.content
    assert Agent.objects.count() == 0


@pytest.mark.p0
def test_runs_list_shows_output_tokens_used_and_outcome_skipped_with_reason_distinct_from_failed(api, chat_model):
    agent_id = _create(api)["id"]
    now = timezone.now()
    AgentRun.objects.create(
        agent_id=agent_id,
        trigger="manual",
        state="succeeded",
        output="отчёт",
        tokens_used=321,
        started_at=now,
        finished_at=now,
    )
    AgentRun.objects.create(
        agent_id=agent_id,
        trigger="scheduled",
        state="failed",
        reason="iteration_cap",
        error="stopped after 8 iterations",
        tokens_used=50,
        started_at=now,
        finished_at=now,
    )
    AgentRun.objects.create(
        agent_id=agent_id, trigger="scheduled", state="skipped", reason="already_running", finished_at=now
    )
    response = api("GET", f"/agents/{agent_id}/runs")
    assert response.status_code == 200
    runs = response.json()["items"]
    assert [(r["state"], r["reason"]) for r in runs] == [
        ("skipped", "already_running"),
        ("failed", "iteration_cap"),
        ("succeeded", ""),
    ]
    assert runs[2]["output"] == "отчёт" and runs[2]["tokens_used"] == 321
    assert runs[0]["started_at"] is None and runs[1]["started_at"] is not None
    assert runs[1]["error"]
    first = api("GET", f"/agents/{agent_id}/runs?limit=1").json()
    assert [r["id"] for r in first["items"]] == [runs[0]["id"]]
    second = api("GET", f"/agents/{agent_id}/runs?limit=1&cursor={first['next_cursor']}").json()
    assert [r["id"] for r in second["items"]] == [runs[1]["id"]]


@pytest.mark.p1
def test_agent_representation_carries_next_five_runs_in_the_owner_timezone(api, owner, chat_model):
    user_timezone_set(user=owner, timezone="Europe/Berlin")
    created = _create(api, schedule={"type": "calendar", "weekday": 0, "time": "09:00"})
    assert created["timezone"] == "Europe/Berlin"
    assert len(created["next_runs"]) == 5
    assert created["next_runs"][0] == created["next_run_at"].replace("Z", "+00:00") or created["next_runs"][0]


@pytest.mark.p1
def test_the_model_is_accepted_by_id_as_the_seed_names_it_and_returned_both_ways(api, chat_model):
    """The seed's field is ``model_id`` (an id from the allow-list); the name stays accepted.
    Failed before the fix: ``model_id`` was an unknown field (422) and the answer had no id."""
    other = AllowedModelFactory(name="other-chat")
    created = _create(api, model_id=other.pk)
    assert (created["model"], created["model_id"]) == ("other-chat", other.pk)
    by_name = _create(api, model=chat_model.name)
    assert (by_name["model"], by_name["model_id"]) == (chat_model.name, chat_model.pk)
    patched = api("PATCH", f"/agents/{created['id']}", {"model_id": chat_model.pk}).json()
    assert (patched["model"], patched["model_id"]) == (chat_model.name, chat_model.pk)
    assert _create(api, model=other.name, model_id=other.pk)["model_id"] == other.pk  # both, agreeing


@pytest.mark.p1
@pytest.mark.parametrize(
    "body, code",
    [
        ({"model_id": 999_999}, "unknown_model"),
        ({"model": "fake-default", "model_id": -1}, "unknown_model"),
        ({"model_id": "abc"}, None),
    ],
)
def test_a_bad_model_id_is_422_and_nothing_is_written(api, chat_model, body, code):
    response = api("POST", "/agents", {"name": "x", **body})
    assert response.status_code == 422, response.content
    assert code is None or response.json()["code"] == code
    assert not Agent.objects.exists()


@pytest.mark.p1
def test_model_and_model_id_that_disagree_are_422(api, chat_model):
    other = AllowedModelFactory(name="other-chat")
    response = api("POST", "/agents", {"name": "x", "model": chat_model.name, "model_id": other.pk})
    assert response.status_code == 422 and response.json()["code"] == "model_mismatch"
    embedding = AllowedModelFactory(name="emb", kind="embedding")
    response = api("POST", "/agents", {"name": "x", "model_id": embedding.pk})
    assert response.status_code == 422 and response.json()["code"] == "wrong_model_kind"
    assert not Agent.objects.exists()


@pytest.mark.p1
def test_the_representation_says_whether_a_run_can_start_now_and_why_not(api, owner, chat_model):
    """``can_run`` / ``cannot_run_reason`` (the codes POST /run would answer with), so the page can
    disable «Запустить сейчас» and say why. Failed before the fix: the fields did not exist."""

    def state(agent_id):
        body = api("GET", f"/agents/{agent_id}").json()
        return body["can_run"], body["cannot_run_reason"]

    agent = _create(api)
    assert (agent["can_run"], agent["cannot_run_reason"]) == (True, None)
    assert state(agent["id"]) == (True, None)
    # a run active (queued) → already_running, as POST /run would say
    run = AgentRun.objects.create(agent_id=agent["id"], trigger="manual", state="queued")
    assert state(agent["id"]) == (False, "already_running")
    assert api("POST", f"/agents/{agent['id']}/run").json()["code"] == "already_running"
    AgentRun.objects.filter(pk=run.pk).update(state="skipped", reason="gate_closed", finished_at=timezone.now())
    # the owner's weekly budget spent → budget_exceeded
    platform_settings_update(weekly_token_budget=1000)
    AgentRun.objects.create(
        agent_id=agent["id"],
        trigger="manual",
        state="succeeded",
        tokens_used=1000,
        started_at=timezone.now() - timedelta(minutes=2),
        finished_at=timezone.now(),
    )
    assert state(agent["id"]) == (False, "budget_exceeded")
    assert [a["cannot_run_reason"] for a in api("GET", "/agents").json()["items"]] == ["budget_exceeded"]
    platform_settings_update(weekly_token_budget=1_000_000)
    # a closed gate → its code
    api("PATCH", f"/agents/{agent['id']}", {"enabled": False})
    assert state(agent["id"]) == (False, "agent_disabled")
    Agent.objects.filter(pk=agent["id"]).update(admin_paused=True)
    assert state(agent["id"]) == (False, "agent_paused")
