"""Reads of connectors and their runs (staff only: the API checks; these never return credentials)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.utils import timezone
from django.utils.translation import gettext as _

from achilles.errors import NotFound
from achilles.pagination import Window, keyset_page
from knowledge.connectors.models import Connector, ConnectorRun


def connector_get(*, connector_id: int) -> Connector:
    connector = Connector.objects.filter(pk=connector_id).first()
    if connector is None:
        raise NotFound(_("Коннектор не найден."), code="connector_not_found")
    return connector


def connector_page(*, cursor: str | None, limit: int) -> Window:
    return keyset_page(Connector.objects.all(), scope="knowledge-connectors", keys=("id",), cursor=cursor, limit=limit)


def run_page(*, connector_id: int, cursor: str | None, limit: int) -> Window:
    connector = connector_get(connector_id=connector_id)
    runs = ConnectorRun.objects.filter(connector=connector)
    return keyset_page(runs, scope="knowledge-connector-runs", keys=("-id",), cursor=cursor, limit=limit)


def run_get(*, connector_id: int, run_id: int) -> ConnectorRun:
    run = ConnectorRun.objects.filter(connector_id=connector_id, pk=run_id).first()
    if run is None:
        raise NotFound(_("Запуск коннектора не найден."), code="run_not_found")
    return run


@dataclass(frozen=True)
class Progress:
    """A run's pace: documents per second since it started, and seconds left when the total is known."""

    rate: float | None
    eta_seconds: int | None


def run_progress(run: ConnectorRun, *, at: datetime | None = None) -> Progress:
    if run.started_at is None:
        return Progress(rate=None, eta_seconds=None)
    end = run.finished_at or at or timezone.now()
    elapsed = max((end - run.started_at).total_seconds(), 1e-3)
    rate = run.seen / elapsed
    if run.finished_at is not None:
        return Progress(rate=round(rate, 2), eta_seconds=0)
    if run.total is None or rate <= 0:
        return Progress(rate=round(rate, 2), eta_seconds=None)
    return Progress(rate=round(rate, 2), eta_seconds=int(max(run.total - run.seen, 0) / rate))
