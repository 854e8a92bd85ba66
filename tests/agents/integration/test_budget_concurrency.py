"""Budget under concurrency (issue 10, finding 6): 200 concurrent run-now requests of one owner,
on the real database, each run executed by the scripted model right after its 202."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from django.db import connection
from django.test import Client

from achilles.llm.types import Usage
from achilles.platform import platform_settings_update
from agents.models import AgentRun
from agents.selectors import owner_tokens_this_week
from tests.llm_fake import answer

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

BUDGET = 20_000
RUN_CAP = 3_000
RUN_SPEND = 1_500  # what each scripted run spends (input + output)
REQUESTS = 200


def test_two_hundred_concurrent_run_now_requests_stay_within_the_budget_plus_one_run_cap(
    owner, agent_factory, fake_chat, fake_ks, dispatched, run_task
):
    """Failed before the fix: every start checked the spend alone, so runs in flight were not
    counted and concurrent starts all passed (the probe: 312 869 tokens on a 200 000 budget)."""
    from django.utils import timezone

    platform_settings_update(weekly_token_budget=BUDGET, agent_run_token_cap=RUN_CAP)
    agents = [agent_factory(owner=owner) for _ in range(REQUESTS)]
    for _ in range(REQUESTS * 2):
        fake_chat.add_round(answer("Отчёт.", usage=Usage(1000, RUN_SPEND - 1000)))
    client = Client()
    client.force_login(owner)
    lock = threading.Lock()
    statuses: list[int] = []

    def run_now(agent_id: int) -> None:
        try:
            response = client.post(f"/api/agents/{agent_id}/run")
            with lock:
                statuses.append(response.status_code)
            if response.status_code == 202:
                run_task(response.json()["run_id"])  # the worker's part, at once
        finally:
            connection.close()

    with ThreadPoolExecutor(max_workers=32) as pool:
        list(pool.map(run_now, [agent.pk for agent in agents]))

    spent = owner_tokens_this_week(owner=owner, now=timezone.now())
    assert set(statuses) <= {202, 409} and statuses.count(202) >= 1
    assert spent <= BUDGET + RUN_CAP, (spent, statuses.count(202))
    assert not AgentRun.objects.filter(state__in=["queued", "running"]).exists()
