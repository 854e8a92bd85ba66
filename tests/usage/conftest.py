"""«Расходы AI» fixtures: the Query Engine's scripted chat turns (``engine``) reused as they are, and
``spend``: known tokens written through real chat turns and a real agent run, at the week boundary
of the organisation's time zone (Moscow: Monday 00:00 MSK is Sunday 21:00 UTC)."""

from datetime import UTC, datetime
from decimal import Decimal

import pytest
from django.contrib.auth.models import Group

from achilles.llm import TextDelta, Usage
from achilles.llm.registry import register_provider, unregister_provider
from agents.models import Agent, AgentRun
from agents.services import agent_run_request
from agents.services.runs import run_execute
from conversations.models import Message
from tests.conversations.conftest import chat_model, engine, fake_cache, stub_ks  # noqa: F401
from tests.llm_fake import ScriptedChatProvider, answer

SUNDAY_LATE = datetime(2026, 11, 22, 20, 30, tzinfo=UTC)  # Sunday 23:30 MSK: last week
MONDAY_EARLY = datetime(2026, 11, 22, 21, 30, tzinfo=UTC)  # Monday 00:30 MSK: this week
MONDAY_TEN = datetime(2026, 11, 23, 7, 0, tzinfo=UTC)  # Monday 10:00 MSK
WEEK = {"from": "2026-11-23", "to": "2026-11-29"}


@pytest.fixture
def spend(engine, user_factory, model_factory):  # noqa: F811
    """alice: two chat answers (460 last week, 60 this week); bob: one agent run (1 000 this week)."""
    finance, dev = Group.objects.create(name="finance"), Group.objects.create(name="dev")
    alice = user_factory(username="alice", first_name="Алиса", last_name="Котова")
    bob = user_factory(username="bob")
    alice.groups.add(finance)
    bob.groups.add(finance, dev)
    engine.ks.empty = True  # answers released as generated: no search on offer
    engine.model.model.input_price_per_mtok = Decimal("1.5")
    engine.model.model.output_price_per_mtok = Decimal("6")
    engine.model.model.save()
    engine.script(answer("Первый ответ.", usage=Usage(400, 60)), answer("Второй ответ.", usage=Usage(50, 10)))
    first = engine.turn(alice, "Первый вопрос?")
    second = engine.turn(alice, "Второй вопрос?")
    assert first.done.tokens_used == 460 and second.done.tokens_used == 60
    # the answers finished at either side of the week's start (moved there: the database stamps them)
    answers = list(Message.objects.filter(role="assistant").order_by("id"))
    Message.objects.filter(pk=answers[0].pk).update(created_at=SUNDAY_LATE)
    Message.objects.filter(pk=answers[1].pk).update(created_at=MONDAY_EARLY)
    # bob's agent runs for real on a scripted model that reports usage
    provider = ScriptedChatProvider([[TextDelta("Отчёт готов."), Usage(700, 300)]])
    register_provider("usage-fake", lambda spec: provider)
    agent_model = model_factory(name="agent-model", provider="usage-fake")
    agent = Agent.objects.create(owner=bob, name="Сводка", model=agent_model)
    run = agent_run_request(agent=agent)
    assert run_execute(run.pk) == "succeeded"
    unregister_provider("usage-fake")
    AgentRun.objects.filter(pk=run.pk).update(finished_at=MONDAY_TEN)
    return {"alice": alice, "bob": bob, "agent": agent, "run": AgentRun.objects.get(pk=run.pk)}
