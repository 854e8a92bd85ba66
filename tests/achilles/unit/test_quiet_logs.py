"""The periodic jobs' routine lines are DEBUG; what they did and every failure stay visible."""

import logging

import pytest

from achilles.logfilters import QuietPeriodicJobs

pytestmark = pytest.mark.unit

TICK = "agents.tasks.agents_scheduler_tick_task"


@pytest.fixture
def capture():
    records = []
    handler = logging.Handler()
    handler.emit = records.append
    loggers = [logging.getLogger(n) for n in ("celery.app.trace", "celery.worker.strategy", "celery.beat")]
    quiet = QuietPeriodicJobs()
    for logger in loggers:
        logger.addHandler(handler)
        logger.addFilter(quiet)
        logger.setLevel(logging.INFO)
    yield records
    for logger in loggers:
        logger.removeHandler(handler)
        logger.removeFilter(quiet)
        logger.setLevel(logging.NOTSET)


def _success(name, value):
    logging.getLogger("celery.app.trace").info(
        "Task %(name)s[%(id)s] succeeded in %(runtime)ss: %(return_value)s",
        {"id": "x", "name": name, "return_value": value, "runtime": 0.01},
    )


def test_routine_lines_are_hidden_at_info(capture):
    logging.getLogger("celery.worker.strategy").info("Task %(name)s[%(id)s] received", {"name": TICK, "id": "x"})
    _success(TICK, "0")
    _success("achilles.tasks.platform_heartbeat_task", "None")
    logging.getLogger("celery.beat").info("Scheduler: Sending due task %s (%s)", "agents.scheduler_tick", TICK)
    assert capture == []


def test_work_done_other_tasks_and_failures_stay(capture):
    _success(TICK, "3")  # the tick queued three runs
    _success("agents.tasks.agent_run_task", "'succeeded'")
    logging.getLogger("celery.app.trace").error(
        "Task %(name)s[%(id)s] raised: %(exc)s", {"name": TICK, "id": "x", "exc": "boom"}
    )
    logging.getLogger("celery.beat").info(
        "Scheduler: Sending due task %s (%s)", "knowledge.trust_decay", "knowledge.tasks.trust_decay_task"
    )
    assert [(r.levelname, r.getMessage().rsplit(" ", 1)[-1]) for r in capture] == [
        ("INFO", "3"),
        ("INFO", "'succeeded'"),
        ("ERROR", "boom"),
        ("INFO", "(knowledge.tasks.trust_decay_task)"),
    ]


def test_with_debug_enabled_they_show_as_debug(capture):
    logging.getLogger("celery.app.trace").setLevel(logging.DEBUG)
    _success(TICK, "0")
    assert [r.levelname for r in capture] == ["DEBUG"]
