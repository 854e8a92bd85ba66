"""The hub's REST: ``router`` for people and scripts (``/api/hub/…``, session or personal token, the
``hub.use_hub`` permission) and ``sync_agent_router`` for the sync agent (``/api/hub/sync-agent/…``,
its own ``achsync_`` token only; see PROTOCOL.md). Thin: parse → service/selector → schema."""

from __future__ import annotations

import dataclasses
from typing import Annotated

from django.http import HttpRequest, HttpResponse
from ninja import Body, Query, Router, Status
from ninja.errors import AuthorizationError
from ninja.security import HttpBearer
from pydantic import Field

from achilles.auth import SessionCookieAuth, token_person_set
from achilles.datetimes import ApiDate, ApiDateTime
from achilles.pagination import ListParams, Page
from achilles.services import api_token_authenticate
from hub import protocol, selectors, services
from hub.contracts import (
    AgentStatus,
    BatchSummary,
    BatchView,
    CommandView,
    IssueCard,
    IssueFilters,
    IssueRow,
    NotesView,
    PublicationView,
    SyncRunView,
)
from hub.permissions import hub_access_check
from hub.schemas import (
    BatchCancelOut,
    BatchCreatedOut,
    BatchIn,
    ClaimIn,
    ClaimOut,
    CommandCancelIn,
    PublicationIn,
    RefreshIn,
    ReportIn,
    ReportOut,
    RetryIn,
    SettingIn,
    SettingsVersionOut,
    SyncRunCreatedOut,
    SyncRunFinishIn,
    SyncRunIn,
    UploadIn,
    UploadOut,
)

# ---------------------------------------------------------------- auth


# ninja authenticates before it validates the body: checking the hub permission here answers a caller
# without it 403 (never the body's 422, which would tell them the route's shape first).


class HubPersonBearer(HttpBearer):
    """A personal token (``ach_…``) of someone with ``hub.use_hub`` (else 403); a sync agent's token
    here is the wrong kind of credential (403)."""

    def authenticate(self, request, token):
        if token.startswith(protocol.TOKEN_PREFIX):
            if protocol.sync_agent_authenticate(token) is not None:
                raise AuthorizationError()
            return None
        user = api_token_authenticate(token)
        if user is not None:
            token_person_set(request, user)
            hub_access_check(user)
        return user


class HubSessionAuth(SessionCookieAuth):
    """The browser session of someone with ``hub.use_hub`` (else 403)."""

    def authenticate(self, request, key):
        user = super().authenticate(request, key)
        if user is not None:
            hub_access_check(user)
        return user


class SyncAgentBearer(HttpBearer):
    """A sync agent's token (``achsync_…``); a person's token or session here is refused with 403."""

    def authenticate(self, request, token):
        agent = protocol.sync_agent_authenticate(token)
        if agent is not None:
            request.sync_agent = agent
            return agent
        if api_token_authenticate(token) is not None:
            raise AuthorizationError()
        return None


class SyncAgentSessionRefusal(SessionCookieAuth):
    """A signed-in browser session is a person: never a sync agent."""

    def authenticate(self, request, key):
        user = super().authenticate(request, key)
        if user is not None:
            raise AuthorizationError()
        return None


NotesBody = Annotated[dict, Body(..., description="Any subset of fact_status, note, next_step, owner (null clears).")]

router = Router(tags=["hub"], auth=[HubPersonBearer(), HubSessionAuth()])
sync_agent_router = Router(tags=["hub sync agent"], auth=[SyncAgentBearer(), SyncAgentSessionRefusal()])


def _d(value):
    return dataclasses.asdict(value)


# ---------------------------------------------------------------- issues and notes


class IssueFiltersIn(ListParams):
    project: str | None = None
    status: str | None = None
    assignee: str | None = None
    sprint: str | None = None
    label: str | None = None
    fact_status: str | None = None
    due_from: ApiDate | None = None
    due_to: ApiDate | None = None
    overdue: bool | None = None
    text: str | None = Field(default=None, max_length=200)
    updated_since: ApiDateTime | None = None


