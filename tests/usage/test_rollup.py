"""The daily roll-up is the GROUP BY of the raw rows, kept by the database on every write.

Property: over random inserts, updates and deletes of answers and runs (and deletions of whole
conversations, agents and users, and a change of the organisation's time zone), ``usage_daily``
equals a plain Python sum over ``messages`` and ``agent_runs``. And the database says no: negative
prices, a split that does not add up, a roll-up that would go negative.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.db import IntegrityError, connection, transaction
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from achilles.platform import platform_settings_update
from agents.models import Agent, AgentRun
from conversations.models import Conversation, Message
from tests.usage.oracle import daily_by_month, daily_by_week, monthly, raw_sums, rollup, weekly

pytestmark = [pytest.mark.integration, pytest.mark.p0, pytest.mark.django_db]

BASE = datetime(2026, 11, 22, 20, 0, tzinfo=UTC)  # Sunday 23:00 in Moscow: a day (and week) boundary


@pytest.fixture
def people(user_factory):
    return [user_factory(username=f"spender{i}") for i in range(3)]


def _answer(conversation, tokens, *, model="m-a", split=True, at=BASE):
    inputs = tokens // 3 if split else None
    return Message.objects.create(
        conversation=conversation,
        role="assistant",
        content="ответ",
        model=model,
        tokens_used=tokens,
        input_tokens=inputs,
        output_tokens=tokens - inputs if inputs is not None else None,
        created_at=at,
    )


def _run(agent, tokens, *, model="m-b", finished=BASE, split=True, state="succeeded"):
    inputs = tokens // 2 if split else None
    return AgentRun.objects.create(
        agent=agent,
        trigger="manual",
        state=state,
        model=model,
        tokens_used=tokens,
        input_tokens=inputs,
        output_tokens=tokens - inputs if inputs is not None else None,
        started_at=(finished or BASE) - timedelta(minutes=1),
        finished_at=finished,
    )


def test_an_answer_and_a_run_land_on_their_local_day(people):
    # given the organisation in Moscow (UTC+3) and writes at 20:30 and 21:30 UTC on Sunday
    alice = people[0]
    thread = Conversation.objects.create(user=alice)
    agent = Agent.objects.create(owner=alice, name="a")
    _answer(thread, 300, at=BASE + timedelta(minutes=30))  # Sunday 23:30 MSK
    _run(agent, 100, finished=BASE + timedelta(minutes=90))  # Monday 00:30 MSK
    # then the answer is Sunday's, the run Monday's, each with its split
    rows = rollup()
    sunday, monday = datetime(2026, 11, 22).date(), datetime(2026, 11, 23).date()
    assert rows == {
        (sunday, alice.pk, "m-a", "chat", None): (1, 300, 100, 200),
        (monday, alice.pk, "m-b", "agents", agent.pk): (1, 100, 50, 50),
    }


def test_a_queued_or_zero_token_run_and_a_question_count_nowhere(people):
    alice = people[0]
    agent = Agent.objects.create(owner=alice, name="a")
    _run(agent, 0, finished=None, state="queued", split=False)
    AgentRun.objects.create(
        agent=agent, trigger="scheduled", state="skipped", reason="budget_exceeded", finished_at=BASE
    )
    thread = Conversation.objects.create(user=alice)
    Message.objects.create(conversation=thread, role="user", content="вопрос")
    _answer(thread, 0, split=False)
    assert rollup() == {}


def test_a_running_run_counts_when_it_finishes_not_at_its_heartbeats(people):
    alice = people[0]
    agent = Agent.objects.create(owner=alice, name="a")
    run = AgentRun.objects.create(agent=agent, trigger="manual", state="running", started_at=BASE)
    AgentRun.objects.filter(pk=run.pk).update(tokens_used=500)  # a heartbeat
    assert rollup() == {}
    AgentRun.objects.filter(pk=run.pk).update(state="succeeded", finished_at=BASE, tokens_used=700)
    assert rollup() == raw_sums() and sum(v[1] for v in rollup().values()) == 700


def test_deleting_a_user_takes_their_chat_and_agents_share_away(people):
    alice, bob = people[0], people[1]
    for person in (alice, bob):
        thread = Conversation.objects.create(user=person)
        _answer(thread, 90)
        _run(Agent.objects.create(owner=person, name="a"), 40)
    alice.delete()
    assert rollup() == raw_sums()
    assert {key[1] for key in rollup()} == {bob.pk}


def test_the_organisation_time_zone_change_moves_every_day(people):
    alice = people[0]
    _answer(Conversation.objects.create(user=alice), 90, at=BASE + timedelta(minutes=30))
    assert next(iter(rollup()))[0].isoformat() == "2026-11-22"
    platform_settings_update(timezone="Asia/Tokyo")  # Monday 05:30 there
    assert next(iter(rollup()))[0].isoformat() == "2026-11-23"
    assert rollup() == raw_sums()
    assert monthly() == daily_by_month()
    assert weekly() == daily_by_week()


# ------------------------------------------------------------------ the property


ANSWER = st.tuples(
    st.just("answer"), st.integers(0, 2), st.integers(0, 2), st.integers(0, 5000), st.booleans(), st.integers(0, 240)
)
RUN = st.tuples(
    st.just("run"), st.integers(0, 2), st.integers(0, 2), st.integers(0, 5000), st.booleans(), st.integers(-1, 240)
)
# Writes first and more often than the changes that follow them, so most examples change and delete
# rows that count (a deletion of an empty conversation proves nothing).
OPS = st.lists(
    st.one_of(
        ANSWER,
        ANSWER,
        RUN,
        RUN,
        st.tuples(st.just("retoken"), st.integers(0, 50), st.integers(0, 5000)),
        st.tuples(st.just("move"), st.integers(0, 50), st.integers(0, 240)),
        st.tuples(st.just("finish"), st.integers(0, 50), st.integers(0, 240)),
        st.tuples(st.just("delete_message"), st.integers(0, 50)),
        st.tuples(st.just("delete_run"), st.integers(0, 50)),
        st.tuples(st.just("delete_conversation"), st.integers(0, 5)),
        st.tuples(st.just("delete_agent"), st.integers(0, 5)),
        st.tuples(st.just("reassign"), st.integers(0, 5), st.integers(0, 2)),
    ),
    min_size=10,
    max_size=30,
)
MODELS = ("m-a", "m-b", "")


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=OPS)
def test_rollup_equals_the_raw_sums_after_any_writes(people, ops):
    # each example in a savepoint of its own, rolled back: examples are independent (shrinking replays them)
    with transaction.atomic():
        threads = [Conversation.objects.create(user=p) for p in people]
        agents = [Agent.objects.create(owner=p, name=f"a{i}") for i, p in enumerate(people)]
        for op in ops:
            kind = op[0]
            messages = list(Message.objects.order_by("id"))
            runs = list(AgentRun.objects.order_by("id"))
            if kind == "answer":
                _, who, model, tokens, split, hours = op
                live = [t for t in threads if Conversation.objects.filter(pk=t.pk).exists()]
                if live:
                    _answer(
                        live[who % len(live)],
                        tokens,
                        model=MODELS[model],
                        split=split,
                        at=BASE + timedelta(hours=hours),
                    )
            elif kind == "run":
                _, who, model, tokens, split, hours = op
                live = [a for a in agents if Agent.objects.filter(pk=a.pk).exists()]
                agent = live[who % len(live)] if live else None
                # one active run per agent (a partial UNIQUE): a second unfinished one is not written
                if agent is not None and not (
                    hours < 0 and AgentRun.objects.filter(agent=agent, state__in=["queued", "running"]).exists()
                ):
                    finished = BASE + timedelta(hours=hours) if hours >= 0 else None
                    _run(
                        agent,
                        tokens,
                        model=MODELS[model],
                        split=split,
                        finished=finished,
                        state="succeeded" if finished else "running",
                    )
            elif kind == "retoken" and (messages or runs):
                _, index, tokens = op
                rows = messages + runs
                row = rows[index % len(rows)]
                if isinstance(row, Message) and row.role == "assistant":
                    Message.objects.filter(pk=row.pk).update(tokens_used=tokens, input_tokens=None, output_tokens=None)
                elif isinstance(row, AgentRun):
                    AgentRun.objects.filter(pk=row.pk).update(tokens_used=tokens, input_tokens=None, output_tokens=None)
            elif kind == "move" and messages:
                _, index, hours = op
                Message.objects.filter(pk=messages[index % len(messages)].pk).update(
                    created_at=BASE + timedelta(hours=hours)
                )
            elif kind == "finish" and runs:
                _, index, hours = op
                AgentRun.objects.filter(pk=runs[index % len(runs)].pk).update(
                    state="failed", finished_at=BASE + timedelta(hours=hours)
                )
            elif kind == "delete_message" and messages:
                messages[op[1] % len(messages)].delete()
            elif kind == "delete_run" and runs:
                runs[op[1] % len(runs)].delete()
            elif kind == "delete_conversation":
                Conversation.objects.filter(pk=threads[op[1] % len(threads)].pk).delete()
            elif kind == "delete_agent":
                Agent.objects.filter(pk=agents[op[1] % len(agents)].pk).delete()
            elif kind == "reassign":
                Conversation.objects.filter(pk=threads[op[1] % len(threads)].pk).update(
                    user=people[op[2] % len(people)]
                )
        assert rollup() == raw_sums()
        assert monthly() == daily_by_month()
        assert weekly() == daily_by_week()
        transaction.set_rollback(True)


# ------------------------------------------------------------------ the database says no


def _violates(sql: str, params=()) -> None:
    with pytest.raises(IntegrityError), transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(sql, params)


def test_prices_are_not_negative(model_factory):
    model = model_factory(name="priced")
    _violates("UPDATE agent_models SET input_price_per_mtok = -0.01 WHERE id = %s", [model.pk])
    _violates("UPDATE agent_models SET output_price_per_mtok = -1 WHERE id = %s", [model.pk])
    with connection.cursor() as cursor:  # zero and empty are prices too
        cursor.execute(
            "UPDATE agent_models SET input_price_per_mtok = 0, output_price_per_mtok = NULL WHERE id = %s", [model.pk]
        )


def test_a_split_adds_up_to_the_total_or_is_absent(people):
    thread = Conversation.objects.create(user=people[0])
    message = _answer(thread, 300)
    _violates("UPDATE messages SET input_tokens = 1 WHERE id = %s", [message.pk])
    _violates("UPDATE messages SET output_tokens = NULL WHERE id = %s", [message.pk])
    run = _run(Agent.objects.create(owner=people[0], name="a"), 100)
    _violates("UPDATE agent_runs SET output_tokens = 99 WHERE id = %s", [run.pk])


def test_the_rollup_cannot_go_negative_nor_lose_its_rows_silently(people):
    _answer(Conversation.objects.create(user=people[0]), 300)
    _violates("UPDATE usage_daily SET tokens = -1")
    _violates("UPDATE usage_daily SET input_tokens = tokens + 1")
    # a roll-up row deleted behind the triggers' back: the next delete of its answer fails, not commits
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM usage_daily")
    _violates("DELETE FROM messages")
