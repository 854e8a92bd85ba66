"""The scheduler tick (AE-SCHED): claim due agents with SKIP LOCKED in batches, write their runs,
advance their slots, enqueue after commit. Raw SQL on purpose: one tick over 100k agents is a
handful of set-based statements, whatever the number due (see bench/scheduler.py)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from django.db import connection, transaction
from django.utils import timezone

from achilles.models import PlatformSettings
from achilles.platform import platform_settings
from achilles.selectors import effective_timezone
from agents import schedule as sched
from agents.choices import RunReason
from agents.selectors import budget_room
from agents.services import dispatch
from agents.services.events import agent_events_fire
from agents.services.runs import BUDGET_LOCK_KEY, BUDGET_LOCK_SQL, agent_runs_redispatch

# Agents claimed per transaction. Larger batches pay the per-transaction costs (round trips, planning,
# commit, a publisher hand-off) fewer times: at 1M agents a 10 000-run tick took ≈ 0.7 s in batches of
# 1 000 and ≈ 0.55 s in batches of 5 000. The cost is how long a batch holds its owners' budget locks
# (a run-now click of such an owner waits for the batch's commit, ≈ 0.2 s) and that its runs reach
# the broker when the whole batch has committed.
TICK_BATCH_SIZE = 5000


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
# owner for each batch (100 ms a batch with 10 000 due among 1M agents). The schedule comes as text
# and the slot as whole microseconds: Django's jsonb and timestamptz loaders are Python, ≈ 10 µs a
# row, and a tick's schedules are a handful of distinct texts.
_CLAIM_SQL = """
WITH claimed AS MATERIALIZED (
    SELECT id, owner_id, schedule, next_run_at
    FROM agents
    WHERE next_run_at <= %s
    LIMIT %s
    FOR NO KEY UPDATE SKIP LOCKED
)
SELECT c.id, c.owner_id, c.schedule::text, (extract(epoch FROM c.next_run_at) * 1000000)::bigint, u.timezone
FROM claimed c JOIN users u ON u.id = c.owner_id
"""

# The due scan walks the index in order, not as a bitmap: a bitmap scan visits the heap for every
# entry left by the slots just moved (old versions stay in the index until vacuum), 50 000 of them
# by a 10 000-run tick's last batch (14 ms); an index scan marks them dead on first sight and the
# next batch skips them (5 ms). For the batch's transaction only.
_CLAIM_PLAN_SQL = "SET LOCAL enable_bitmapscan = off"

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

# A batch's writes in one statement: the slots move on, runnable agents get a queued run (the
# partial UNIQUE turns an agent with an active run into ON CONFLICT DO NOTHING), and every agent
# without a new run gets a skipped row saying why. Instants travel as whole microseconds since the
# epoch (short to send, no Python formatting), split into seconds and the rest so that no step goes
# through a float that could round them. The run's owner comes from the claim (the
# agent row is locked: it cannot change); migration 0007 checks it against the agent per statement.
_WRITE_SQL = """
WITH advanced AS (
    UPDATE agents SET next_run_at = v.next_run_at
    FROM unnest(%(ids)s::bigint[], %(next)s::bigint[]) AS u(id, next_us),
        LATERAL (SELECT to_timestamp(u.next_us / 1000000) + u.next_us %% 1000000 * interval '1 microsecond')
            AS v(next_run_at)
    WHERE agents.id = u.id
),
runnable AS (
    SELECT agent_id, owner_id,
        to_timestamp(slot_us / 1000000) + slot_us %% 1000000 * interval '1 microsecond' AS slot
    FROM unnest(%(run_agents)s::bigint[], %(run_owners)s::bigint[], %(run_slots)s::bigint[])
        AS v(agent_id, owner_id, slot_us)
),
queued AS (
    INSERT INTO agent_runs (agent_id, owner_id, trigger, state, reason, output, error, tokens_used, scheduled_for)
    SELECT agent_id, owner_id, 'scheduled', 'queued', '', '', '', 0, slot FROM runnable
    ON CONFLICT (agent_id) WHERE state IN ('queued', 'running') DO NOTHING
    RETURNING id, agent_id
),
skipped AS (
    INSERT INTO agent_runs (
        agent_id, owner_id, trigger, state, reason, output, error, tokens_used, scheduled_for, finished_at
    )
    SELECT v.agent_id, v.owner_id, 'scheduled', 'skipped', %(over_budget)s, '', '', 0,
        to_timestamp(v.slot_us / 1000000) + v.slot_us %% 1000000 * interval '1 microsecond', %(now)s
    FROM unnest(%(skip_agents)s::bigint[], %(skip_owners)s::bigint[], %(skip_slots)s::bigint[])
        AS v(agent_id, owner_id, slot_us)
    UNION ALL
    SELECT r.agent_id, r.owner_id, 'scheduled', 'skipped', %(already_running)s, '', '', 0, r.slot, %(now)s
    FROM runnable r WHERE NOT EXISTS (SELECT FROM queued q WHERE q.agent_id = r.agent_id)
    RETURNING reason
)
SELECT id, NULL FROM queued
UNION ALL
SELECT NULL, reason FROM skipped
"""

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)


def _array(values: Iterable[object]) -> str:
    """A PostgreSQL array literal of ints or ISO timestamps: psycopg's client-side quoting of a
    list walks it in Python per element (≈ 15 ms for a batch's five 1 000-element arrays)."""
    return "{" + ",".join(v.isoformat() if isinstance(v, datetime) else str(v) for v in values) + "}"


def _tick_batch(
    now: datetime,
    batch_size: int,
    result: TickResult,
    publisher: dispatch.BackgroundPublisher | None = None,
    schedules: dict[str, dict] | None = None,
    settings: PlatformSettings | None = None,
) -> int:
    """One transaction: claim due agents (SKIP LOCKED), write their runs, advance their slots."""
    schedules = {} if schedules is None else schedules
    settings = settings or platform_settings()
    org_tz, budget, run_cap = settings.timezone, settings.weekly_token_budget, settings.agent_run_token_cap
    # Round trips are pipelined where the next statement does not depend on the last one's answer:
    # on two busy cores each one costs a wake-up of the other side, a millisecond or more.
    with transaction.atomic(), connection.cursor() as cursor:
        with connection.connection.pipeline():
            cursor.execute(_CLAIM_PLAN_SQL)
            cursor.execute(_CLAIM_SQL, [now, batch_size])
        rows = cursor.fetchall()
        if not rows:
            return 0
        owner_tz: dict[int, str] = {
            owner_id: effective_timezone(tz, org_timezone=org_tz) for _, owner_id, _, _, tz in rows
        }
        zone_weeks = {tz: sched.week_bounds(tz, now) for tz in set(owner_tz.values())}  # a handful of zones
        weeks = {owner_id: zone_weeks[tz] for owner_id, tz in owner_tz.items()}
        owners = sorted(weeks)
        owner_ids = _array(owners)
        with connection.cursor() as reservations:
            with connection.connection.pipeline():
                # The same per-owner lock a manual start takes (in id order): spend and reservations
                # are read after it, each statement with a snapshot of its own, and new runs reserved
                # as one step, so a tick racing run-now clicks cannot overshoot either.
                cursor.execute(BUDGET_LOCK_SQL, [BUDGET_LOCK_KEY, owner_ids])
                cursor.execute(
                    _BUDGET_SQL, [owner_ids, _array(weeks[o][0] for o in owners), _array(weeks[o][1] for o in owners)]
                )
                reservations.execute(_ACTIVE_SQL, [owner_ids])
            spent = dict(cursor.fetchall())
            active = dict(reservations.fetchall())
        # How many more runs each owner has room for: each needs spend + reservations < budget.
        room = {
            owner: budget_room(spent=spent.get(owner, 0), active=active.get(owner, 0), budget=budget, run_cap=run_cap)
            for owner in owners
        }
        runnable: list[tuple[int, int, int]] = []  # agent, owner, slot (microseconds since the epoch)
        over_budget: list[tuple[int, int, int]] = []
        next_slots: list[int | None] = []  # microseconds since the epoch
        for agent_id, owner_id, schedule_text, slot_us, _ in rows:
            if room[owner_id] > 0:
                room[owner_id] -= 1
                runnable.append((agent_id, owner_id, slot_us))
            else:
                over_budget.append((agent_id, owner_id, slot_us))
            schedule = schedules.get(schedule_text)
            if schedule is None:
                schedule = schedules[schedule_text] = json.loads(schedule_text)
            slot = _EPOCH + timedelta(microseconds=slot_us)
            next_slot = sched.next_run_at(schedule, owner_tz[owner_id], now=now, previous=slot)
            next_slots.append(None if next_slot is None else (next_slot - _EPOCH) // _MICROSECOND)
        cursor.execute(
            _WRITE_SQL,
            {
                "ids": _array(r[0] for r in rows),
                "next": "{" + ",".join("NULL" if n is None else str(n) for n in next_slots) + "}",
                "run_agents": _array(r[0] for r in runnable),
                "run_owners": _array(r[1] for r in runnable),
                "run_slots": _array(r[2] for r in runnable),
                "skip_agents": _array(r[0] for r in over_budget),
                "skip_owners": _array(r[1] for r in over_budget),
                "skip_slots": _array(r[2] for r in over_budget),
                "over_budget": RunReason.BUDGET_EXCEEDED.value,
                "already_running": RunReason.ALREADY_RUNNING.value,
                "now": now,
            },
        )
        written = cursor.fetchall()
        queued_ids = [run_id for run_id, _ in written if run_id is not None]
        dispatch.dispatch_on_commit(queued_ids, publisher)
    result.queued.extend(queued_ids)
    result.skipped_budget += sum(1 for _, reason in written if reason == RunReason.BUDGET_EXCEEDED)
    result.skipped_already_running += sum(1 for _, reason in written if reason == RunReason.ALREADY_RUNNING)
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
    schedules: dict[str, dict] = {}  # parsed once per distinct schedule text
    settings = platform_settings()  # one read per tick: a change applies from the next tick
    try:
        while _tick_batch(now, batch_size, result, publisher, schedules, settings) == batch_size:
            pass
    finally:
        publisher.close()  # the tick ends when its runs are on the broker
    # Hub events whose debounce is over start their runs (agents.services.events).
    result.queued.extend(agent_events_fire(now=now))
    if redispatch:
        result.redispatched = len(agent_runs_redispatch(now=now))
    return result
