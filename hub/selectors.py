"""Reads of the hub; every function returns ``hub.contracts`` dataclasses, never querysets."""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.db import connection
from django.db.models import Count, Q, QuerySet
from django.db.models.expressions import RawSQL
from django.db.models.functions import Upper
from django.utils import timezone

from achilles.errors import NotFound, ValidationFailed
from achilles.pagination import DEFAULT_LIMIT, Window, keyset_page
from achilles.platform import platform_settings
from hub import access, hub_settings
from hub.contracts import (
    CANCELLED,
    CLAIMED,
    DONE,
    FAILED,
    FINAL_STATES,
    QUEUED,
    AgentStatus,
    BatchSummary,
    BatchView,
    CommandView,
    CommentView,
    IssueCard,
    IssueFilters,
    IssueRow,
    LinkView,
    NotesView,
    PublicationView,
    ReissuedCommand,
    SyncRunView,
)
from hub.models import (
    Batch,
    Command,
    HubSetting,
    HubState,
    IssueNote,
    MirrorComment,
    MirrorIssue,
    MirrorLink,
    Publication,
    RateLimitEvent,
    SyncAgentContact,
    SyncRun,
)
from hub.notify import hub_booted_at
from hub.permissions import HubCaller, batch_visible, batches_all_visible, hub_access_check
from hub.texts import agent_status_lines, update_hint

# Seconds a command of each type takes at the sync agent (Jira round trips incl. the read-before-write).
COMMAND_COST_SECONDS = {
    "ensure_issue": 4,
    "ensure_fields": 2,
    "ensure_link": 2,
    "ensure_sprint": 2,
    "ensure_comment": 2,
    "ensure_transition": 3,
    "refresh": 1,
}
FULL_REFRESH_COST_SECONDS = 120
# Statuses that count as closed for `overdue` (Jira's stock "done" category names, case-folded).
DONE_STATUSES = ("done", "closed", "resolved", "готово", "закрыта", "закрыто", "решена")


# ---------------------------------------------------------------- settings


def settings_all() -> dict[str, Any]:
    """Every setting, defaults filled in (no permission check: the hub's own code reads these)."""
    values = dict(hub_settings.DEFAULTS)
    values.update({row.key: row.value for row in HubSetting.objects.all()})
    return values


def setting_value(key: str) -> Any:
    row = HubSetting.objects.filter(key=key).first()
    return row.value if row is not None else hub_settings.DEFAULTS[key]


def settings_version_get() -> int:
    # The row is inserted by migration 0002; a missing row (a flushed test database) reads as 1.
    version = HubState.objects.filter(pk=1).values_list("settings_version", flat=True).first()
    return version if version is not None else 1


def settings_get(*, user: HubCaller, key: str | None = None) -> dict[str, Any]:
    """``{key: value}`` for one key (unknown → 422) or every key."""
    hub_access_check(user)
    if key is None:
        return settings_all()
    if key not in hub_settings.SPECS:
        raise ValidationFailed(f"unknown setting «{key}»; known: {', '.join(hub_settings.SPECS)}")
    return {key: setting_value(key)}


# ---------------------------------------------------------------- issues


def _issue_row(issue: MirrorIssue, fact_status: str | None) -> IssueRow:
    return IssueRow(
        key=issue.key,
        project=issue.project,
        summary=issue.summary,
        status=issue.status,
        issue_type=issue.issue_type,
        priority=issue.priority,
        assignee=issue.assignee,
        duedate=issue.duedate,
        sprint=issue.sprint,
        labels=tuple(issue.labels or ()),
        updated=issue.updated,
        fact_status=fact_status or "",
    )


