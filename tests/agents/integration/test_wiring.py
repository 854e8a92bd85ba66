"""How agent runs and the platform jobs reach their workers: the Celery route of an agent run and
Beat's schedule of the platform jobs, each pinned by a test (issue 14); a run sent through the real
Redis broker is read back from the agents queue."""

from __future__ import annotations

import base64
import json
import random

import pytest
import redis
from django.conf import settings

pytestmark = [pytest.mark.integration, pytest.mark.p1]


def test_agent_runs_are_routed_to_the_agents_queue_and_platform_jobs_to_the_default_one():
    from achilles.celery_app import app

    def queue_of(task_name: str) -> str:
        return app.amqp.router.route({}, task_name, args=(1,), kwargs={})["queue"].name

    assert queue_of("agents.tasks.agent_run_task") == settings.AGENT_RUN_QUEUE
    assert settings.AGENT_RUN_QUEUE.startswith("agents")
    # a long agent run can never hold up the tick: the tick and the reaper go elsewhere
    for job in ("agents.tasks.agents_scheduler_tick_task", "agents.tasks.agent_runs_reap_stale_task"):
        assert queue_of(job) == settings.CELERY_TASK_DEFAULT_QUEUE != settings.AGENT_RUN_QUEUE


def test_beat_schedules_every_platform_job_at_its_declared_period(db):
    """After migrate (post_migrate syncs them), Beat's own scheduler reads every declared platform
    job from the database with its period — the agents' scheduler tick among them."""
    from achilles.beat import HeartbeatDatabaseScheduler
    from achilles.celery_app import app
    from achilles.periodic import MANAGED_PREFIX

    scheduler = HeartbeatDatabaseScheduler(app=app, lazy=True)
    entries = scheduler.all_as_schedule()

    for key, job in settings.PLATFORM_PERIODIC_JOBS.items():
        entry = entries[f"{MANAGED_PREFIX}{key}"]
        assert entry.task == job["task"]
        assert entry.schedule.run_every.total_seconds() == job["every_seconds"]
    assert settings.PLATFORM_PERIODIC_JOBS["agents.scheduler_tick"]["task"] == "agents.tasks.agents_scheduler_tick_task"


def _args(message: dict) -> list:
    assert message["properties"]["body_encoding"] == "base64"
    return json.loads(base64.b64decode(message["body"]))[0]  # protocol 2: [args, kwargs, embed]


def _queued_messages(client, queue: str) -> list[dict]:
    return [json.loads(raw) for raw in client.lrange(queue, 0, -1)]


@pytest.mark.django_db
def test_a_run_sent_through_the_real_broker_lands_on_the_agents_queue():
    """``apply_async`` (run now) and the tick's batched publish (``runs_dispatch``, which bypasses
    Celery's per-call routing) both put the run into the agents queue in Redis — never the default
    queue the platform jobs share."""
    from agents.services.dispatch import runs_dispatch
    from agents.tasks import agent_run_task

    client = redis.Redis.from_url(settings.REDIS_URL)
    # no such rows: the messages are what is checked, and they are removed below (only these)
    ours = [[random.randrange(10**9, 2 * 10**9)], []]
    ours[1] = [ours[0][0] + 1]

    def mine(queue: str) -> list[dict]:
        return [
            m
            for m in _queued_messages(client, queue)
            if m["headers"].get("task") == "agents.tasks.agent_run_task" and _args(m) in ours
        ]

    try:
        sent = agent_run_task.apply_async(args=ours[0], retry=False)
        assert runs_dispatch(ours[1]) == ours[1]
        landed = mine(settings.AGENT_RUN_QUEUE)
        assert sorted(_args(m) for m in landed) == ours
        assert sent.id in {m["headers"]["id"] for m in landed}
        assert mine(settings.CELERY_TASK_DEFAULT_QUEUE) == []
    finally:
        for raw in client.lrange(settings.AGENT_RUN_QUEUE, 0, -1):
            message = json.loads(raw)
            if message["headers"].get("task") == "agents.tasks.agent_run_task" and _args(message) in ours:
                client.lrem(settings.AGENT_RUN_QUEUE, 0, raw)


@pytest.mark.django_db
def test_the_ticks_rendered_messages_are_exactly_what_kombu_writes_for_the_same_runs():
    """The tick renders each run's message from a template taken off a real kombu publication and
    pushes a chunk in one LPUSH: on the wire it must be kombu's message to the letter (but the task
    id and delivery tag, fresh per message, and the run id itself), in the order given."""
    import os
    import uuid

    from kombu import Queue

    from achilles.celery_app import app
    from agents.services import dispatch

    queue = Queue(f"agents-template-test-{uuid.uuid4().hex}")
    ours = [random.randrange(10**9, 2 * 10**9) + i for i in range(4)]
    with app.producer_or_acquire() as producer:
        client = producer.channel.client
        try:
            dispatch._send(ours[0], producer, queue)  # kombu's own path, message by message
            dispatch._publish(ours[1:], producer, queue)  # the rendered chunk
            assert dispatch._templates[(os.getpid(), queue.name)] is not None  # not the fallback
            # the consumer pops from the right: oldest first
            messages = [json.loads(raw) for raw in reversed(client.lrange(queue.name, 0, -1))]
        finally:
            client.delete(queue.name)
    assert [_args(m) for m in messages] == [[run_id] for run_id in ours]
    task_ids = {m["headers"]["id"] for m in messages}
    tags = {m["properties"]["delivery_tag"] for m in messages}
    assert len(task_ids) == len(messages) == len(tags)
    assert all(uuid.UUID(value).version == 4 for value in task_ids | tags)  # as Celery and kombu make them

    def normalized(message: dict) -> dict:
        headers, properties = message["headers"], message["properties"]
        assert headers["root_id"] == properties["correlation_id"] == headers["id"]
        assert headers["argsrepr"] == f"({_args(message)[0]},)"
        body = base64.b64decode(message["body"]).decode().replace(str(_args(message)[0]), "RUN")
        return message | {
            "body": body,
            "headers": headers | {"id": "", "root_id": "", "argsrepr": ""},
            "properties": properties | {"correlation_id": "", "delivery_tag": ""},
        }

    assert all(normalized(m) == normalized(messages[0]) for m in messages[1:])