@router.get("/issues", response=Page[IssueRow], summary="Mirrored issues (HUB-3 filters), most recently updated first")
def issues(request: HttpRequest, filters: Query[IssueFiltersIn]):
    data = filters.model_dump()
    cursor, limit = data.pop("cursor"), data.pop("limit")
    # The filters are not in the cursor: a walk sends the same ones with each page.
    return selectors.issues_page(user=request.auth, filters=IssueFilters(**data), cursor=cursor, limit=limit)


@router.get("/issues/{key}", response=IssueCard, summary="Issue card: fields, links, notes, commands, comments")
def issue(request: HttpRequest, key: str, comments: int = Query(5, ge=0, le=100)):
    return selectors.issue_card(user=request.auth, key=key, comments=comments)


@router.patch("/issues/{key}/notes", response=NotesView, summary="Set any subset of the hub notes (HUB-2)")
def notes_set(request: HttpRequest, key: str, payload: NotesBody):
    return services.notes_set(user=request.auth, key=key, fields=payload)


# ---------------------------------------------------------------- batches and commands


@router.post("/batches", response={201: BatchCreatedOut}, summary="Create a batch of commands (HUB-6)")
def batch_create(request: HttpRequest, payload: BatchIn):
    created = services.batch_create(
        user=request.auth, title=payload.title, commands=payload.commands, author=payload.author
    )
    return Status(201, _d(created))


@router.get("/batches", response=Page[BatchSummary], summary="Batches, newest first")
def batches(request: HttpRequest, params: Query[ListParams]):
    return selectors.batches_page(user=request.auth, cursor=params.cursor, limit=params.limit)


@router.get("/batches/{batch_id}", response=BatchView, summary="Batch status (HUB-8)")
def batch_status(request: HttpRequest, batch_id: int):
    return selectors.batch_status(user=request.auth, batch_id=batch_id)


@router.get(
    "/batches/{batch_id}/wait",
    response=BatchView,
    summary="Wait until the batch finishes or timeout_minutes (≤ 60) pass",
)
async def batch_wait(request: HttpRequest, batch_id: int, timeout_minutes: float = 10):
    return await services.batch_wait_async(user=request.auth, batch_id=batch_id, timeout_minutes=timeout_minutes)


@router.post("/batches/{batch_id}/cancel", response=BatchCancelOut, summary="Cancel a batch's queued commands (HUB-9)")
def batch_cancel(request: HttpRequest, batch_id: int):
    result = services.batch_cancel(user=request.auth, batch_id=batch_id)
    return {
        "batch": _d(result.batch),
        "cancelled": list(result.cancelled),
        "claimed": list(result.claimed),
        "lines": services.batch_cancel_lines(result),
    }


@router.post(
    "/commands/{command_id}/cancel", response=CommandView, summary="Cancel a command; a claimed one needs force: true"
)
def command_cancel(request: HttpRequest, command_id: int, payload: CommandCancelIn | None = None):
    force = payload.force if payload is not None else False
    return services.command_cancel(user=request.auth, command_id=command_id, force=force)


@router.post(
    "/commands/{command_id}/retry", response={201: BatchCreatedOut}, summary="Run a command again in a new batch"
)
def command_retry(request: HttpRequest, command_id: int, payload: RetryIn | None = None):
    author = payload.author if payload is not None else None
    return Status(201, _d(services.command_retry(user=request.auth, command_id=command_id, author=author)))


@router.post("/refresh", response={201: BatchCreatedOut}, summary="Refresh keys or everything from Jira (HUB-10)")
def refresh(request: HttpRequest, payload: RefreshIn):
    created = services.refresh(user=request.auth, keys=payload.keys, full=payload.full, author=payload.author)
    return Status(201, _d(created))


# ---------------------------------------------------------------- sync agent status, log, settings


@router.get("/agent-status", response=AgentStatus, summary="The sync agent as of its latest claim (HUB-12)")
def agent_status(request: HttpRequest):
    return selectors.agent_status(user=request.auth)


@router.get("/sync-log", response=Page[SyncRunView], summary="Sync runs, newest first (HUB-14)")
def sync_log(request: HttpRequest, params: Query[ListParams]):
    return selectors.sync_log_page(user=request.auth, cursor=params.cursor, limit=params.limit)


