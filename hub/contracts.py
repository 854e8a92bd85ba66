"""Read models of the hub and the signatures of its services and selectors.

Everything REST (``hub/api.py``) and MCP (``hub/mcp/``) show comes from these frozen dataclasses;
neither surface touches the ORM. Every public operation takes the acting ``user`` and checks the
hub permission itself (``hub.use_hub``; settings writes and publications: staff; someone else's batch:
staff, ``hub.view_batch`` to read, ``hub.manage_any_batch`` to cancel or retry — see
``hub.permissions``), raising the
platform's errors (``achilles.errors``): ``PermissionDenied`` 403, ``NotFound`` 404, ``Conflict`` 409,
``ValidationFailed`` 422 whose ``detail`` is the human validation text (a ``str``) — the same text the
REST 422 carries and the MCP tool returns as its error result.

Selectors (``hub/selectors.py``, reads; ``*_page`` are the REST lists' keyset pages, see
``achilles.pagination``)::

    issues_page(*, user, filters: IssueFilters, cursor: str | None = None, limit: int = 50) -> Window[IssueRow]
    issues_list(*, user, filters: IssueFilters, limit: int = 50) -> list[IssueRow]      # first page (MCP)
    issue_card(*, user, key: str, recent_commands: int = 10, comments: int = 5) -> IssueCard
    batch_status(*, user, batch_id: int) -> BatchView
    batches_page(*, user, cursor: str | None = None, limit: int = 50) -> Window[BatchSummary]
    batches_list(*, user, limit: int = 20) -> list[BatchSummary]                        # first page (MCP)
    agent_status(*, user) -> AgentStatus
    sync_log_page(*, user, cursor: str | None = None, limit: int = 50) -> Window[SyncRunView]
    sync_log(*, user, limit: int = 20) -> list[SyncRunView]                             # first page (MCP)
    publications_page(*, user, cursor: str | None = None, limit: int = 50) -> Window[PublicationView]
    settings_get(*, user, key: str | None = None) -> dict[str, Any]      # None → every key
    settings_version_get() -> int

Services (``hub/services.py``, writes)::

    notes_set(*, user, key: str, fields: dict[str, str | None]) -> NotesView
        # fields ⊆ {fact_status, note, next_step, owner}; unknown field → ValidationFailed
    batch_create(*, user, title: str, commands: list[dict], author: str | None = None,
                 default_author: str = "api") -> BatchCreated
        # commands parsed by hub.command_contract.commands_parse (ensure_issue must carry the base_label
        # setting); MCP passes default_author="claude"; a named author needs staff or
        # hub.name_batch_author (else PermissionDenied)
    batch_wait(*, user, batch_id: int, timeout_minutes: float) -> BatchView          # blocking (sync)
    batch_wait_async(*, user, batch_id: int, timeout_minutes: float) -> BatchView    # coroutine
        # timeout_minutes must be > 0 and ≤ 60 else ValidationFailed; wakes within 1 s of the
        # batch finishing (Redis pub/sub published on commit), returns the view at the timeout
    batch_cancel(*, user, batch_id: int) -> BatchCancelResult
    command_cancel(*, user, command_id: int, force: bool = False) -> CommandView
        # queued → cancelled; claimed without force → Conflict (code "command_claimed");
        # claimed with force → cancelled, the sync agent is told on its next claim
    command_retry(*, user, command_id: int, author: str | None = None, default_author: str = "api") -> BatchCreated
    refresh(*, user, keys: list[str] | None = None, full: bool = False, author: str | None = None,
            default_author: str = "api") -> BatchCreated
        # cancel and retry of someone else's batch/command: NotFound unless visible, PermissionDenied
        # unless manageable; every create, cancel and retry is an audit event
    settings_set(*, user, key: str, value: Any) -> int           # staff only; new settings_version

Text helpers shared by REST and MCP (``hub/texts.py``)::

    claimed_command_line(command_id: int) -> str
        # «команда #N уже у агента и будет выполнена; остановить — `POST /commands/N/cancel` с `force: true`»

The command contract is ``hub.command_contract`` (``commands_parse(raw: list[dict]) -> list[Command]``,
``COMMANDS_JSON_SCHEMA``); the sync-agent protocol is ``hub/PROTOCOL.md``.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

# Command states (CHECK-constrained in hub_commands).
QUEUED, CLAIMED, DONE, FAILED, CANCELLED = "queued", "claimed", "done", "failed", "cancelled"
FINAL_STATES = (DONE, FAILED, CANCELLED)

NOTE_FIELDS = ("fact_status", "note", "next_step", "owner")


@dataclass(frozen=True)
class IssueFilters:
    """HUB-3 filters; every one optional, combined with AND."""

    project: str | None = None
    status: str | None = None
    assignee: str | None = None
    sprint: str | None = None
    label: str | None = None
    fact_status: str | None = None
    due_from: dt.date | None = None
    due_to: dt.date | None = None
    overdue: bool | None = None  # True: due date before today and status not done-like
    text: str | None = None  # substring of key / summary (case-insensitive)
    updated_since: dt.datetime | None = None


@dataclass(frozen=True)
class IssueRow:
    key: str
    project: str
    summary: str
    status: str
    issue_type: str
    priority: str
    assignee: str
    duedate: dt.date | None
    sprint: str
    labels: tuple[str, ...]
    updated: dt.datetime | None
    fact_status: str  # "" when no notes


@dataclass(frozen=True)
class LinkView:
    link_type: str
    direction: str  # from this issue's side: "outward" | "inward"
    other_key: str
    other_summary: str  # "" when the other issue is not mirrored


@dataclass(frozen=True)
class CommentView:
    jira_id: str
    author: str
    created: dt.datetime | None
    body: str


@dataclass(frozen=True)
class NotesView:
    key: str
    fact_status: str
    note: str
    next_step: str
    owner: str
    updated_at: dt.datetime | None


@dataclass(frozen=True)
class CommandView:
    id: int
    batch_id: int
    seq: int
    type: str
    key: str  # the command's key ("$1" until resolved, "" for full refresh)
    state: str
    claims: int
    author: str
    payload: dict[str, Any]
    result: dict[str, Any] | None
    error: str
    lease_expires_at: dt.datetime | None
    created_at: dt.datetime
    finished_at: dt.datetime | None
    force_cancelled: bool


@dataclass(frozen=True)
class IssueCard:
    issue: IssueRow
    fields: dict[str, Any]  # raw Jira fields as mirrored
    description: str
    links: tuple[LinkView, ...]  # both sides
    notes: NotesView | None
    recent_commands: tuple[CommandView, ...]
    comments_total: int
    comments: tuple[CommentView, ...]  # newest first, at most `comments`


@dataclass(frozen=True)
class BatchSummary:
    id: int
    title: str
    author: str
    state: str  # queued | running | done | failed | cancelled | partial
    counts: dict[str, int]  # state → number of commands
    command_count: int
    created_at: dt.datetime
    finished_at: dt.datetime | None
    created_by: str | None = None  # the creator's username; None once that user is deleted


@dataclass(frozen=True)
class BatchView:
    id: int
    title: str
    author: str
    state: str
    finished: bool  # every command final
    counts: dict[str, int]
    commands: tuple[CommandView, ...]  # in seq order
    estimate_seconds: int  # remaining: 0 when finished
    created_at: dt.datetime
    finished_at: dt.datetime | None
    timed_out: bool = False  # set by batch_wait when it returned at its timeout
    created_by: str | None = None  # the creator's username; None once that user is deleted


@dataclass(frozen=True)
class BatchCreated:
    id: int
    estimate_seconds: int
    command_count: int


@dataclass(frozen=True)
class BatchCancelResult:
    batch: BatchView
    cancelled: tuple[int, ...]  # command ids cancelled now
    claimed: tuple[int, ...]  # command ids already at the sync agent (not cancelled)


@dataclass(frozen=True)
class ReissuedCommand:
    id: int
    type: str
    claims: int


@dataclass(frozen=True)
class PublicationView:
    version: int
    sha256: str
    size: int
    notes: str
    published_at: dt.datetime


@dataclass(frozen=True)
class AgentStatus:
    online: bool
    has_contact: bool  # a sync agent ever claimed
    last_contact_at: dt.datetime | None
    version: int | None
    launcher_version: int | None
    agent_reported: bool  # a claim came after the hub's last boot
    current_command: CommandView | None
    reissued: tuple[ReissuedCommand, ...]
    rate_limited_24h: int
    settings_version: int
    agent_settings_version: int | None  # the version the sync agent last said it holds
    publication: PublicationView | None
    update_state: str | None
    update_from: int | None
    update_to: int | None
    update_error: str
    update_hint: str | None  # e.g. «откат с v7 на v6: …»
    poll_interval_seconds: int
    lines: tuple[str, ...] = field(default=())  # the seed's Russian lines, ready to print


@dataclass(frozen=True)
class SyncRunView:
    id: int
    kind: str
    status: str  # running | ok | failed
    started_at: dt.datetime
    finished_at: dt.datetime | None
    counts: dict[str, int]
    errors: tuple[str, ...]
