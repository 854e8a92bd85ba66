"""A Redis blip while an agent run is in flight (issue 10, finding 2)."""

from __future__ import annotations

import time

import pytest
from django.conf import settings

from agents.models import AgentRun
from agents.services import agent_create, agent_run_request
from tests.achilles.factories import AllowedModelFactory, UserFactory
from tests.achilles.llm_stub_server import StubLLMServer, StubReply
from tests.faults.helpers import wait_for
from tests.processes import redis_start, redis_stop, start_celery_worker, stop

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

# After the run ended while Redis was down, Redis stays down this much longer: the late ack and the
# consumer's first reconnection attempts meet the dead socket.
DOWN_AFTER_THE_RUN_SECONDS = 2


def test_the_agents_worker_survives_redis_stopped_mid_run_and_the_run_finishes_once(tmp_path):
    """Failed before the fix: right after "Restoring 1 unacknowledged message(s)" the worker died
    with ``Unrecoverable error: AttributeError("'NoneType' object has no attribute 'hostname'")``
    (kombu over the ``redis+socket://`` URL). The model answers 8 s into the outage: the run ends
    while Redis is down (Redis comes back only after that) and its late ack meets the dead channel too."""
    log = tmp_path / "agents.log"
    with StubLLMServer(replies=[StubReply(text="Итог прогона.", ttft=8)]) as llm:
        AllowedModelFactory(
            name="stub-slow",
            provider="openai",
            is_default=True,
            options={"base_url": llm.base_url, "timeout": 90, "idle_timeout": 60},
        )
        agent = agent_create(owner=UserFactory(username="blip-owner"), name="blip", instructions="Отчёт.")
        worker = start_celery_worker(
            log, "agents-blip", queues=[settings.AGENT_RUN_QUEUE], pool="prefork", extra=("--concurrency=2",)
        )  # as `make run` starts it
        try:
            wait_for(lambda: "ready." in log.read_text(), 60, "worker start", log)
            run = agent_run_request(agent=agent)
            wait_for(lambda: AgentRun.objects.get(pk=run.pk).state == "running", 60, "run start", log)
            wait_for(lambda: llm.requests, 30, "the model call", log)

            redis_stop()
            # the run ends in the outage (PostgreSQL is up): its ack has no broker to go to
            finished = wait_for(
                lambda: (r := AgentRun.objects.get(pk=run.pk)).finished_at and r,
                60,
                "run finish while Redis is down",
                log,
                every=0.1,
            )
            time.sleep(DOWN_AFTER_THE_RUN_SECONDS)
            redis_start()

            time.sleep(5)  # a redelivered copy would have started by now
            assert worker.poll() is None, log.read_text()[-4000:]
            assert "Unrecoverable error" not in log.read_text()
        finally:
            stop(worker)
    assert (finished.state, finished.output) == ("succeeded", "Итог прогона."), (
        finished.error,
        log.read_text()[-3000:],
    )
    assert len(llm.requests) == 1  # executed exactly once
    assert AgentRun.objects.filter(agent=agent).count() == 1