def issues_queryset(filters: IssueFilters) -> QuerySet[MirrorIssue]:
    qs = MirrorIssue.objects.all()
    if filters.overdue is not None:
        qs = qs.alias(status_upper=Upper("status"))
    if filters.project:
        qs = qs.filter(project=filters.project.upper())
    if filters.status:
        qs = qs.filter(status__iexact=filters.status)
    if filters.assignee:
        qs = qs.filter(assignee__iexact=filters.assignee)
    if filters.sprint:
        qs = qs.filter(sprint__iexact=filters.sprint)
    if filters.label:
        qs = qs.filter(labels__contains=[filters.label])
    if filters.fact_status:
        qs = qs.filter(pk__in=IssueNote.objects.filter(fact_status__iexact=filters.fact_status).values("issue_id"))
    if filters.due_from:
        qs = qs.filter(duedate__gte=filters.due_from)
    if filters.due_to:
        qs = qs.filter(duedate__lte=filters.due_to)
    if filters.overdue is not None:
        today = timezone.localdate()
        # UPPER(status) IN (…) rather than a case-insensitive regex: evaluated per candidate row.
        late = Q(duedate__lt=today) & ~Q(status_upper__in=[s.upper() for s in DONE_STATUSES])
        qs = qs.filter(late) if filters.overdue else qs.exclude(late)
    if filters.text:
        qs = qs.filter(Q(summary__icontains=filters.text) | Q(key__iexact=filters.text.strip()))
    if filters.updated_since:
        qs = qs.filter(updated__gte=filters.updated_since)
    return qs


def issues_page(
    *, user: HubCaller, filters: IssueFilters, cursor: str | None = None, limit: int = DEFAULT_LIMIT
) -> Window[IssueRow]:
    """HUB-3: mirrored issues matching every filter, most recently updated first; keyset on (updated, key).
    Issues of projects the caller may not read (hub setting ``project_acl``) are left out."""
    user = hub_access_check(user)
    qs = (
        access.issues_readable(user, issues_queryset(filters))
        .select_related("notes")
        .only(
            "key",
            "project",
            "summary",
            "status",
            "issue_type",
            "priority",
            "assignee",
            "duedate",
            "sprint",
            "labels",
            "updated",
            "notes__fact_status",
        )
    )
    ordering = None
    selective = {name for name, value in vars(filters).items() if value not in (None, "")} - {
        "project",
        "updated_since",
    }
    if selective:
        # With a selective filter the matches are few: sort them. Ordering by the bare column would let
        # the planner walk the `updated` index over every issue hoping to meet 50 matches early — a
        # full scan when they are rare (the p95 of bench/hub). Same order, so the same keyset.
        ordering = (RawSQL("hub_issues.updated + interval '0 seconds'", []).desc(), "key")
    page = keyset_page(qs, scope="hub-issues", keys=("-updated", "key"), cursor=cursor, limit=limit, ordering=ordering)
    return page.map(lambda issue: _issue_row(issue, getattr(getattr(issue, "notes", None), "fact_status", "")))


def issues_list(*, user: HubCaller, filters: IssueFilters, limit: int = 50) -> list[IssueRow]:
    """The first ``limit`` (≤ 500) rows of :func:`issues_page`: the MCP tool's table."""
    return issues_page(user=user, filters=filters, limit=max(1, min(int(limit), 500))).items


def _notes_view(key: str, note: IssueNote | None) -> NotesView | None:
    if note is None:
        return None
    return NotesView(
        key=key,
        fact_status=note.fact_status,
        note=note.note,
        next_step=note.next_step,
        owner=note.owner,
        updated_at=note.updated_at,
    )


def command_view(command: Command) -> CommandView:
    keys = command.keys or []
    return CommandView(
        id=command.id,
        batch_id=command.batch_id,
        seq=command.seq,
        type=command.type,
        key=", ".join(keys),
        state=command.state,
        claims=command.claims,
        author=getattr(command.batch, "author", "") if "batch" in command._state.fields_cache else "",
        payload=dict(command.payload),
        result=command.result,
        error=command.error,
        lease_expires_at=command.lease_expires_at,
        created_at=command.created_at,
        finished_at=command.finished_at,
        force_cancelled=command.force_cancelled,
    )


