"""The scheduler tick (AE-SCHED): claim due agents with SKIP LOCKED in batches, write their runs,
advance their slots, enqueue after commit. Raw SQL on purpose: one tick over 100k agents is a
handful of set-based statements, whatever the number due (see bench/scheduler.py)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime

from django.db import connection, transaction
from django.utils import timezone

from achilles.platform import platform_settings
from achilles.selectors import effective_timezone
from agents import schedule as sched
from agents.choices import RunReason
from agents.selectors import budget_room
from agents.services import dispatch
from agents.services.runs import agent_runs_redispatch, owner_budget_lock

TICK_BATCH_SIZE = 1000


@dataclass
class TickResult:
    queued: list[int]
    skipped_already_running: int = 0
    skipped_budget: int = 0
    redispatched: int = 0

    @property
    def claimed(self) -> int:
        return len(self.queued) + self.skipped_already_running + self.skipped_budget


# NO KEY UPDATE, not UPDATE: a concurrent manual run's INSERT takes KEY SHARE on the agent row
# (its FK check); with FOR UPDATE the two would deadlock on the partial UNIQUE. The rows are
# locked first and joined to their owners after, in no particular order (every due row is claimed
# before the tick ends anyway): joined and sorted, the planner read and sorted every due row with its
# owner for each batch (100 ms a batch with 10 000 due among 1M agents).
_CLAIM_SQL = """
WITH claimed AS MATERIALIZED (
    SELECT id, owner_id, schedule, next_run_at
    FROM agents
    WHERE next_run_at <= %s
    LIMIT %s
    FOR NO KEY UPDATE SKIP LOCKED
)
SELECT c.id, c.owner_id, c.schedule, c.next_run_at, u.timezone
FROM claimed c JOIN users u ON u.id = c.owner_id
"""

_BUDGET_SQL = """
SELECT o.owner_id, COALESCE(SUM(r.tokens_used), 0)
FROM unnest(%s::bigint[], %s::timestamptz[], %s::timestamptz[]) AS o(owner_id, week_start, week_end)
JOIN agent_runs r ON r.owner_id = o.owner_id AND r.finished_at >= o.week_start AND r.finished_at < o.week_end
GROUP BY o.owner_id
"""

# Runs queued or running reserve one run's token cap each until they finish. The run carries its
# owner (migration 0006), so this is one probe per owner of a small partial index.
_ACTIVE_SQL = """
SELECT owner_id, COUNT(*)
FROM agent_runs
WHERE owner_id = ANY(%s::bigint[]) AND state IN ('queued', 'running')
GROUP BY owner_id
"""

_INSERT_QUEUED_SQL = """
INSERT INTO agent_runs (agent_id, trigger, state, reason, output, error, tokens_used, scheduled_for)
SELECT v.agent_id, 'scheduled', 'queued', '', '', '', 0, v.slot
FROM unnest(%s::bigint[], %s::timestamptz[]) AS v(agent_id, slot)
ON CONFLICT (agent_id) WHERE state IN ('queued', 'running') DO NOTHING
RETURNING id, agent_id
"""

_INSERT_SKIPPED_SQL = """
INSERT INTO agent_runs (agent_id, trigger, state, reason, output, error, tokens_used, scheduled_for, finished_at)
SELECT v.agent_id, 'scheduled', 'skipped', v.reason, '', '', 0, v.slot, %s
FROM unnest(%s::bigint[], %s::text[], %s::timestamptz[]) AS v(agent_id, reason, slot)
"""

_ADVANCE_SQL = """
UPDATE agents SET next_run_at = v.next_run_at
FROM unnest(%s::bigint[], %s::timestamptz[]) AS v(id, next_run_at)
WHERE agents.id = v.id
"""


def _tick_batch(
    now: datetime, batch_size: int, result: TickResult, publisher: dispatch.BackgroundPublisher | None = None
) -> int:
    """One transaction: claim due agents (SKIP LOCKED), write their runs, advance their slots."""
    org_tz = platform_settings().timezone
    budget = platform_settings().weekly_token_budget
    run_cap = platform_settings().agent_run_token_cap
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(_CLAIM_SQL, [now, batch_size])
        rows = cursor.fetchall()
        if not rows:
            return 0
        owner_tz: dict[int, str] = {
            owner_id: effective_timezone(tz, org_timezone=org_tz) for _, owner_id, _, _, tz in rows
        }
        weeks = {owner_id: sched.week_bounds(tz, now) for owner_id, tz in owner_tz.items()}
        owners = list(weeks)
        # The same per-owner lock a manual start takes: spend and reservations are read and new
        # runs reserved as one step, so a tick racing run-now clicks cannot overshoot either.
        owner_budget_lock(owner_ids=owners)
        cursor.execute(_BUDGET_SQL, [owners, [weeks[o][0] for o in owners], [weeks[o][1] for o in owners]])
        spent = dict(cursor.fetchall())
        cursor.execute(_ACTIVE_SQL, [owners])
        active = dict(cursor.fetchall())
        # How many more runs each owner has room for: each needs spend + reservations < budget.
        room = {
            owner: budget_room(spent=spent.get(owner, 0), active=active.get(owner, 0), budget=budget, run_cap=run_cap)
            for owner in owners
        }
        runnable, over_budget_agents = [], set()
        for agent_id, owner_id, _, slot, _ in rows:
            if room[owner_id] > 0:
                room[owner_id] -= 1
                runnable.append((agent_id, slot))
            else:
                over_budget_agents.add(agent_id)
        queued_ids: list[int] = []
        queued_agents: set[int] = set()
        if runnable:
            cursor.execute(_INSERT_QUEUED_SQL, [[a for a, _ in runnable], [s for _, s in runnable]])
            for run_id, agent_id in cursor.fetchall():
                queued_ids.append(run_id)
                queued_agents.add(agent_id)
        skipped = [
            (agent_id, RunReason.BUDGET_EXCEEDED.value, slot)
            for agent_id, _, _, slot, _ in rows
            if agent_id in over_budget_agents
        ]
        skipped += [
            (agent_id, RunReason.ALREADY_RUNNING.value, slot)
            for agent_id, slot in runnable
            if agent_id not in queued_agents
        ]
        if skipped:
            cursor.execute(
                _INSERT_SKIPPED_SQL, [now, [s[0] for s in skipped], [s[1] for s in skipped], [s[2] for s in skipped]]
            )
        # Django's psycopg loaders hand jsonb over as text.
        next_slots = [
            sched.next_run_at(
                json.loads(schedule) if isinstance(schedule, str) else schedule,
                owner_tz[owner_id],
                now=now,
                previous=slot,
            )
            for _, owner_id, schedule, slot, _ in rows
        ]
        cursor.execute(_ADVANCE_SQL, [[r[0] for r in rows], next_slots])
        dispatch.dispatch_on_commit(queued_ids, publisher)
    result.queued.extend(queued_ids)
    result.skipped_budget += sum(1 for s in skipped if s[1] == RunReason.BUDGET_EXCEEDED)
    result.skipped_already_running += sum(1 for s in skipped if s[1] == RunReason.ALREADY_RUNNING)
    return len(rows)


def scheduler_tick(
    *, now: datetime | None = None, batch_size: int = TICK_BATCH_SIZE, redispatch: bool = True
) -> TickResult:
    """The Beat job: every due agent gets a ``scheduled`` run (or a ``skipped`` row saying why),
        its ``next_run_at`` moves to the next slot, and queued runs are enqueued after commit (batch by
    batch on a publisher thread, while the next batch is written).
        Closed gates are not here at all: their ``next_run_at`` is NULL, so nothing piles up."""
    now = now or timezone.now()
    result = TickResult(queued=[])
    publisher = dispatch.BackgroundPublisher()
    try:
        while _tick_batch(now, batch_size, result, publisher) == batch_size:
            pass
    finally:
        publisher.close()  # the tick ends when its runs are on the broker
    if redispatch:
        result.redispatched = len(agent_runs_redispatch(now=now))
    return result
