"""``agent_runs.owner_id`` (migrations 0006, 0007) is the agent's owner, held by the database whatever
the writer sends (left out: filled in; another owner: refused): the budget's count of an owner's
active runs reads it instead of walking the agents."""

from __future__ import annotations

import pytest
from django.db import IntegrityError, connection, transaction

from agents.models import AgentRun
from agents.services.scheduler import _ACTIVE_SQL

pytestmark = [pytest.mark.integration, pytest.mark.p1, pytest.mark.django_db]

INSERT = (
    "INSERT INTO agent_runs (agent_id, owner_id, trigger, state, reason, output, error, tokens_used) "
    "VALUES (%s, %s, 'manual', 'queued', '', '', '', 0) RETURNING id, owner_id"
)


def test_an_insert_naming_another_owner_than_the_agents_is_refused_raw_sql(agent_factory, user_factory):
    """Migration 0007: the owner a writer names is checked against the agent's per statement (like
    a composite foreign key), not silently replaced; one wrong row fails the whole statement."""
    agent, other_agent = agent_factory(), agent_factory()
    stranger = user_factory(username="stranger")
    wrong_owner = pytest.raises(IntegrityError, match="owner must be its agent's owner")
    with wrong_owner, transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(INSERT, [agent.pk, stranger.pk])
    # a multi-row INSERT (the tick writes a thousand at once) with one wrong owner writes nothing
    with (
        pytest.raises(IntegrityError, match="owner must be its agent's owner"),
        transaction.atomic(),
        connection.cursor() as cursor,
    ):
        cursor.execute(
            "INSERT INTO agent_runs (agent_id, owner_id, trigger, state, reason, output, error, tokens_used, "
            "finished_at) VALUES (%s, %s, 'manual', 'succeeded', '', '', '', 0, now()), "
            "(%s, %s, 'manual', 'succeeded', '', '', '', 0, now())",
            [agent.pk, agent.owner_id, other_agent.pk, agent.owner_id],
        )
    assert not AgentRun.objects.filter(agent__in=[agent, other_agent]).exists()


def test_a_run_gets_its_agents_owner_when_the_writer_leaves_it_out_or_moves_it_raw_sql(agent_factory, user_factory):
    agent = agent_factory()
    stranger = user_factory(username="stranger")
    with connection.cursor() as cursor:
        cursor.execute(INSERT, [agent.pk, agent.owner_id])
        run_id, owner_id = cursor.fetchone()
        assert owner_id == agent.owner_id
        # an UPDATE that tries to move the run to another owner is put right
        cursor.execute(
            "UPDATE agent_runs SET owner_id = %s, state = 'succeeded', finished_at = now() "
            "WHERE id = %s RETURNING owner_id",
            [stranger.pk, run_id],
        )
        assert cursor.fetchone()[0] == agent.owner_id
        # and an INSERT without it (the ORM's, any raw one) is filled in
        cursor.execute(
            "INSERT INTO agent_runs (agent_id, trigger, state, reason, output, error, tokens_used) "
            "VALUES (%s, 'manual', 'queued', '', '', '', 0) RETURNING owner_id",
            [agent.pk],
        )
        assert cursor.fetchone()[0] == agent.owner_id


def test_a_run_of_no_agent_has_no_owner_and_is_refused_raw_sql(agent_factory):
    agent = agent_factory()
    with pytest.raises(IntegrityError), transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(INSERT, [agent.pk + 10_000, agent.owner_id])


def test_an_agent_moved_to_another_owner_takes_its_runs_along_raw_sql(agent_factory, run_factory, user_factory):
    agent = agent_factory()
    runs = [run_factory(agent=agent, state=s) for s in ("queued",)] + [
        run_factory(agent=agent, state="succeeded", finished_at="2026-11-30T10:00:00Z")
    ]
    heir = user_factory(username="heir")
    with connection.cursor() as cursor:
        cursor.execute("UPDATE agents SET owner_id = %s WHERE id = %s", [heir.pk, agent.pk])
        cursor.execute("SELECT DISTINCT owner_id FROM agent_runs WHERE id = ANY(%s)", [[r.pk for r in runs]])
        assert cursor.fetchall() == [(heir.pk,)]


def test_the_tick_counts_an_owners_active_runs_by_the_run_owner(agent_factory, run_factory, owner, user_factory):
    other = user_factory(username="other")
    mine = [agent_factory(owner=owner) for _ in range(3)]
    run_factory(agent=mine[0], state="queued")
    run_factory(agent=mine[1], state="running", started_at="2026-11-30T10:00:00Z")
    run_factory(agent=mine[2], state="failed", finished_at="2026-11-30T10:00:00Z")
    run_factory(agent=agent_factory(owner=other), state="queued")
    with connection.cursor() as cursor:
        cursor.execute(_ACTIVE_SQL, [[owner.pk, other.pk, owner.pk + other.pk + 1]])
        assert dict(cursor.fetchall()) == {owner.pk: 2, other.pk: 1}