def issue_card(*, user: HubCaller, key: str, recent_commands: int = 10, comments: int = 5) -> IssueCard:
    """HUB-4: fields, links of both sides, notes, recent commands, the newest comments; an issue of a
    project the caller may not read is a 404, and so is hidden what other issues' links would tell."""
    user = hub_access_check(user)
    readable = access.readable_projects(user)
    issue = access.issue_readable_get(
        user=user, key=key, queryset=MirrorIssue.objects.select_related("notes"), access=readable
    )
    own = list(MirrorLink.objects.filter(issue=issue).order_by("link_type", "direction", "other_key"))
    # The other side: links other issues hold towards this one, seen from here (direction flipped) —
    # only those of issues the caller may read (such a link is the other issue's data).
    theirs = list(
        MirrorLink.objects.filter(other_key=issue.key)
        .exclude(issue=issue)
        .filter(readable.q("issue__project"))
        .select_related("issue")
        .order_by("link_type", "issue__key")
    )
    other_keys = {link.other_key for link in own}
    # An own link stays (it is this issue's data); the summary of a hidden target does not.
    summaries = dict(MirrorIssue.objects.filter(key__in=other_keys).filter(readable.q()).values_list("key", "summary"))
    links: list[LinkView] = [
        LinkView(
            link_type=lk.link_type,
            direction=lk.direction,
            other_key=lk.other_key,
            other_summary=summaries.get(lk.other_key, ""),
        )
        for lk in own
    ]
    seen = {(lk.link_type, lk.direction, lk.other_key) for lk in links}
    for link in theirs:
        flipped = "inward" if link.direction == "outward" else "outward"
        if (link.link_type, flipped, link.issue.key) not in seen:
            links.append(
                LinkView(
                    link_type=link.link_type,
                    direction=flipped,
                    other_key=link.issue.key,
                    other_summary=link.issue.summary,
                )
            )
            seen.add((link.link_type, flipped, link.issue.key))
    commands = (
        Command.objects.filter(keys__contains=[issue.key])
        .select_related("batch")
        .order_by("-id")[: max(0, recent_commands)]
    )
    total = MirrorComment.objects.filter(issue=issue).count()
    newest = MirrorComment.objects.filter(issue=issue).order_by("-created", "-id")[: max(0, comments)]
    note = getattr(issue, "notes", None)
    return IssueCard(
        issue=_issue_row(issue, note.fact_status if note else ""),
        fields=dict(issue.fields or {}),
        description=issue.description,
        links=tuple(links),
        notes=_notes_view(issue.key, note),
        recent_commands=tuple(command_view(c) for c in commands),
        comments_total=total,
        comments=tuple(CommentView(jira_id=c.jira_id, author=c.author, created=c.created, body=c.body) for c in newest),
    )


# ---------------------------------------------------------------- batches


def _command_cost(command: Command | dict) -> int:
    kind = command["type"] if isinstance(command, dict) else command.type
    payload = command if isinstance(command, dict) else command.payload
    if kind == "refresh" and payload.get("full"):
        return FULL_REFRESH_COST_SECONDS
    if kind == "refresh":
        return max(1, len(payload.get("keys") or []) * COMMAND_COST_SECONDS["refresh"])
    return COMMAND_COST_SECONDS[kind]


def queue_cost_seconds(*, before_batch_id: int | None = None) -> int:
    """Seconds of work queued ahead (open commands of earlier batches), costed like ``_command_cost``."""
    cases = " ".join(f"WHEN '{kind}' THEN {cost}" for kind, cost in COMMAND_COST_SECONDS.items() if kind != "refresh")
    sql = f"""
        SELECT coalesce(sum(CASE type {cases}
                            WHEN 'refresh' THEN CASE WHEN payload ->> 'full' = 'true' THEN {FULL_REFRESH_COST_SECONDS}
                                                     ELSE greatest(1, cardinality(keys)) * {COMMAND_COST_SECONDS["refresh"]} END
                            ELSE 1 END), 0)
        FROM hub_commands WHERE state IN ('queued', 'claimed') AND (%s::bigint IS NULL OR batch_id < %s::bigint)
    """
    with connection.cursor() as cursor:
        cursor.execute(sql, [before_batch_id, before_batch_id])
        return int(cursor.fetchone()[0])


def estimate_seconds(*, commands: list[dict], before_batch_id: int | None) -> int:
    """Wait for the next poll, the queue ahead, then this batch's own work."""
    poll = int(setting_value("poll_interval_seconds"))
    return poll + queue_cost_seconds(before_batch_id=before_batch_id) + sum(_command_cost(c) for c in commands)


