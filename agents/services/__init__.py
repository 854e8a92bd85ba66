"""Every write of the Agent Engine (AE-RUN, AE-GOV, AE-BUDGET, AE-SCHED), by topic.

``agents``: agent_create / agent_update / agent_delete / agent_set_admin_paused.
``runs``: agent_run_request (manual), run_execute (the Celery task's body), agent_runs_reap_stale,
agent_runs_redispatch. ``scheduler``: scheduler_tick (the Beat job). ``dispatch``: the broker.

Time is always passed in from Python (``now``), never the database's ``now()``, so the tests'
time control moves every decision the same way.
"""

from agents.services.agents import (
    agent_create,
    agent_delete,
    agent_set_admin_paused,
    agent_update,
    agents_reschedule_calendar,
    agents_reschedule_for_org_timezone,
    agents_set_admin_paused,
)
from agents.services.dispatch import runs_dispatch
from agents.services.runs import (
    RunAbandoned,
    agent_run_request,
    agent_runs_reap_stale,
    agent_runs_redispatch,
    run_execute,
)
from agents.services.scheduler import TickResult, scheduler_tick

__all__ = [
    "RunAbandoned",
    "TickResult",
    "agent_create",
    "agent_delete",
    "agent_run_request",
    "agent_runs_reap_stale",
    "agent_runs_redispatch",
    "agent_set_admin_paused",
    "agent_update",
    "agents_reschedule_calendar",
    "agents_reschedule_for_org_timezone",
    "agents_set_admin_paused",
    "run_execute",
    "runs_dispatch",
    "scheduler_tick",
]
