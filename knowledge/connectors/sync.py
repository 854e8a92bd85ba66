"""Run one connector run of whatever kind its connector is (the task's body)."""

from __future__ import annotations

from knowledge.connectors.confluence.sync import connector_run_body as confluence_run
from knowledge.connectors.models import ConnectorRun
from knowledge.connectors.runs import run_execute

RUNNERS = {"confluence": confluence_run}


def connector_run(*, run_id: int) -> str:
    kind = ConnectorRun.objects.filter(pk=run_id).values_list("connector__kind", flat=True).first()
    if kind is None:
        return "missing"
    return run_execute(run_id, RUNNERS[kind])