def _batch_state(counts: dict[str, int], total: int) -> str:
    open_ = counts.get(QUEUED, 0) + counts.get(CLAIMED, 0)
    if open_:
        return "queued" if counts.get(QUEUED, 0) == total else "running"
    if counts.get(DONE, 0) == total:
        return "done"
    if counts.get(CANCELLED, 0) == total:
        return "cancelled"
    if counts.get(FAILED, 0) == total:
        return "failed"
    return "partial"


def batch_view(batch: Batch, *, timed_out: bool = False) -> BatchView:
    commands = list(Command.objects.filter(batch=batch).order_by("seq"))
    for command in commands:
        command.batch = batch
    counts: dict[str, int] = {}
    for command in commands:
        counts[command.state] = counts.get(command.state, 0) + 1
    open_commands = [c for c in commands if c.state not in FINAL_STATES]
    finished = not open_commands
    estimate = 0
    if not finished:
        poll = int(setting_value("poll_interval_seconds"))
        estimate = poll + queue_cost_seconds(before_batch_id=batch.id) + sum(_command_cost(c) for c in open_commands)
    return BatchView(
        id=batch.id,
        title=batch.title,
        author=batch.author,
        state=_batch_state(counts, len(commands)),
        finished=finished,
        counts=counts,
        commands=tuple(command_view(c) for c in commands),
        estimate_seconds=estimate,
        created_at=batch.created_at,
        finished_at=batch.finished_at,
        timed_out=timed_out and not finished,
        created_by=batch_owner_name(batch),
    )


def batch_owner_name(batch: Batch) -> str | None:
    """The username of who created the batch; None once that user is deleted (ON DELETE SET NULL)."""
    owner = batch.created_by
    return owner.get_username() if owner is not None else None


def batch_get(batch_id: int) -> Batch:
    batch = Batch.objects.select_related("created_by").filter(pk=batch_id).first()
    if batch is None:
        raise NotFound(f"batch {batch_id} not found")
    return batch


def batch_get_for_user(*, user: HubCaller, batch_id: int) -> Batch:
    """The batch if ``user`` may see it (their own; anyone's for staff, hub.view_batch,
    hub.manage_any_batch); someone else's is a 404, like a batch that does not exist."""
    person = hub_access_check(user)
    batch = batch_get(batch_id)
    if not batch_visible(person, created_by_id=batch.created_by_id):
        raise NotFound(f"batch {batch_id} not found")
    return batch


def batch_status(*, user: HubCaller, batch_id: int) -> BatchView:
    """HUB-8: every command's state and error, and the remaining estimate."""
    return batch_view(batch_get_for_user(user=user, batch_id=batch_id))


def batch_finished(batch_id: int) -> bool:
    return not Command.objects.filter(batch_id=batch_id, state__in=(QUEUED, CLAIMED)).exists()


def batches_page(*, user: HubCaller, cursor: str | None = None, limit: int = DEFAULT_LIMIT) -> Window[BatchSummary]:
    """HUB-9: batches with their state, newest first; keyset on id. Two queries per page. The caller's
    own batches, or everyone's for staff and holders of hub.view_batch / hub.manage_any_batch."""
    person = hub_access_check(user)
    batches = Batch.objects.select_related("created_by")
    if not batches_all_visible(person):
        batches = batches.filter(created_by=person)
    page = keyset_page(batches, scope="hub-batches", keys=("-id",), cursor=cursor, limit=limit)
    counts: dict[int, dict[str, int]] = {b.id: {} for b in page.items}
    for row in Command.objects.filter(batch_id__in=counts).values("batch_id", "state").annotate(n=Count("id")):
        counts[row["batch_id"]][row["state"]] = row["n"]
    return page.map(
        lambda b: BatchSummary(
            id=b.id,
            title=b.title,
            author=b.author,
            state=_batch_state(counts[b.id], sum(counts[b.id].values())),
            counts=counts[b.id],
            command_count=sum(counts[b.id].values()),
            created_at=b.created_at,
            finished_at=b.finished_at,
            created_by=batch_owner_name(b),
        )
    )


def batches_list(*, user: HubCaller, limit: int = 20) -> list[BatchSummary]:
    """The latest ``limit`` (≤ 200) batches: the MCP tool's table."""
    return batches_page(user=user, limit=max(1, min(int(limit), 200))).items


# ---------------------------------------------------------------- sync agent


