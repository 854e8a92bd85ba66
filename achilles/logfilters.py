"""Keeps `make run`'s output readable: the platform's periodic jobs (a scheduler tick every 2 s,
heartbeats, the reaper) log at DEBUG when they did nothing; anything they did, and every failure,
stays at its level."""

from __future__ import annotations

import logging

# Periodic tasks whose "received" / "succeeded: 0" lines say nothing (their work is logged apart).
QUIET_TASKS = frozenset(
    {
        "agents.tasks.agents_scheduler_tick_task",
        "agents.tasks.agent_runs_reap_stale_task",
        "achilles.tasks.platform_heartbeat_task",
        "hub.tasks.commands_requeue_expired_task",
    }
)
_NOTHING_DONE = {"0", "None", "[]", "{}", ""}


def _is_routine(record: logging.LogRecord) -> bool:
    if record.levelno != logging.INFO:
        return False
    if record.name == "celery.beat":  # "Scheduler: Sending due task <entry> (<task>)"
        args = record.args if isinstance(record.args, tuple) else ()
        return len(args) == 2 and args[1] in QUIET_TASKS
    context = record.args if isinstance(record.args, dict) else {}
    if context.get("name") not in QUIET_TASKS:
        return False
    if "return_value" in context:  # succeeded: routine only when it did nothing
        return str(context["return_value"]).strip("'\"") in _NOTHING_DONE
    return True  # received


class QuietPeriodicJobs(logging.Filter):
    """On the loggers ``celery.app.trace``, ``celery.worker.strategy`` and ``celery.beat``: a
    routine record is demoted to DEBUG (shown only when that logger is enabled for DEBUG)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not _is_routine(record):
            return True
        record.levelno, record.levelname = logging.DEBUG, "DEBUG"
        return logging.getLogger(record.name).isEnabledFor(logging.DEBUG)
