"""Agent scheduler: our tick (one indexed due scan, SKIP LOCKED, batched writes) vs the peer —
one django-celery-beat ``PeriodicTask`` per agent under its ``DatabaseScheduler``.

Ours, at BENCH_AGENTS (100k) agents with mixed interval/calendar schedules across time zones,
1 % due per minute:
  * one tick's wall time with a minute's worth of due agents (1 %), and with nothing due;
  * the due-to-enqueued lag (``enqueued_at - scheduled_for``) over BENCH_LAG_SECONDS of real
    time with ticks at the configured Beat period, p50 / p99 / max.
Peer, at BENCH_PEER_AGENTS (10k) periodic tasks with the same schedules:
  * start-up load (constructing the scheduler = reading and building every entry);
  * one schedule change taking effect (detected on the next tick, then a full reload);
  * dispatching the same 1 % due (Beat sends one entry per ``tick()``), and its lag p99.
Tasks go to throwaway queues of the real Redis broker, purged afterwards. Everything runs in a
scratch database (created, migrated and dropped here) so the dev database is untouched.
BENCH_PROFILE=1 prints a cProfile of one burst tick.
"""

from __future__ import annotations

import contextlib
import json
import os
import statistics
import sys
import time
from datetime import timedelta
from pathlib import Path

from bench._scratch import run_in_scratch_database

ROOT = Path(__file__).resolve().parent.parent
BENCH_DB = "achilles_bench_scheduler"
AGENTS = int(os.environ.get("BENCH_SCHEDULER_AGENTS", "100000"))
PEER_AGENTS = int(os.environ.get("BENCH_SCHEDULER_PEER_AGENTS", "10000"))
LAG_SECONDS = float(os.environ.get("BENCH_SCHEDULER_LAG_SECONDS", "30"))
OURS_QUEUE = "bench-scheduler-ours"
PEER_QUEUE = "bench-scheduler-peer"
ZONES = ["Europe/Moscow", "Asia/Vladivostok", "UTC", None, "America/New_York", "Europe/Berlin"]
INTERVALS = [5, 15, 30, 60, 240, 1440]


def main() -> None:
    """Outer process: create the scratch database, run the measurement in a child bound to it."""
    run_in_scratch_database(module="bench.scheduler", database=BENCH_DB)


# ----------------------------------------------------------------------------------- child


def _pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def _schedule_sql(n: str) -> str:
    """The same mix for both sides: 60 % interval, 40 % calendar (weekday + HH:MM)."""
    return (
        f"CASE WHEN {n} % 5 < 3 THEN jsonb_build_object('type', 'interval', 'every_minutes', "
        f"(ARRAY{INTERVALS})[1 + {n} % {len(INTERVALS)}]) "
        f"ELSE jsonb_build_object('type', 'calendar', 'weekday', {n} % 7, 'time', "
        f"lpad(({n} % 24)::text, 2, '0') || ':' || lpad(({n} * 7 % 60)::text, 2, '0')) END"
    )


