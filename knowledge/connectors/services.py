"""Writes of connectors: configuration (credentials encrypted, write-only), runs requested, deleted.

Every change is audited without its credentials: the audit details name which fields changed and
say ``credentials: "replaced"`` when the token was, never the token.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from achilles.audit import audit_record
from achilles.errors import Conflict, NotFound, ValidationFailed
from knowledge.connectors.models import (
    ACTIVE_RUN_STATES,
    CONNECTOR_URL_PATTERN,
    Connector,
    ConnectorKind,
    ConnectorRun,
    RunKind,
    RunState,
)
from knowledge.connectors.runs import run_cancel_mark, run_dispatch
from knowledge.connectors.secrets import credentials_encrypt
from knowledge.models import Record

ACTIVE_CONSTRAINT = "knowledge_connectorrun_one_active"
SPACE_KEY = re.compile(r"^[A-Za-z0-9~_-]{1,255}$")


@dataclass(frozen=True)
class ConnectorFields:
    """The editable fields of a connector (None: leave as is on update)."""

    kind: str | None = None
    name: str | None = None
    base_url: str | None = None
    token: str | None = None
    spaces: Sequence[str] | None = None
    schedule_minutes: int | None = None
    permission_sync_minutes: int | None = None
    enabled: bool | None = None


def _clean(fields: ConnectorFields) -> dict[str, Any]:
    values: dict[str, Any] = {}
    if fields.kind is not None:
        if fields.kind not in ConnectorKind.values:
            raise ValidationFailed(f"unknown connector kind «{fields.kind}»", code="invalid_kind", field="kind")
        values["kind"] = fields.kind
    if fields.name is not None:
        name = fields.name.strip()
        if not name:
            raise ValidationFailed("a connector needs a name", code="invalid_name", field="name")
        values["name"] = name
    if fields.base_url is not None:
        url = fields.base_url.strip().rstrip("/")
        if not re.match(CONNECTOR_URL_PATTERN, url, re.IGNORECASE):
            raise ValidationFailed("the base URL must be an http(s) address", code="invalid_url", field="base_url")
        values["base_url"] = url
    if fields.spaces is not None:
        spaces = sorted({str(key).strip() for key in fields.spaces})
        bad = [key for key in spaces if not SPACE_KEY.match(key)]
        if bad:
            raise ValidationFailed(f"not a space key: «{bad[0]}»", code="invalid_space", field="spaces")
        values["scope"] = {"spaces": spaces}
    for name in ("schedule_minutes", "permission_sync_minutes"):
        minutes = getattr(fields, name)
        if minutes is not None:
            if not 1 <= minutes <= 7 * 24 * 60:
                raise ValidationFailed("between 1 minute and a week", code="invalid_schedule", field=name)
            values[name] = minutes
    if fields.enabled is not None:
        values["enabled"] = fields.enabled
    if fields.token is not None:
        if not fields.token.strip():
            raise ValidationFailed("the token must not be blank", code="invalid_token", field="token")
        values["credentials_encrypted"] = credentials_encrypt({"token": fields.token.strip()})
    return values


def _audit_details(values: dict[str, Any]) -> dict[str, Any]:
    details = {key: value for key, value in values.items() if key != "credentials_encrypted"}
    if "credentials_encrypted" in values:
        details["credentials"] = "replaced"
    return details


def _save(connector: Connector) -> None:
    try:
        with transaction.atomic():
            connector.save()
    except IntegrityError as exc:
        if "name" in str(exc) and "unique" in str(exc).lower() or "knowledge_connectors_name" in str(exc):
            raise Conflict(_("Коннектор с таким именем уже есть."), code="connector_name_taken") from exc
        raise


@transaction.atomic
def connector_create(*, actor, fields: ConnectorFields) -> Connector:
    missing = [name for name in ("kind", "name", "base_url", "token") if getattr(fields, name) is None]
    if missing:
        raise ValidationFailed(f"{missing[0]} is required", code="missing_field", field=missing[0])
    connector = Connector(**_clean(fields))
    _save(connector)
    audit_record(
        actor=actor,
        action="knowledge.connector_create",
        target=connector.name,
        details=_audit_details(_clean(fields) | {"id": connector.pk}),
    )
    return connector


@transaction.atomic
def connector_update(*, actor, connector_id: int, fields: ConnectorFields) -> Connector:
    connector = Connector.objects.select_for_update().filter(pk=connector_id).first()
    if connector is None:
        raise NotFound(_("Коннектор не найден."), code="connector_not_found")
    if fields.kind is not None and fields.kind != connector.kind:
        raise ValidationFailed("a connector's kind cannot change", code="kind_immutable", field="kind")
    values = _clean(fields)
    for key, value in values.items():
        setattr(connector, key, value)
    _save(connector)
    audit_record(
        actor=actor, action="knowledge.connector_update", target=connector.name, details=_audit_details(values)
    )
    return connector


@transaction.atomic
def connector_delete(*, actor, connector_id: int) -> None:
    """Delete the connector, its runs and every record it brought into the store."""
    connector = Connector.objects.select_for_update().filter(pk=connector_id).first()
    if connector is None:
        raise NotFound(_("Коннектор не найден."), code="connector_not_found")
    removed = Record.objects.filter(source_system=connector.source_system).delete()[0]
    name = connector.name
    connector.delete()
    audit_record(actor=actor, action="knowledge.connector_delete", target=name, details={"records_deleted": removed})


def run_request(*, connector_id: int, kind: str = RunKind.CONTENT, actor=None) -> ConnectorRun:
    """Queue a run (409 ``already_running`` if one of this kind is queued or running); the task is
    sent after commit, so a rolled-back request leaves nothing queued."""
    with transaction.atomic():
        connector = Connector.objects.filter(pk=connector_id).first()
        if connector is None:
            raise NotFound(_("Коннектор не найден."), code="connector_not_found")
        try:
            with transaction.atomic():
                run = ConnectorRun.objects.create(connector=connector, kind=kind, state=RunState.QUEUED)
        except IntegrityError as exc:
            if ACTIVE_CONSTRAINT in str(exc):
                active = (
                    ConnectorRun.objects.filter(connector=connector, kind=kind, state__in=ACTIVE_RUN_STATES)
                    .values_list("pk", flat=True)
                    .first()
                )
                raise Conflict(
                    f"the connector already has a {kind} run in progress (run {active})", code="already_running"
                ) from exc
            raise
        if actor is not None:
            audit_record(
                actor=actor,
                action="knowledge.connector_run",
                target=connector.name,
                details={"run_id": run.pk, "kind": kind},
            )
        transaction.on_commit(lambda: run_dispatch(run.pk))
    return run


@transaction.atomic
def run_cancel(*, connector_id: int, run_id: int, actor=None) -> ConnectorRun:
    """Cancel a queued or running run: it becomes ``cancelled`` at once, its worker stops at the next
    batch boundary (that batch rolled back) and its checkpoint stays as last committed. 409
    ``run_finished`` if it had already ended."""
    run = ConnectorRun.objects.select_related("connector").filter(pk=run_id, connector_id=connector_id).first()
    if run is None:
        raise NotFound(_("Запуск коннектора не найден."), code="run_not_found")
    who = getattr(actor, "username", None) or "the system"
    if not run_cancel_mark(run.pk, reason=f"cancelled by {who}"):
        raise Conflict(
            _("Запуск уже закончился (%(state)s).") % {"state": run.get_state_display()}, code="run_finished"
        )
    if actor is not None:
        audit_record(
            actor=actor,
            action="knowledge.connector_run_cancel",
            target=run.connector.name,
            details={"run_id": run.pk, "kind": run.kind},
        )
    run.refresh_from_db()
    return run


def runs_schedule_due() -> list[int]:
    """Queue the content and permission syncs whose schedule is due (enabled connectors only)."""
    now = timezone.now()
    queued = []
    for connector in Connector.objects.filter(enabled=True):
        for kind, last, minutes in (
            ("content", connector.last_content_sync_at, connector.schedule_minutes),
            ("permissions", connector.last_permission_sync_at, connector.permission_sync_minutes),
        ):
            if last is None or now - last >= timedelta(minutes=minutes):
                try:
                    queued.append(run_request(connector_id=connector.pk, kind=kind).pk)
                except Conflict:
                    continue
    return queued
