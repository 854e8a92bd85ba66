"""REST routes of connectors, mounted at ``/api/knowledge/connectors`` (staff only).

The token is write-only: ``ConnectorIn.token`` is accepted on create and update, and no response
carries it (``has_credentials`` says whether one is stored).
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from django.http import HttpRequest
from ninja import Query, Router, Schema, Status
from pydantic import Field, StrictBool, StrictInt

from achilles.errors import PermissionDenied
from achilles.pagination import ListParams, Page
from knowledge.connectors import selectors, services
from knowledge.connectors.models import Connector, ConnectorRun

router = Router(tags=["knowledge"])


class ConnectorIn(Schema):
    kind: Literal["confluence"] = "confluence"
    name: str = Field(min_length=1, max_length=100)
    base_url: str = Field(
        min_length=1, max_length=2000, description="e.g. https://wiki.example.com (context path included)"
    )
    token: str = Field(
        min_length=1, max_length=4000, description="A personal access token. Write-only: never returned."
    )
    spaces: list[str] = Field(min_length=1, max_length=500, description="Keys of the spaces to include.")
    schedule_minutes: StrictInt = Field(default=60, ge=1, le=10080)
    permission_sync_minutes: StrictInt = Field(default=15, ge=1, le=10080)
    enabled: StrictBool = True


class ConnectorPatch(Schema):
    name: str | None = Field(default=None, min_length=1, max_length=100)
    base_url: str | None = Field(default=None, min_length=1, max_length=2000)
    token: str | None = Field(default=None, min_length=1, max_length=4000, description="Replaces the stored token.")
    spaces: list[str] | None = Field(default=None, min_length=1, max_length=500)
    schedule_minutes: StrictInt | None = Field(default=None, ge=1, le=10080)
    permission_sync_minutes: StrictInt | None = Field(default=None, ge=1, le=10080)
    enabled: StrictBool | None = None


class ConnectorRunOut(Schema):
    id: int
    connector_id: int
    kind: str
    state: str
    seen: int
    changed: int
    deleted: int
    failed: int
    total: int | None
    rate: float | None = Field(description="Documents per second since the run started.")
    eta_seconds: int | None = Field(description="Seconds left at the current rate (null: unknown).")
    attempts: int
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    error: str
    errors: list[dict[str, str]] = Field(description="Documents the run could not take, with the reason (first 100).")


class ConnectorOut(Schema):
    id: int
    kind: str
    name: str
    base_url: str
    spaces: list[str]
    schedule_minutes: int
    permission_sync_minutes: int
    enabled: bool
    has_credentials: bool
    source_system: str
    created_at: datetime
    updated_at: datetime
    last_content_sync_at: datetime | None
    last_permission_sync_at: datetime | None


class RunIn(Schema):
    kind: Literal["content", "permissions"] = "content"


def _require_staff(request: HttpRequest) -> None:
    if not request.auth.is_staff:
        raise PermissionDenied("admins only")


def _connector_out(connector: Connector) -> ConnectorOut:
    return ConnectorOut(
        id=connector.pk,
        kind=connector.kind,
        name=connector.name,
        base_url=connector.base_url,
        spaces=list(connector.scope.get("spaces", [])),
        schedule_minutes=connector.schedule_minutes,
        permission_sync_minutes=connector.permission_sync_minutes,
        enabled=connector.enabled,
        has_credentials=bool(connector.credentials_encrypted),
        source_system=connector.source_system,
        created_at=connector.created_at,
        updated_at=connector.updated_at,
        last_content_sync_at=connector.last_content_sync_at,
        last_permission_sync_at=connector.last_permission_sync_at,
    )


def _run_out(run: ConnectorRun, *, with_errors: bool = False) -> ConnectorRunOut:
    progress = selectors.run_progress(run)
    errors = [{"external_id": e.external_id, "error": e.error} for e in run.errors.all()[:100]] if with_errors else []
    return ConnectorRunOut(
        id=run.pk,
        connector_id=run.connector_id,
        kind=run.kind,
        state=run.state,
        seen=run.seen,
        changed=run.changed,
        deleted=run.deleted,
        failed=run.failed,
        total=run.total,
        rate=progress.rate,
        eta_seconds=progress.eta_seconds,
        attempts=run.attempts,
        created_at=run.created_at,
        started_at=run.started_at,
        finished_at=run.finished_at,
        error=run.error,
        errors=errors,
    )


def _fields(payload: ConnectorIn | ConnectorPatch) -> services.ConnectorFields:
    data = payload.dict(exclude_unset=isinstance(payload, ConnectorPatch))
    return services.ConnectorFields(**data)


@router.get("", response=Page[ConnectorOut])
def connectors_list(request: HttpRequest, params: Query[ListParams]):
    """The configured connectors, oldest first (staff only)."""
    _require_staff(request)
    return selectors.connector_page(cursor=params.cursor, limit=params.limit).map(_connector_out)


@router.post("", response={201: ConnectorOut})
def connector_create(request: HttpRequest, payload: ConnectorIn):
    """Configure a connector; the token is stored encrypted and never shown again (staff only)."""
    _require_staff(request)
    connector = services.connector_create(actor=request.auth, fields=_fields(payload))
    return Status(201, _connector_out(connector))


@router.get("/{connector_id}", response=ConnectorOut)
def connector_get(request: HttpRequest, connector_id: int):
    _require_staff(request)
    return _connector_out(selectors.connector_get(connector_id=connector_id))


@router.patch("/{connector_id}", response=ConnectorOut)
def connector_update(request: HttpRequest, connector_id: int, payload: ConnectorPatch):
    """Change a connector; fields left out stay as they are (the token too)."""
    _require_staff(request)
    connector = services.connector_update(actor=request.auth, connector_id=connector_id, fields=_fields(payload))
    return _connector_out(connector)


@router.delete("/{connector_id}", response={204: None})
def connector_delete(request: HttpRequest, connector_id: int):
    """Delete the connector, its runs and every record it brought into the store."""
    _require_staff(request)
    services.connector_delete(actor=request.auth, connector_id=connector_id)
    return Status(204, None)


@router.post("/{connector_id}/run", response={202: ConnectorRunOut})
def connector_run(request: HttpRequest, connector_id: int, params: Query[RunIn]):
    """Queue a content sync (or, with ``?kind=permissions``, a permission sync); 409 ``already_running``
    while one of that kind is queued or running."""
    _require_staff(request)
    run = services.run_request(connector_id=connector_id, kind=params.kind, actor=request.auth)
    return Status(202, _run_out(run))


@router.get("/{connector_id}/runs", response=Page[ConnectorRunOut])
def connector_runs(request: HttpRequest, connector_id: int, params: Query[ListParams]):
    """The connector's runs, newest first, with counters, rate and ETA."""
    _require_staff(request)
    return selectors.run_page(connector_id=connector_id, cursor=params.cursor, limit=params.limit).map(_run_out)


@router.get("/{connector_id}/runs/{run_id}", response=ConnectorRunOut)
def connector_run_get(request: HttpRequest, connector_id: int, run_id: int):
    """One run with the documents it could not take."""
    _require_staff(request)
    return _run_out(selectors.run_get(connector_id=connector_id, run_id=run_id), with_errors=True)


@router.post("/{connector_id}/runs/{run_id}/cancel", response=ConnectorRunOut)
def connector_run_cancel(request: HttpRequest, connector_id: int, run_id: int):
    """Cancel a queued or running run: ``cancelled`` at once, its worker stops at the next batch
    boundary, the checkpoint stays as last committed; 409 ``run_finished`` if it had ended."""
    _require_staff(request)
    return _run_out(services.run_cancel(connector_id=connector_id, run_id=run_id, actor=request.auth))
