"""/metrics (docs/metrics.md): after a chat turn, an agent run and a hub batch the Prometheus
exposition carries their series; it is refused without the token or an allowed network.

The counters are in prometheus_client's multiprocess files, shared by every process of this test
database (xdist workers have their own), so the tests compare a scrape before with one after."""

from __future__ import annotations

import pytest
from asgiref.sync import async_to_sync
from django.test import Client
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from achilles import __version__
from achilles.llm import register_provider, unregister_provider
from agents.models import Agent, AgentRun
from tests.achilles.factories import AllowedModelFactory, UserFactory
from tests.llm_fake import ScriptedChatProvider, answer

pytestmark = [pytest.mark.integration, pytest.mark.django_db]

TOKEN = "metrics-secret-token-1"


@pytest.fixture
def scrape(settings):
    settings.METRICS_TOKEN = TOKEN
    settings.METRICS_ALLOW = []

    def get() -> dict[tuple[str, tuple], float]:
        response = Client().get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
        assert response.status_code == 200, response.content[:300]
        assert response["Content-Type"].startswith("text/plain")
        samples = {}
        for family in text_string_to_metric_families(response.content.decode()):
            for sample in family.samples:
                samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
        return samples

    return get


def value(samples, name, **labels) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def chat_turn(user, provider) -> list:
    from conversations.pipeline import prepare_turn

    register_provider("scripted-metrics", lambda spec: provider)
    try:

        async def go():
            turn = await prepare_turn(admit=lambda: user, content="Привет", conversation_id=None, identity=None)
            return [e async for e in turn.events()]

        return async_to_sync(go)()
    finally:
        unregister_provider("scripted-metrics")


def test_a_chat_turn_an_agent_run_and_a_batch_show_in_the_scrape(scrape):
    from hub import protocol, services
    from hub.permissions import hub_group_ensure

    before = scrape()
    user = UserFactory(username="metrics-user")
    AllowedModelFactory(name="metrics-chat", provider="scripted-metrics", is_default=True)
    events = chat_turn(user, ScriptedChatProvider([answer("Здравствуйте. Чем помочь?")]))
    assert events[-1].name == "done"

    agent = Agent.objects.create(
        owner=user, name="metrics-agent", instructions="Сводка", model=AllowedModelFactory(provider="scripted-metrics")
    )
    run = AgentRun.objects.create(agent=agent, trigger="manual", state="queued")
    register_provider("scripted-metrics", lambda spec: ScriptedChatProvider([answer("Готово.")]))
    try:
        from agents.tasks import agent_run_task

        agent_run_task.apply(args=[run.pk])
    finally:
        unregister_provider("scripted-metrics")
    run.refresh_from_db()
    assert run.state == "succeeded", (run.state, run.reason, run.error)
    AgentRun.objects.create(
        agent=agent, trigger="scheduled", state="skipped", reason="budget_exceeded", finished_at=timezone.now()
    )

    user.groups.add(hub_group_ensure())
    services.batch_create(user=user, title="t", commands=[{"type": "ensure_comment", "key": "AURORA-1", "body": "a"}])
    sync_agent, _ = protocol.sync_agent_create(name="metrics-onprem")
    claimed = protocol.sync_agent_claim(sync_agent=sync_agent, version=6, launcher_version=None)["commands"]
    Client().get("/api/me")  # a 401 on a resolved route

    after = scrape()
    assert value(after, "achilles_chat_turns_total", outcome="complete") == (
        value(before, "achilles_chat_turns_total", outcome="complete") + 1
    )
    assert value(after, "achilles_chat_first_sentence_seconds_count") == (
        value(before, "achilles_chat_first_sentence_seconds_count") + 1
    )
    assert (
        0
        < value(after, "achilles_chat_first_sentence_seconds_sum")
        - value(before, "achilles_chat_first_sentence_seconds_sum")
        < 60
    )
    task = {"task": "agents.tasks.agent_run_task", "outcome": "SUCCESS"}
    assert (
        value(after, "achilles_celery_tasks_total", **task) == value(before, "achilles_celery_tasks_total", **task) + 1
    )
    # states are read from the database at scrape time: this test's rows exactly
    assert value(after, "achilles_agent_runs", state="succeeded", reason="") == 1
    assert value(after, "achilles_agent_runs", state="skipped", reason="budget_exceeded") == 1
    assert value(after, "achilles_hub_commands", state="claimed") == len(claimed) >= 1
    assert value(after, "achilles_hub_commands", state="queued") == 2 - len(claimed)  # the refresh waits
    assert 0 <= value(after, "achilles_sync_agent_lag_seconds", sync_agent="metrics-onprem") < 60
    from django.conf import settings

    for queue in settings.CELERY_TASK_QUEUES:
        assert ("achilles_celery_queue_depth", (("queue", queue.name),)) in after
    # requests by the resolved route, never the raw path
    me = {"route": "api/me", "method": "GET", "status": "401"}
    assert value(after, "achilles_http_requests_total", **me) == value(before, "achilles_http_requests_total", **me) + 1
    assert value(after, "achilles_http_request_duration_seconds_count", route="api/me", method="GET") >= 1
    assert not any(name == "achilles_http_requests_total" and ("route", "/api/me") in labels for name, labels in after)