def publication_latest() -> PublicationView | None:
    row = Publication.objects.defer("artifact").order_by("-version").first()
    if row is None:
        return None
    return PublicationView(
        version=row.version, sha256=row.sha256, size=row.size, notes=row.notes, published_at=row.published_at
    )


def publications_page(
    *, user: HubCaller, cursor: str | None = None, limit: int = DEFAULT_LIMIT
) -> Window[PublicationView]:
    """Published sync-agent versions, newest first; keyset on version."""
    hub_access_check(user)
    page = keyset_page(
        Publication.objects.defer("artifact"), scope="hub-publications", keys=("-version",), cursor=cursor, limit=limit
    )
    return page.map(
        lambda p: PublicationView(
            version=p.version, sha256=p.sha256, size=p.size, notes=p.notes, published_at=p.published_at
        )
    )


def agent_status(*, user: HubCaller) -> AgentStatus:
    """HUB-12: the sync agent as of its latest claim, with the seed's lines in ``lines``."""
    hub_access_check(user)
    now = timezone.now()
    poll = int(setting_value("poll_interval_seconds"))
    contact = SyncAgentContact.objects.filter(sync_agent__revoked_at__isnull=True).order_by("-last_contact_at").first()
    booted = hub_booted_at()
    agent_reported = contact is not None and (booted is None or contact.last_claim_at >= booted)
    current = (
        Command.objects.filter(state=CLAIMED, lease_expires_at__gt=now)
        .select_related("batch")
        .order_by("claimed_at", "id")
        .first()
    )
    reissued = (
        Command.objects.filter(state__in=(QUEUED, CLAIMED), claims__gte=2)
        .order_by("batch_id", "seq")
        .values_list("id", "type", "claims")[:50]
    )
    publication = publication_latest()
    fields: dict[str, Any] = dict(  # noqa: C408 — keyword form mirrors AgentStatus's fields
        online=contact is not None and (now - contact.last_contact_at).total_seconds() <= 2 * poll,
        has_contact=contact is not None,
        last_contact_at=contact.last_contact_at if contact else None,
        version=contact.version if contact else None,
        launcher_version=contact.launcher_version if contact else None,
        agent_reported=agent_reported,
        current_command=command_view(current) if current else None,
        reissued=tuple(ReissuedCommand(id=i, type=t, claims=c) for i, t, c in reissued),
        rate_limited_24h=RateLimitEvent.objects.filter(at__gte=now - dt.timedelta(hours=24)).count(),
        settings_version=settings_version_get(),
        agent_settings_version=contact.settings_version if contact else None,
        publication=publication,
        update_state=contact.update_state if contact else None,
        update_from=contact.update_from if contact else None,
        update_to=contact.update_to if contact else None,
        update_error=contact.update_error if contact else "",
        poll_interval_seconds=poll,
    )
    fields["update_hint"] = update_hint(
        state=fields["update_state"],
        version=fields["version"],
        update_from=fields["update_from"],
        update_to=fields["update_to"],
        error=fields["update_error"],
        launcher_version=fields["launcher_version"],
        agent_reported=agent_reported,
        publication_version=publication.version if publication else None,
    )
    status = AgentStatus(**fields)
    return AgentStatus(**fields, lines=tuple(agent_status_lines(status, tz=platform_settings().timezone)))


def sync_log_page(*, user: HubCaller, cursor: str | None = None, limit: int = DEFAULT_LIMIT) -> Window[SyncRunView]:
    """HUB-14: the sync runs, newest first; keyset on id."""
    hub_access_check(user)
    page = keyset_page(SyncRun.objects.all(), scope="hub-sync-log", keys=("-id",), cursor=cursor, limit=limit)
    return page.map(
        lambda r: SyncRunView(
            id=r.id,
            kind=r.kind,
            status=r.status,
            started_at=r.started_at,
            finished_at=r.finished_at,
            counts=dict(r.counts or {}),
            errors=tuple(r.errors or ()),
        )
    )


def sync_log(*, user: HubCaller, limit: int = 20) -> list[SyncRunView]:
    """The latest ``limit`` (≤ 200) sync runs: the MCP tool's table."""
    return sync_log_page(user=user, limit=max(1, min(int(limit), 200))).items
