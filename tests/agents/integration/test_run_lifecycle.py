"""Run lifecycle (AE-RUN): states, the single-flight lock, stale reaping, tokens, timestamps."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from achilles.errors import Conflict, NotFound
from achilles.llm.types import Usage
from achilles.platform import platform_settings_update
from agents.models import Agent, AgentRun
from agents.services import agent_run_request, agent_runs_reap_stale, scheduler_tick
from tests.llm_fake import answer, call_tool, fail

pytestmark = [pytest.mark.integration, pytest.mark.django_db]


def _request(agent, capture):
    with capture(execute=True):
        return agent_run_request(agent=agent)


@pytest.mark.p0
def test_run_goes_queued_running_succeeded_with_output_written(
    agent_factory, fake_chat, fake_ks, dispatched, run_task, django_capture_on_commit_callbacks
):
    # given an agent whose model searches, then answers
    agent = agent_factory()
    states = []
    fake_ks.on_call = lambda name: states.append(AgentRun.objects.get().state)
    fake_chat.add_round(call_tool("search", query="отпуск"))
    fake_chat.add_round(answer("Положено 28 дней [1]", usage=Usage(100, 20)))
    # when a manual run is requested and its task handled
    run = _request(agent, django_capture_on_commit_callbacks)
    assert run.state == "queued" and run.trigger == "manual" and dispatched == [run.pk]
    run_task(run.pk)
    # then it was running while the model worked, and the row carries the output
    run.refresh_from_db()
    assert states == ["running"]
    assert run.state == "succeeded"
    assert run.output == "Положено 28 дней [1]"
    assert run.reason == "" and run.error == ""
    assert fake_ks.names() == ["search"]


@pytest.mark.p0
def test_run_failure_sets_failed_with_error_filled_distinct_from_skipped(
    agent_factory, fake_chat, fake_ks, dispatched, run_task, django_capture_on_commit_callbacks
):
    # given a model that fails mid-run
    agent = agent_factory()
    fake_chat.add_round(call_tool("search", query="x"))
    fake_chat.add_round([fail(detail="provider exploded")])
    run = _request(agent, django_capture_on_commit_callbacks)
    # when the run executes
    run_task(run.pk)
    run.refresh_from_db()
    # then it failed: started, finished, error and reason filled — unlike a skipped run
    assert run.state == "failed"
    assert run.reason == "model_error" and "provider exploded" in run.error
    assert run.started_at is not None and run.finished_at is not None
    assert run.state != "skipped"


@pytest.mark.p0
def test_iteration_cap_fails_the_run_with_reason_iteration_cap(
    agent_factory, fake_chat, fake_ks, dispatched, run_task, django_capture_on_commit_callbacks
):
    platform_settings_update(agent_iteration_cap=3)
    for _ in range(5):
        fake_chat.add_round(call_tool("search", query="снова"))
    run = _request(agent_factory(), django_capture_on_commit_callbacks)
    run_task(run.pk)
    run.refresh_from_db()
    assert (run.state, run.reason) == ("failed", "iteration_cap")
    assert len(fake_chat.calls) == 3
    assert run.started_at is not None and run.tokens_used > 0


@pytest.mark.p0
def test_tokens_used_is_set_from_the_actual_run(
    agent_factory, fake_chat, fake_ks, dispatched, run_task, django_capture_on_commit_callbacks
):
    fake_chat.add_round(call_tool("search", query="x") + [Usage(1000, 50)])
    fake_chat.add_round(answer("готово", usage=Usage(1200, 80)))
    run = _request(agent_factory(), django_capture_on_commit_callbacks)
    run_task(run.pk)
    run.refresh_from_db()
    assert run.tokens_used == 2330


@pytest.mark.p1
def test_started_at_finished_at_set_and_created_at_updated_at_by_server_default_and_trigger(
    agent_factory, fake_chat, fake_ks, dispatched, run_task, django_capture_on_commit_callbacks
):
    fake_chat.add_round(answer("ok"))
    before = timezone.now()
    run = _request(agent_factory(), django_capture_on_commit_callbacks)
    run.refresh_from_db()
    assert run.started_at is None and run.finished_at is None and run.created_at is not None
    run_task(run.pk)
    run.refresh_from_db()
    assert before <= run.started_at <= run.finished_at
    # created_at / updated_at come from the database: a raw INSERT gets them, a raw UPDATE bumps updated_at
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO agent_runs (agent_id, trigger, state, reason, output, error, tokens_used, finished_at) "
            "VALUES (%s, 'manual', 'succeeded', '', '', '', 0, now()) RETURNING created_at, updated_at",
            [run.agent_id],
        )
        created_at, updated_at = cursor.fetchone()
        assert created_at is not None and updated_at is not None
        cursor.execute(
            "UPDATE agent_runs SET updated_at = '2000-01-01' , output = 'x' WHERE id = %s RETURNING updated_at",
            [run.pk],
        )
        assert cursor.fetchone()[0].year > 2000


@pytest.mark.p0
def test_skipped_run_has_no_started_at_refused_before_start_not_cut_mid_run(agent_factory):
    agent = agent_factory()
    # the database refuses a skipped row that claims it started
    with (
        pytest.raises(IntegrityError, match="agents_agentrun_skipped_never_started"),
        transaction.atomic(),
        connection.cursor() as cursor,
    ):
        cursor.execute(
            "INSERT INTO agent_runs (agent_id, trigger, state, reason, output, error, tokens_used, started_at, "
            "finished_at) VALUES (%s, 'scheduled', 'skipped', 'already_running', '', '', 0, now(), now())",
            [agent.pk],
        )
    # … and one that spent tokens
    with (
        pytest.raises(IntegrityError, match="agents_agentrun_skipped_never_started"),
        transaction.atomic(),
        connection.cursor() as cursor,
    ):
        cursor.execute(
            "INSERT INTO agent_runs (agent_id, trigger, state, reason, output, error, tokens_used, finished_at) "
            "VALUES (%s, 'scheduled', 'skipped', 'budget_exceeded', '', '', 10, now())",
            [agent.pk],
        )


@pytest.mark.p0
def test_partial_unique_one_active_run_per_agent_settles_the_race_in_the_database(agent_factory, run_factory):
    agent = agent_factory()
    run_factory(agent=agent, state="queued")
    # a raw INSERT of a second active run is refused by the database, not by code
    for state in ("queued", "running"):
        with (
            pytest.raises(IntegrityError, match="agents_agentrun_one_active_per_agent"),
            transaction.atomic(),
            connection.cursor() as cursor,
        ):
            cursor.execute(
                "INSERT INTO agent_runs (agent_id, trigger, state, reason, output, error, tokens_used, started_at) "
                "VALUES (%s, 'scheduled', %s, '', '', '', 0, now())",
                [agent.pk, state],
            )
    # finished runs do not hold the lock
    AgentRun.objects.filter(agent=agent).update(state="succeeded", finished_at=timezone.now())
    run_factory(agent=agent, state="queued")


@pytest.mark.p0
def test_stale_heartbeat_running_run_is_reaped_failed_stale_lock_released_agent_runs_again(
    agent_factory, run_factory, fake_chat, fake_ks, dispatched, run_task, django_capture_on_commit_callbacks
):
    # given a zombie: running, heartbeat older than agent_stale_after_seconds
    platform_settings_update(agent_stale_after_seconds=60)
    agent = agent_factory()
    now = timezone.now()
    zombie = run_factory(
        agent=agent, state="running", started_at=now - timedelta(minutes=5), heartbeat_at=now - timedelta(minutes=2)
    )
    fresh = run_factory(state="running", started_at=now, heartbeat_at=now - timedelta(seconds=10))
    with pytest.raises(Conflict):
        agent_run_request(agent=agent)
    # when the reaper runs
    assert agent_runs_reap_stale(now=now) == 1
    # then the zombie is failed/stale, the live run is untouched and the agent runs again
    zombie.refresh_from_db()
    fresh.refresh_from_db()
    assert (zombie.state, zombie.reason) == ("failed", "stale") and zombie.finished_at is not None
    assert fresh.state == "running"
    fake_chat.add_round(answer("снова работаю"))
    run = _request(agent, django_capture_on_commit_callbacks)
    run_task(run.pk)
    run.refresh_from_db()
    assert run.state == "succeeded"


@pytest.mark.p1
def test_a_zombie_finishing_after_being_reaped_keeps_the_stale_verdict(
    agent_factory, fake_chat, fake_ks, dispatched, run_task, django_capture_on_commit_callbacks
):
    agent = agent_factory()

    def reaped_mid_run(name):
        AgentRun.objects.filter(agent=agent).update(state="failed", reason="stale", finished_at=timezone.now())

    fake_ks.on_call = reaped_mid_run
    fake_chat.add_round(call_tool("search", query="x"))
    run = _request(agent, django_capture_on_commit_callbacks)
    run_task(run.pk)
    run.refresh_from_db()
    assert (run.state, run.reason) == ("failed", "stale")
    assert len(fake_chat.calls) == 1  # the heartbeat noticed and the loop stopped


@pytest.mark.p1
def test_a_duplicate_delivery_of_the_task_does_not_run_twice(
    agent_factory, fake_chat, fake_ks, dispatched, run_task, django_capture_on_commit_callbacks
):
    fake_chat.add_round(answer("один раз"))
    run = _request(agent_factory(), django_capture_on_commit_callbacks)
    assert run_task(run.pk) == "succeeded"
    assert run_task(run.pk) is None
    assert len(fake_chat.calls) == 1


@pytest.mark.p1
def test_a_gate_closed_after_the_request_skips_the_queued_run_without_starting_it(
    agent_factory, fake_chat, dispatched, run_task, django_capture_on_commit_callbacks
):
    agent = agent_factory()
    run = _request(agent, django_capture_on_commit_callbacks)
    Agent.objects.filter(pk=agent.pk).update(admin_paused=True)
    run_task(run.pk)
    run.refresh_from_db()
    assert (run.state, run.reason, run.started_at) == ("skipped", "gate_closed", None)
    assert fake_chat.calls == []


@pytest.mark.p0
@pytest.mark.django_db(transaction=True)
def test_manual_run_racing_a_due_slot_100_times_ends_with_exactly_one_active_run(agent_factory, dispatched):
    # given an interval agent whose slot is due right now
    agent = agent_factory(schedule={"type": "interval", "every_minutes": 5})
    errors: list[BaseException] = []
    # The losing click's code is checked in the test's own thread: an assertion inside the worker
    # thread's ``except`` would only end that thread, never fail the test (issue 14).
    conflicts: list[str] = []

    def manual(barrier):
        try:
            barrier.wait()
            agent_run_request(agent=agent)
        except Conflict as exc:
            conflicts.append(exc.code)
        except BaseException as exc:  # anything else would be a 500
            errors.append(exc)
        finally:
            connection.close()

    def tick(barrier, now):
        try:
            barrier.wait()
            scheduler_tick(now=now, redispatch=False)
        except BaseException as exc:
            errors.append(exc)
        finally:
            connection.close()

    for _ in range(100):
        now = timezone.now()
        Agent.objects.filter(pk=agent.pk).update(next_run_at=now - timedelta(seconds=1))
        barrier = threading.Barrier(2)
        threads = [threading.Thread(target=manual, args=(barrier,)), threading.Thread(target=tick, args=(barrier, now))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        # then exactly one active run, whoever won; a losing click was told already_running
        assert errors == []
        assert set(conflicts) <= {"already_running"}
        assert AgentRun.objects.filter(agent=agent, state__in=["queued", "running"]).count() == 1
        AgentRun.objects.filter(agent=agent, state__in=["queued", "running"]).update(
            state="succeeded", finished_at=timezone.now()
        )
    assert errors == []
    runs = AgentRun.objects.filter(agent=agent)
    assert runs.filter(state="succeeded").count() == 100
    # every lost race on the scheduler's side left an honest skipped row, never a second active run
    assert set(runs.filter(state="skipped").values_list("reason", flat=True)) <= {"already_running"}


def test_a_run_requested_for_an_agent_deleted_after_it_was_read_is_a_not_found(agent_factory, dispatched):
    """Failed before the fix: DELETE /api/agents/{id} racing POST …/run gave a 500 (the run's owner,
    copied from its agent by a trigger, was NULL: NotNullViolation on agent_runs.owner_id)."""
    # given an agent the run request has already read (its permission check passed)
    agent = agent_factory()
    # when a concurrent DELETE commits before the run is written
    Agent.objects.filter(pk=agent.pk).delete()
    # then the request is told the agent is gone, and nothing was queued
    with pytest.raises(NotFound) as caught:
        agent_run_request(agent=agent)
    assert caught.value.code == "agent_not_found"
    assert not AgentRun.objects.filter(agent_id=agent.pk).exists() and dispatched == []


@pytest.mark.p1
@pytest.mark.parametrize(
    ("columns", "constraint"),
    [
        ({"trigger": "'cron'"}, "agents_agentrun_trigger_valid"),
        ({"state": "'paused'", "finished_at": "now()"}, "agents_agentrun_state_valid"),
        ({"state": "'succeeded'"}, "agents_agentrun_finished_when_done"),
        ({"state": "'running'"}, "agents_agentrun_running_has_started"),
    ],
)
def test_run_row_checks_refuse_impossible_rows_by_raw_sql(agent_factory, columns, constraint):
    agent = agent_factory()
    row = {
        "agent_id": str(agent.pk),
        "trigger": "'manual'",
        "state": "'queued'",
        "reason": "''",
        "output": "''",
        "error": "''",
        "tokens_used": "0",
        **columns,
    }
    with pytest.raises(IntegrityError, match=constraint), transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(f"INSERT INTO agent_runs ({', '.join(row)}) VALUES ({', '.join(row.values())})")


@pytest.mark.p1
@pytest.mark.django_db(transaction=True)
def test_one_model_call_longer_than_the_stale_window_is_not_reaped_while_the_worker_lives(fake_chat, fake_ks):
    from agents.services.runs import run_execute
    from tests.agents.conftest import AgentFactory, AgentRunFactory
    from tests.llm_fake import Delay

    # given a 1 s stale window and a model whose single call takes 2.5 s
    platform_settings_update(agent_stale_after_seconds=1)
    fake_chat.add_round([Delay(2.5), *answer("долгий ответ")])
    run = AgentRunFactory(agent=AgentFactory(), state="queued")
    outcome: list = []

    def execute():
        try:
            outcome.append(run_execute(run.pk))
        finally:
            connection.close()  # as a Celery task's end does; a thread's end does not return it to the pool

    worker = threading.Thread(target=execute)
    worker.start()
    # when the reaper keeps running during the call
    reaped = 0
    while worker.is_alive():
        reaped += agent_runs_reap_stale()
        worker.join(0.2)
    # then the live run is never taken for a dead one, and it finishes
    run.refresh_from_db()
    assert reaped == 0 and outcome == ["succeeded"]
    assert (run.state, run.output) == ("succeeded", "долгий ответ")


@pytest.mark.p0
def test_an_empty_base_is_not_a_readiness_gate_the_run_starts_without_knowledge_tools(
    agent_factory, fake_chat, fake_ks, run_task
):
    """On an empty knowledge base the run starts and succeeds; the model gets no search/graph/sql.
    Failed before the fix: the three tools were offered on an empty base."""
    fake_ks.empty = True
    fake_chat.add_round(answer("В базе знаний пока нет данных по задаче."))
    run = AgentRun.objects.create(agent=agent_factory(), trigger="manual", state="queued")

    run_task(run.pk)

    run.refresh_from_db()
    assert (run.state, run.output) == ("succeeded", "В базе знаний пока нет данных по задаче.")
    [call] = fake_chat.calls
    assert call.tools == () and fake_ks.calls == []