@router.get("/settings", response=dict, summary="Every hub setting (HUB-15)")
def settings_all(request: HttpRequest):
    return {"settings_version": selectors.settings_version_get(), "settings": selectors.settings_get(user=request.auth)}


@router.get("/settings/{key}", response=dict, summary="One hub setting")
def setting_get(request: HttpRequest, key: str):
    return selectors.settings_get(user=request.auth, key=key)


@router.put(
    "/settings/{key}",
    response=SettingsVersionOut,
    summary="Set a hub setting (staff); returns the new settings_version",
)
def setting_set(request: HttpRequest, key: str, payload: SettingIn):
    return {"settings_version": services.settings_set(user=request.auth, key=key, value=payload.value)}


# ---------------------------------------------------------------- publications (staff)


@router.get("/publications", response=Page[PublicationView], summary="Published sync-agent versions, newest first")
def publications(request: HttpRequest, params: Query[ListParams]):
    return selectors.publications_page(user=request.auth, cursor=params.cursor, limit=params.limit)


@router.post("/publications", response={201: PublicationView}, summary="Publish sync-agent version N (staff)")
def publication_create(request: HttpRequest, payload: PublicationIn):
    hub_access_check(request.auth, staff=True)
    created = protocol.publication_create(
        version=payload.version, artifact=payload.artifact_base64, notes=payload.notes, user=request.auth
    )
    return Status(
        201,
        PublicationView(
            version=created.version,
            sha256=created.sha256,
            size=created.size,
            notes=created.notes,
            published_at=created.published_at,
        ),
    )


# ---------------------------------------------------------------- the sync-agent protocol


@sync_agent_router.post("/claim", response=ClaimOut, summary="Claim commands under leases; report contact")
def claim(request: HttpRequest, payload: ClaimIn):
    return protocol.sync_agent_claim(
        sync_agent=request.auth,
        version=payload.version,
        launcher_version=payload.launcher_version,
        max_commands=payload.max_commands,
        settings_version=payload.settings_version,
        update=payload.update.model_dump() if payload.update else None,
    )


@sync_agent_router.post("/report", response=ReportOut, summary="Report results (idempotent) and 429s")
def report(request: HttpRequest, payload: ReportIn):
    outcomes = protocol.sync_agent_report(
        sync_agent=request.auth,
        results=[r.model_dump() for r in payload.results],
        rate_limited=[e.model_dump() for e in payload.rate_limited],
    )
    return {"results": outcomes}


@sync_agent_router.post("/sync-runs", response={201: SyncRunCreatedOut}, summary="Start a sync run")
def sync_run_start(request: HttpRequest, payload: SyncRunIn):
    return Status(201, {"id": protocol.sync_run_start(sync_agent=request.auth, kind=payload.kind).pk})


@sync_agent_router.post("/sync-runs/{run_id}/finish", response=SyncRunCreatedOut, summary="Finish a sync run")
def sync_run_finish(request: HttpRequest, run_id: int, payload: SyncRunFinishIn):
    run = protocol.sync_run_finish(
        sync_agent=request.auth, sync_run_id=run_id, status=payload.status, counts=payload.counts, errors=payload.errors
    )
    return {"id": run.pk}


@sync_agent_router.post("/upload", response=UploadOut, summary="Upload a mirror page (≤ 500 issues), idempotently")
def upload(request: HttpRequest, payload: UploadIn):
    return protocol.mirror_upload(
        sync_agent=request.auth, sync_run_id=payload.sync_run_id, issues=[i.model_dump() for i in payload.issues]
    )


@sync_agent_router.get("/publications/{version}", summary="A published sync-agent artifact (.tar.gz)")
def publication_download(request: HttpRequest, version: int):
    publication = protocol.publication_get(version=version)
    response = HttpResponse(bytes(publication.artifact), content_type="application/gzip")
    response["X-Checksum-SHA256"] = publication.sha256
    response["Content-Disposition"] = f'attachment; filename="syncagent-v{publication.version}.tar.gz"'
    return response
