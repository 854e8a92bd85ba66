"""Agent Engine fixtures: a fake chat client, fake search/graph/sql (KS primitives), time control
(time-machine's ``time_machine`` fixture), factories of agents/agent_runs, and the task handler
called directly — no worker (the seed's «SAQ напрямую»; our queue is Celery)."""

from __future__ import annotations

import factory
import pytest

from tests.achilles.factories import AllowedModelFactory, UserFactory
from tests.agents.fakes import FakeKnowledgeStore
from tests.llm_fake import ScriptedChatProvider

FAKE_PROVIDER = "fake-agent-engine"


@pytest.fixture
def fake_ks(monkeypatch) -> FakeKnowledgeStore:
    """The KS facade replaced by the fake for this test (search/graph/sql/is_empty)."""
    from knowledge import facade

    fake = FakeKnowledgeStore()
    for name in ("search", "graph", "sql", "is_empty"):
        monkeypatch.setattr(facade, name, getattr(fake, name))
    return fake


# ------------------------------------------------------------------ fake chat client


@pytest.fixture
def fake_chat():
    """A scripted chat model reachable as provider ``fake-agent-engine``: add rounds to it."""
    from achilles.llm.registry import register_provider, unregister_provider

    provider = ScriptedChatProvider()
    register_provider(FAKE_PROVIDER, lambda spec: provider)
    yield provider
    unregister_provider(FAKE_PROVIDER)


# ------------------------------------------------------------------ factories


class AgentFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = "agents.Agent"

    owner = factory.SubFactory(UserFactory)
    name = factory.Sequence(lambda n: f"agent-{n}")
    instructions = "Что сказано в базе знаний про отпуск?"
    model = factory.SubFactory(AllowedModelFactory, provider=FAKE_PROVIDER)
    schedule = None
    enabled = True
    admin_paused = False
    next_run_at = None


class AgentRunFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = "agents.AgentRun"

    agent = factory.SubFactory(AgentFactory)
    trigger = "manual"
    state = "queued"


@pytest.fixture
def agent_factory(db):
    return AgentFactory


@pytest.fixture
def run_factory(db):
    return AgentRunFactory


@pytest.fixture
def chat_model(db):
    """The default chat model of the allow-list, served by the fake chat client."""
    return AllowedModelFactory(name="fake-default", provider=FAKE_PROVIDER, is_default=True)


@pytest.fixture
def owner(db):
    return UserFactory(username="owner")


# ------------------------------------------------------------------ the task, without a worker


@pytest.fixture
def dispatched(monkeypatch):
    """Captures what would go to the broker (run ids) instead of sending it."""
    sent: list[int] = []
    monkeypatch.setattr("agents.services.dispatch._publish", lambda run_ids, producer, queue: sent.extend(run_ids))
    return sent


@pytest.fixture
def run_task():
    """The Celery task's handler called directly, in-process: ``run_task(run_id)``."""
    from agents.tasks import agent_run_task

    return agent_run_task
