"""Run lifecycle (AE-RUN): states, the single-flight lock, stale reaping, tokens, timestamps."""

from __future__ import annotations

import pytest

from achilles.llm.fake import answer, call_tool
from achilles.llm.types import Usage
from agents.models import AgentRun
from agents.services import agent_run_request

pytestmark = [pytest.mark.integration, pytest.mark.django_db]


@pytest.mark.p0
def test_run_goes_queued_running_succeeded_with_output_written(agent_factory, fake_chat, fake_ks, dispatched, run_task,
                                                               django_capture_on_commit_callbacks):
    # given an agent whose model searches, then answers
    agent = agent_factory()
    fake_chat.add_round(call_tool("search", query="отпуск"))
    fake_chat.add_round(answer("Положено 28 дней [1]", usage=Usage(100, 20)))
    # when a manual run is requested and its task handled
    with django_capture_on_commit_callbacks(execute=True):
        run = agent_run_request(agent=agent)
    assert run.state == "queued" and dispatched == [run.pk]
    run_task(run.pk)
    # then the row carries the output
    run.refresh_from_db()
    assert run.state == "succeeded"
    assert run.output == "Положено 28 дней [1]"
    assert fake_ks.names() == ["search"]
