"""The background lane: runs go through the queue, under the owner's identity, one lock per agent."""

from __future__ import annotations

import pytest

from agents.models import AgentRun
from agents.services import agent_run_request
from knowledge.facade import Identity
from tests.llm_fake import answer, call_tool, fail

pytestmark = [pytest.mark.integration, pytest.mark.django_db]


@pytest.mark.p1
def test_a_run_request_only_queues_the_run_executes_in_the_background_task(
    agent_factory, fake_chat, fake_ks, dispatched, run_task, django_capture_on_commit_callbacks
):
    agent = agent_factory()
    fake_chat.add_round(answer("готово"))
    with django_capture_on_commit_callbacks(execute=True):
        run = agent_run_request(agent=agent)
    # nothing ran in the request: no model call, no KS call; only a task id went to the queue
    assert fake_chat.calls == [] and fake_ks.calls == []
    assert dispatched == [run.pk]
    run_task(run.pk)
    assert AgentRun.objects.get(pk=run.pk).state == "succeeded"


@pytest.mark.p1
def test_nothing_is_enqueued_when_the_request_transaction_rolls_back(
    agent_factory, dispatched, django_capture_on_commit_callbacks
):
    from django.db import transaction

    agent = agent_factory()
    with django_capture_on_commit_callbacks(execute=True):
        try:
            with transaction.atomic():
                agent_run_request(agent=agent)
                raise RuntimeError("rolled back")
        except RuntimeError:
            pass
    assert dispatched == [] and AgentRun.objects.count() == 0


@pytest.mark.p0
def test_a_run_uses_the_owner_identity_only(agent_factory, user_factory, fake_chat, fake_ks, dispatched, run_task):
    owner = user_factory(username="anna", groups=["finance"])
    agent = agent_factory(owner=owner)
    fake_chat.add_round(call_tool("search", query="бюджет"))
    fake_chat.add_round(call_tool("sql", query="SELECT 1"))
    fake_chat.add_round(answer("ok"))
    run = agent_run_request(agent=agent)
    run_task(run.pk)
    identities = {identity for _, _, identity in fake_ks.calls}
    assert identities == {Identity.for_user(owner)}
    assert "group:finance" in next(iter(identities)).principals
    assert f"user:{owner.pk}" in next(iter(identities)).principals


@pytest.mark.p1
def test_one_agent_active_run_does_not_block_another_agent(agent_factory, owner, run_factory):
    busy, free = agent_factory(owner=owner), agent_factory(owner=owner)
    run_factory(agent=busy, state="running", started_at="2026-11-25T12:00Z", heartbeat_at="2026-11-25T12:00Z")
    assert agent_run_request(agent=free).state == "queued"


@pytest.mark.p1
def test_a_failing_run_does_not_affect_another_agent_run(agent_factory, fake_chat, fake_ks, dispatched, run_task):
    broken, healthy = agent_factory(), agent_factory()
    fake_chat.add_round([fail(detail="boom")])
    fake_chat.add_round(answer("всё хорошо"))
    first, second = agent_run_request(agent=broken), agent_run_request(agent=healthy)
    run_task(first.pk)
    run_task(second.pk)
    assert AgentRun.objects.get(pk=first.pk).state == "failed"
    assert AgentRun.objects.get(pk=second.pk).output == "всё хорошо"