def _seed_ours(cursor, model_id: int) -> None:
    from achilles.platform import platform_settings, platform_settings_update

    owners = max(1, AGENTS // 50)
    # Each owner's 50 agents may all be due in one tick: the weekly budget must leave room for 50
    # reserved runs (a start reserves one run's token cap), or the budget, not the tick, is measured.
    platform_settings_update(weekly_token_budget=50 * platform_settings().agent_run_token_cap)
    zones = ", ".join("NULL" if z is None else f"'{z}'" for z in ZONES)
    cursor.execute(f"""
        INSERT INTO users (password, is_superuser, username, first_name, last_name, email, is_staff, is_active,
                           date_joined, timezone)
        SELECT '!', false, 'bench-' || g, '', '', '', false, true, now(), (ARRAY[{zones}]::varchar[])[1 + g % {len(ZONES)}]
        FROM generate_series(1, {owners}) g""")
    # 95 % schedulable, spread 1 % per minute over 100 minutes that start after the bench has ended
    # (so nothing but the agents a part makes due comes due); 5 % behind a closed gate.
    cursor.execute(f"""
        INSERT INTO agents (owner_id, name, instructions, model_id, schedule, next_run_at, enabled, admin_paused)
        SELECT (SELECT min(id) FROM users) + (g % {owners}), 'agent ' || g, 'Сводка', {int(model_id)}, {_schedule_sql("g")},
               CASE WHEN g % 20 = 0 THEN NULL ELSE now() + interval '2 hours' + (g % 6000) * interval '1 second' END,
               g % 20 <> 0, false
        FROM generate_series(1, {AGENTS}) g""")
    # A live table has been vacuumed (hint bits set, visibility map filled); a freshly bulk-loaded
    # one would have its first tick pay for that and race autovacuum.
    cursor.execute("VACUUM (ANALYZE) agents")
    cursor.execute("VACUUM (ANALYZE) users")


def _explain(cursor) -> list[str]:
    """The claim query's plan with a minute's worth due (it must read only the due prefix)."""
    from django.db import transaction
    from django.utils import timezone

    from agents.services.scheduler import _CLAIM_PLAN_SQL, _CLAIM_SQL

    with transaction.atomic():
        cursor.execute(_CLAIM_PLAN_SQL)  # as the tick plans it
        cursor.execute("EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) " + _CLAIM_SQL, [timezone.now(), 1000])
        plan = [row[0] for row in cursor.fetchall()]
        transaction.set_rollback(True)
    return plan


def _bench_ours() -> dict:
    import threading

    from django.db import connection
    from django.utils import timezone

    from achilles.celery_app import app
    from agents import services
    from agents.models import AgentRun
    from agents.scheduler_loop import SchedulerLoop
    from agents.services import dispatch

    publishing = [True]
    real_publish = dispatch._publish

    def publish(run_ids, producer, queue):
        if publishing[0]:
            real_publish(run_ids, producer, queue)

    # the real publish path, routed to a throwaway queue
    app.conf.task_default_queue = OURS_QUEUE
    app.conf.task_routes = {}
    app.amqp.__dict__.pop("router", None)
    app.amqp.__dict__.pop("queues", None)
    dispatch._publish = publish
    due_per_minute = AGENTS // 100

    with connection.cursor() as cursor:
        # A fixed minute's worth of agents (1 %), spread over the schedule mix; each burst makes
        # them due again (the tick moved them on) and clears the runs the last one wrote.
        cursor.execute(
            f"SELECT id FROM agents WHERE next_run_at IS NOT NULL ORDER BY id % 100, id LIMIT {due_per_minute}"
        )
        due_ids = [row[0] for row in cursor.fetchall()]

        def make_due() -> None:
            cursor.execute("TRUNCATE agent_runs")
            cursor.execute(
                "UPDATE agents SET next_run_at = now() - (id %% 60) * interval '1 second' WHERE id = ANY(%s)", [due_ids]
            )
            cursor.execute("ANALYZE agent_runs")

        make_due()
        plan = _explain(cursor)
        ticks, db_only, idle = [], [], []
        for attempt in range(6):
            publishing[0] = attempt % 2 == 0  # odd attempts: the same tick without the broker publish
            make_due()
            started = time.perf_counter()
            if os.environ.get("BENCH_PROFILE") and attempt == 2:
                import cProfile
                import pstats

                profile = cProfile.Profile()
                result = profile.runcall(services.scheduler_tick, now=timezone.now())
                pstats.Stats(profile).sort_stats("cumulative").print_stats(30)
            else:
                result = services.scheduler_tick(now=timezone.now())
            (ticks if publishing[0] else db_only).append(time.perf_counter() - started)
            assert len(result.queued) == due_per_minute, (len(result.queued), due_per_minute)
        publishing[0] = True
        for _ in range(5):
            started = time.perf_counter()
            services.scheduler_tick(now=timezone.now())
            idle.append(time.perf_counter() - started)

        # lag: 1 % per minute comes due over LAG_SECONDS of wall time, the wake-up loop (as Beat runs
        # it) ticks; meanwhile, every 2 s an owner's edit moves one agent's next run to "now".
        cursor.execute("TRUNCATE agent_runs")
        spread = int(due_per_minute * LAG_SECONDS / 60)
        cursor.execute(
            f"UPDATE agents SET next_run_at = clock_timestamp() + interval '1 second' + "
            f"((id * 7919) %% {int(LAG_SECONDS * 1000)}) * interval '1 millisecond' "
            f"WHERE id IN (SELECT id FROM agents WHERE next_run_at IS NOT NULL "
            f"AND id NOT IN (SELECT unnest(%s::bigint[])) "
            f"ORDER BY id %% 97, id LIMIT {spread})",
            [due_ids],
        )
        cursor.execute(
            f"SELECT id FROM agents WHERE next_run_at > now() + interval '1 hour' ORDER BY id DESC LIMIT "
            f"{int(LAG_SECONDS // 2)}"
        )
        edited = [row[0] for row in cursor.fetchall()]
    loop = SchedulerLoop(max_sleep=1.0)
    thread = threading.Thread(target=loop.run, daemon=True)
    thread.start()
    changed_at: dict[int, float] = {}
    end = time.monotonic() + LAG_SECONDS + 2
    for agent_id in edited:
        time.sleep(1.5 + (agent_id % 7) / 10)  # off the loop's rhythm
        with connection.cursor() as cursor:
            cursor.execute("UPDATE agents SET next_run_at = now() WHERE id = %s RETURNING next_run_at", [agent_id])
            changed_at[agent_id] = cursor.fetchone()[0]
    time.sleep(max(0.0, end - time.monotonic()))
    loop._stop.set()
    thread.join(5)
    runs = list(
        AgentRun.objects.filter(trigger="scheduled", state="queued").values_list(
            "agent_id", "scheduled_for", "enqueued_at"
        )
    )
    lags = [(e - s).total_seconds() for a, s, e in runs if a not in changed_at]
    change_lags = [(e - changed_at[a]).total_seconds() for a, s, e in runs if a in changed_at]
    return {
        "db_median": statistics.median(db_only),
        "tick_median": statistics.median(ticks),
        "tick_max": max(ticks),
        "idle_median": statistics.median(idle),
        "due": due_per_minute,
        "lags": lags,
        "spread": spread,
        "change_lags": change_lags,
        "changes": len(edited),
        "loop_ticks": loop.ticks,
        "wakeups": loop.wakeups,
        "coalesce": loop.coalesce,
        "plan": plan,
    }


def _bench_peer() -> dict:
    from django.utils import timezone
    from django_celery_beat.models import CrontabSchedule, IntervalSchedule, PeriodicTask, PeriodicTasks
    from django_celery_beat.schedulers import DatabaseScheduler

    from achilles.celery_app import app

    PeriodicTask.objects.filter(name__startswith="platform:").update(enabled=False)
    intervals = {
        m: IntervalSchedule.objects.get_or_create(every=m, period=IntervalSchedule.MINUTES)[0] for m in INTERVALS
    }
    crontabs: dict[tuple, CrontabSchedule] = {}
    now = timezone.now()
    tasks = []
    for g in range(1, PEER_AGENTS + 1):
        zone = ZONES[g % len(ZONES)] or "Europe/Moscow"
        common = {
            "name": f"agent {g}",
            "task": "agents.tasks.agent_run_task",
            "args": f"[{g}]",
            "queue": PEER_QUEUE,
            "last_run_at": now,
        }
        if g % 5 < 3:
            tasks.append(PeriodicTask(interval=intervals[INTERVALS[g % len(INTERVALS)]], **common))
        else:
            key = (str(g * 7 % 60), str(g % 24), str((g % 7 + 1) % 7), zone)  # cron weekday: Sunday = 0
            if key not in crontabs:
                crontabs[key] = CrontabSchedule.objects.create(
                    minute=key[0], hour=key[1], day_of_week=key[2], timezone=key[3]
                )
            tasks.append(PeriodicTask(crontab=crontabs[key], **common))
    PeriodicTask.objects.bulk_create(tasks, batch_size=2000)
    # the same 1 % due: their interval elapsed a moment ago
    due = PeriodicTask.objects.filter(interval__isnull=False).order_by("id")[: PEER_AGENTS // 100]
    due_ids = list(due.values_list("id", flat=True))
    for task in PeriodicTask.objects.filter(id__in=due_ids).select_related("interval"):
        PeriodicTask.objects.filter(pk=task.pk).update(
            last_run_at=now - timedelta(minutes=task.interval.every, seconds=1)
        )
    PeriodicTasks.update_changed()

    started = time.perf_counter()
    scheduler = DatabaseScheduler(app=app)
    scheduler.tick()  # first tick builds the heap over every entry
    load = time.perf_counter() - started

    dispatched_at, started = [], time.perf_counter()
    while len(dispatched_at) < len(due_ids):
        if scheduler.tick() > 0:
            break
        dispatched_at.append(time.perf_counter() - started)
    drain = time.perf_counter() - started

    # one schedule change: the next tick notices it and reloads every entry
    changed = PeriodicTask.objects.filter(interval__isnull=False).exclude(id__in=due_ids).first()
    changed.interval = intervals[15]
    changed.save()
    started = time.perf_counter()
    scheduler.tick()
    reload = time.perf_counter() - started
    return {
        "load": load,
        "drain": drain,
        "dispatched": len(dispatched_at),
        "due": len(due_ids),
        "lags": dispatched_at,
        "reload": reload,
        "max_interval": scheduler.max_interval,
    }


def _purge() -> None:
    from achilles.celery_app import app

    with app.connection_for_write() as conn:
        channel = conn.default_channel
        for queue in (OURS_QUEUE, PEER_QUEUE):
            with contextlib.suppress(Exception):
                channel.queue_purge(queue)


def child() -> None:
    import django

    django.setup()
    import logging

    from django.core.management import call_command
    from django.db import connection

    from achilles.models import AllowedModel

    for noisy in ("celery.beat", "django_celery_beat", "agents"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    started = time.perf_counter()
    call_command("migrate", verbosity=0)
    model = AllowedModel.objects.create(name="bench-builtin", provider="builtin", kind="chat")
    with connection.cursor() as cursor:
        _seed_ours(cursor, model.pk)
    print(
        f"  scratch database {BENCH_DB}: migrated and seeded {AGENTS:,} agents in {time.perf_counter() - started:.1f}s",
        flush=True,
    )
    try:
        ours = _bench_ours()
        peer = _bench_peer()
    finally:
        _purge()
    lag_p99, lag_p50, lag_max = (
        _pct(ours["lags"], 0.99),
        _pct(ours["lags"], 0.5),
        max(ours["lags"], default=float("nan")),
    )
    change_p50, change_max = _pct(ours["change_lags"], 0.5), max(ours["change_lags"], default=float("nan"))
    peer_lag_p99 = _pct(peer["lags"], 0.99)
    if os.environ.get("BENCH_SCHEDULER_EXPLAIN"):
        print("  claim query plan (1 % due):\n    " + "\n    ".join(ours["plan"]))
    print(
        f"  ours: {AGENTS:,} agents (mixed interval/calendar, {len(ZONES)} zones), {ours['due']:,} due (1 %/min), "
        f"wake-up loop (ticks ≥ {ours['coalesce']}s apart, woken by NOTIFY)"
    )
    print(f"  peer: {PEER_AGENTS:,} django-celery-beat PeriodicTasks (same mix), {peer['due']} due, DatabaseScheduler")
    per_agent_ratio = peer["drain"] / max(peer["dispatched"], 1) / (ours["tick_median"] / ours["due"])
    rows = [
        (
            "one tick dispatching 1 % due",
            f"{ours['tick_median'] * 1000:.0f} ms (max {ours['tick_max'] * 1000:.0f})",
            f"{peer['drain'] * 1000:.0f} ms for {peer['dispatched']} ({PEER_AGENTS // 1000}k)",
            f"{peer['drain'] / ours['tick_median']:.1f}x  (per agent {per_agent_ratio:.0f}x)",
        ),
        ("  of which database (publish off)", f"{ours['db_median'] * 1000:.0f} ms", "", ""),
        ("idle tick (nothing due)", f"{ours['idle_median'] * 1000:.1f} ms", "—", ""),
        ("start-up load", "0 ms (no in-memory schedule)", f"{peer['load'] * 1000:.0f} ms", "—"),
        (
            "schedule change takes effect",
            f"NOTIFY → enqueued p50 {change_p50:.2f} s / max {change_max:.2f} s ({len(ours['change_lags'])})",
            f"≤ {peer['max_interval']}s wait + {peer['reload'] * 1000:.0f} ms full reload",
            "",
        ),
        (
            "due → enqueued lag p50 / p99 / max",
            f"{lag_p50:.2f} / {lag_p99:.2f} / {lag_max:.2f} s ({len(ours['lags'])} runs, {ours['loop_ticks']} ticks)",
            f"p99 {peer_lag_p99:.2f} s within one drain (+ up to {peer['max_interval']}s sleep)",
            "",
        ),
    ]
    width = max(len(r[0]) for r in rows)
    print(f"  {'':{width}}  {'ours @ ' + format(AGENTS, ','):38} {'peer @ ' + format(PEER_AGENTS, ','):48} ratio")
    for name, ours_v, peer_v, ratio in rows:
        print(f"  {name:{width}}  {ours_v:38} {peer_v:48} {ratio}")
    verdicts = [
        ("tick ≤ 1 s", ours["tick_median"] <= 1.0),
        ("lag p99 ≤ 1 s", lag_p99 <= 1.0),
        ("≥ 10× the peer per dispatched agent", per_agent_ratio >= 10),
    ]
    print("  targets: " + ", ".join(f"{name} {'OK' if ok else 'MISSED'}" for name, ok in verdicts))
    print(
        "RESULT "
        + json.dumps(
            {
                "bench": "scheduler",
                "agents": AGENTS,
                "tick_ms": round(ours["tick_median"] * 1000, 1),
                "lag_p99_s": round(lag_p99, 3),
                "peer_tick_ms": round(peer["drain"] * 1000, 1),
            }
        ),
        flush=True,
    )


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    child()