def test_knowledge_search_latency_by_path(scrape):
    from knowledge import facade

    before = scrape()
    identity = facade.Identity(principals=frozenset({"everyone"}), user_id=None)
    facade.search("отпуск", identity)
    facade.sql("SELECT 1", identity)
    after = scrape()
    for path in ("search", "sql"):
        name = "achilles_knowledge_search_duration_seconds_count"
        assert value(after, name, path=path) == value(before, name, path=path) + 1


def test_an_unknown_path_is_counted_as_unmatched_not_by_its_path(scrape):
    Client().get("/no/such/page/12345")
    after = scrape()
    assert value(after, "achilles_http_requests_total", route="<unmatched>", method="GET", status="404") >= 1
    assert not any("12345" in str(labels) for _, labels in after)


def test_without_the_token_401_and_with_nothing_configured_403(settings):
    settings.METRICS_TOKEN, settings.METRICS_ALLOW = TOKEN, []
    missing = Client().get("/metrics")
    assert missing.status_code == 401 and missing.json()["code"] == "not_authenticated"
    assert missing["WWW-Authenticate"].startswith("Bearer")
    wrong = Client().get("/metrics", HTTP_AUTHORIZATION="Bearer metrics-secret-token-2")
    assert wrong.status_code == 401 and b"achilles_" not in wrong.content
    settings.METRICS_TOKEN = ""
    closed = Client().get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    assert closed.status_code == 403 and closed.json()["code"] == "permission_denied"


def test_an_allowed_network_scrapes_without_a_token_and_others_are_refused(settings):
    settings.METRICS_TOKEN, settings.METRICS_ALLOW = "", ["10.0.0.0/8", "::1/128"]
    assert Client(REMOTE_ADDR="10.1.2.3").get("/metrics").status_code == 200
    assert Client(REMOTE_ADDR="::1").get("/metrics").status_code == 200
    assert Client(REMOTE_ADDR="192.168.1.5").get("/metrics").status_code == 403
    refused = Client(REMOTE_ADDR="10.1.2.3").post("/metrics")
    assert refused.status_code == 405 and refused.json()["code"] == "method_not_allowed" and refused["Allow"] == "GET"


def test_api_version_answers_the_release_to_a_signed_in_caller(client_for):
    assert Client().get("/api/version").status_code == 401
    user = UserFactory(username="version-reader")
    assert client_for(user).get("/api/version").json() == {"version": __version__}


def test_requests_over_asgi_are_counted_too(scrape, asgi_client):
    # daphne serves the async middleware chain (no thread hop): the same counter and histogram
    me = {"route": "api/me", "method": "GET", "status": "200"}
    before = scrape()
    assert asgi_client(UserFactory(username="asgi-reader")).request("GET", "/api/me").status_code == 200
    after = scrape()
    assert value(after, "achilles_http_requests_total", **me) == value(before, "achilles_http_requests_total", **me) + 1
    count = "achilles_http_request_duration_seconds_count"
    assert value(after, count, route="api/me", method="GET") > value(before, count, route="api/me", method="GET")
