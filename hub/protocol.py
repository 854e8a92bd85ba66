"""The sync-agent side of the hub (HUB-11, ``hub/PROTOCOL.md``): tokens, claim, report, mirror upload,
sync runs, publications, and the lease-expiry re-issue."""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any, Final

from django.db import connection, transaction
from django.utils import timezone
from psycopg.types.json import Jsonb

from achilles import audit, hooks
from achilles.errors import Conflict, NotFound, ValidationFailed
from achilles.tokens import token_hash, token_mint
from hub import hub_settings, services, tasks
from hub.access import project_acl, project_acl_map
from hub.command_contract import REAL_KEY_RE, REF_RE
from hub.models import Command, Publication, RateLimitEvent, SyncAgent, SyncAgentContact, SyncRun

TOKEN_PREFIX = "achsync_"


# ---------------------------------------------------------------- tokens


@transaction.atomic
def sync_agent_create(*, name: str) -> tuple[SyncAgent, str]:
    """A new sync agent and its token; the raw token is returned once and never stored."""
    name = (name or "").strip()
    if not re.fullmatch(r"[A-Za-z0-9_.-]{1,100}", name):
        raise ValidationFailed("name: 1–100 characters of A-Z a-z 0-9 _ . -")
    if SyncAgent.objects.filter(name=name).exists():
        raise Conflict(f"a sync agent named {name} exists", code="sync_agent_exists")
    prefix, raw = token_mint(kind=TOKEN_PREFIX)
    agent = SyncAgent.objects.create(name=name, token_prefix=prefix, token_hash=token_hash(raw))
    return agent, raw


@transaction.atomic
def sync_agent_rotate(*, sync_agent: SyncAgent) -> str:
    prefix, raw = token_mint(kind=TOKEN_PREFIX)
    SyncAgent.objects.filter(pk=sync_agent.pk).update(token_prefix=prefix, token_hash=token_hash(raw), revoked_at=None)
    return raw


def sync_agent_authenticate(raw: str) -> SyncAgent | None:
    if not raw or not raw.startswith(TOKEN_PREFIX) or len(raw) > 200:
        return None
    return SyncAgent.objects.filter(token_hash=token_hash(raw), revoked_at__isnull=True).first()


# ---------------------------------------------------------------- claim

CONTACT_SQL = """
INSERT INTO hub_sync_agent_contacts AS h (sync_agent_id, last_contact_at, last_claim_at, version, launcher_version,
                                          settings_version, update_state, update_from, update_to, update_error)
VALUES (%(agent)s, %(now)s, %(now)s, %(version)s, %(launcher)s, %(settings_version)s, %(state)s, %(from)s, %(to)s, %(error)s)
ON CONFLICT (sync_agent_id) DO UPDATE SET
    last_contact_at = EXCLUDED.last_contact_at, last_claim_at = EXCLUDED.last_claim_at, version = EXCLUDED.version,
    launcher_version = EXCLUDED.launcher_version, settings_version = EXCLUDED.settings_version,
    update_state = EXCLUDED.update_state, update_from = EXCLUDED.update_from, update_to = EXCLUDED.update_to,
    update_error = EXCLUDED.update_error
"""

HUB_STATE_SQL = """
SELECT (SELECT settings_version FROM hub_state WHERE id = 1),
       (SELECT jsonb_object_agg(key, value) FROM hub_settings),
       (SELECT jsonb_build_object('version', version, 'sha256', sha256, 'size', size, 'notes', notes,
                                  'published_at', published_at)
        FROM hub_publications ORDER BY version DESC LIMIT 1)
"""

CLAIM_SQL = """
WITH picked AS (
    SELECT c.id, replace(gen_random_uuid()::text, '-', '') AS token
    FROM hub_commands c
    WHERE (c.state = 'queued' OR (c.state = 'claimed' AND c.lease_expires_at < statement_timestamp()))
      AND (cardinality(c.depends_on) = 0
           OR NOT EXISTS (SELECT 1 FROM hub_commands d
                          WHERE d.batch_id = c.batch_id AND d.seq = ANY(c.depends_on) AND d.state <> 'done'))
      AND (NOT c.waits_for_batch
           OR NOT EXISTS (SELECT 1 FROM hub_commands o
                          WHERE o.batch_id = c.batch_id AND o.id <> c.id AND o.state IN ('queued', 'claimed')))
    ORDER BY c.batch_id, c.seq
    LIMIT %(limit)s
    FOR UPDATE OF c SKIP LOCKED
)
UPDATE hub_commands c
SET state = 'claimed', claims = c.claims + 1, lease_token = picked.token,
    lease_tokens = array_append(c.lease_tokens, picked.token::varchar),
    lease_expires_at = statement_timestamp() + make_interval(secs => %(lease)s),
    claimed_at = statement_timestamp(), claimed_by_id = %(agent)s
FROM picked WHERE c.id = picked.id
RETURNING c.id, c.batch_id, c.seq, c.claims, c.lease_token, c.lease_expires_at, c.type, c.payload, c.depends_on,
          c.waits_for_batch
"""


class Claimed:
    """Columns of a row CLAIM_SQL returns."""

    ID: Final = 0
    BATCH_ID: Final = 1
    SEQ: Final = 2
    CLAIMS: Final = 3
    LEASE_TOKEN: Final = 4
    LEASE_EXPIRES_AT: Final = 5
    TYPE: Final = 6
    PAYLOAD: Final = 7
    DEPENDS_ON: Final = 8
    WAITS_FOR_BATCH: Final = 9


def _batch_order(row: tuple[Any, ...]) -> tuple[int, int]:
    return row[Claimed.BATCH_ID], row[Claimed.SEQ]


def _needs_created_keys(row: tuple[Any, ...]) -> bool:
    """Whether a claimed command names keys its batch created (``$N``): by its dependencies, or a
    refresh listing such references."""
    if row[Claimed.DEPENDS_ON]:
        return True
    if row[Claimed.TYPE] != "refresh":
        return False
    return any(REF_RE.match(k) for k in (_payload(row[Claimed.PAYLOAD]).get("keys") or []))


def _resolve(payload: dict, created: dict[int, str]) -> dict:
    """Substitute `$N` with the key command N created; unresolved refresh keys are dropped."""
    out = dict(payload)
    for field in ("key", "other_key"):
        value = out.get(field)
        match = REF_RE.match(value) if isinstance(value, str) else None
        if match:
            out[field] = created[int(match.group(1))]
    if out.get("keys"):
        keys = []
        for key in out["keys"]:
            match = REF_RE.match(key)
            if not match:
                keys.append(key)
            elif created.get(int(match.group(1))):
                keys.append(created[int(match.group(1))])
        out["keys"] = list(dict.fromkeys(keys))
    return out


@transaction.atomic
def sync_agent_claim(
    *,
    sync_agent: SyncAgent,
    version: int,
    launcher_version: int | None,
    max_commands: int = 20,
    settings_version: int | None = None,
    update: dict | None = None,
) -> dict[str, Any]:
    """Take up to ``max_commands`` issuable commands in batch order under fresh leases (PROTOCOL.md)."""
    now = timezone.now()
    update = update or {}
    state = update.get("state")
    with connection.cursor() as cursor:
        cursor.execute(
            CONTACT_SQL,
            {
                "agent": sync_agent.pk,
                "now": now,
                "version": version,
                "launcher": launcher_version,
                "settings_version": settings_version,
                "state": state,
                "from": update.get("from_version") if state else None,
                "to": update.get("to_version") if state else None,
                "error": (update.get("error") or "") if state else "",
            },
        )

    cancelled = list(
        Command.objects.select_for_update(skip_locked=True)
        .filter(claimed_by=sync_agent, force_cancelled=True, cancel_notified_at__isnull=True)
        .values_list("id", flat=True)
    )
    if cancelled:
        Command.objects.filter(pk__in=cancelled).update(cancel_notified_at=now)

    # One round trip for what every claim answers besides the commands.
    with connection.cursor() as cursor:
        cursor.execute(HUB_STATE_SQL)
        hub_version, stored, publication = cursor.fetchone()
    current = {**hub_settings.DEFAULTS, **(_payload(stored) if stored else {})}
    hub_version = hub_version if hub_version is not None else 1
    if isinstance(publication, str):
        publication = json.loads(publication)
    with connection.cursor() as cursor:
        cursor.execute(
            CLAIM_SQL, {"limit": max_commands, "lease": int(current["lease_seconds"]), "agent": sync_agent.pk}
        )
        rows = cursor.fetchall()
    rows.sort(key=_batch_order)

    # `$N` → created keys, one query for every batch that needs it.
    need = {row[Claimed.BATCH_ID] for row in rows if _needs_created_keys(row)}
    created: dict[int, dict[int, str]] = {b: {} for b in need}
    if need:
        for batch_id, seq, key in (
            Command.objects.filter(batch_id__in=need)
            .exclude(created_key="")
            .values_list("batch_id", "seq", "created_key")
        ):
            created[batch_id][seq] = key

    commands, empty_refreshes = [], []
    for cid, batch_id, seq, claims, token, expires, kind, payload, _deps, _waits in rows:
        sent = _resolve(_payload(payload), created.get(batch_id, {}))
        if kind == "refresh" and not sent.get("full") and not sent.get("keys"):
            empty_refreshes.append((cid, batch_id, token))
            continue
        commands.append(
            {
                "id": cid,
                "batch_id": batch_id,
                "seq": seq,
                "claims": claims,
                "lease_token": token,
                "lease_expires_at": expires,
                "command": sent,
            }
        )
    if empty_refreshes:
        # The batch created nothing to refresh (its ensure_issue failed): nothing for the sync agent to do.
        for cid, _batch_id, token in empty_refreshes:
            Command.objects.filter(pk=cid).update(
                state="done",
                result={"message": "nothing to refresh: the batch created no issue", "changed": []},
                finished_at=timezone.now(),
                finished_lease_token=token,
                lease_token=None,
                lease_expires_at=None,
            )
        services.batches_settle([b for _c, b, _t in empty_refreshes])

    return {
        "commands": commands,
        "cancelled": cancelled,
        "settings_version": hub_version,
        "settings": current if settings_version != hub_version else None,
        "publication": None
        if publication is None
        else {**publication, "download_url": f"/api/hub/sync-agent/publications/{publication['version']}"},
        "server_time": timezone.now(),
    }


def _payload(value) -> dict:
    return json.loads(value) if isinstance(value, str) else dict(value)


# ---------------------------------------------------------------- report

REPORT_APPLY_SQL = """
UPDATE hub_commands c
SET state = r.state, finished_at = statement_timestamp(), finished_lease_token = r.token, lease_token = NULL,
    lease_expires_at = NULL, result = r.result, error = r.error,
    created_key = coalesce(r.created_key, c.created_key),
    keys = CASE WHEN r.created_key IS NOT NULL THEN ARRAY[r.created_key]::varchar[] ELSE c.keys END
FROM jsonb_to_recordset(%s::jsonb) AS r(id bigint, state text, token text, result jsonb, error text, created_key text)
WHERE c.id = r.id
"""

# Once an ensure_issue's key is known, the batch's other commands store it instead of its `$N`
# (the new issue's card lists commands by key: a refresh left at `$2` was missing from it).
REPORT_RESOLVE_REFS_SQL = """
UPDATE hub_commands c
SET keys = array_replace(c.keys, '$' || r.seq, r.created_key::varchar)
FROM jsonb_to_recordset(%s::jsonb) AS r(batch_id bigint, seq int, created_key text)
WHERE c.batch_id = r.batch_id AND ('$' || r.seq) = ANY(c.keys)
"""


@transaction.atomic
def sync_agent_report(*, sync_agent: SyncAgent, results: list[dict], rate_limited: list[dict]) -> list[dict]:
    """Apply results under their leases; duplicates and late reports are answered, never re-applied.

    A command id the hub never had → 404; a lease token the hub never issued for that command → 409
    ``lease_mismatch``; either way nothing of the report is stored (one transaction).
    """
    ids = [r["command_id"] for r in results]
    commands = {
        c.id: c
        for c in Command.objects.select_for_update()
        .filter(pk__in=ids)
        .order_by("id")
        .only("id", "batch_id", "seq", "type", "state", "lease_tokens", "finished_lease_token")
    }
    for item in results:
        command = commands.get(item["command_id"])
        if command is None:
            raise NotFound(f"command {item['command_id']} not found")
        if item["lease_token"] not in (command.lease_tokens or []):
            raise Conflict(
                f"command {command.id}: lease token was never issued for this command", code="lease_mismatch"
            )
        if item["status"] == "done" and command.type == "ensure_issue":
            key = (item.get("result") or {}).get("key")
            if not isinstance(key, str) or not REAL_KEY_RE.match(key):
                raise ValidationFailed(f"command {command.id}: an ensure_issue result needs key (PROJ-123)")
        if item["status"] == "failed" and not (item.get("error") or "").strip():
            raise ValidationFailed(f"command {command.id}: a failed result needs error")

    now = timezone.now()
    outcomes, settle, failed_by_batch, applied = [], set(), {}, []
    resolved: list[dict] = []
    for item in results:
        command = commands[item["command_id"]]
        token = item["lease_token"]
        if command.state in ("done", "failed", "cancelled"):
            same = command.finished_lease_token == token and command.state == item["status"]
            outcomes.append({"command_id": command.id, "outcome": "duplicate" if same else "ignored"})
            continue
        if token != command.lease_tokens[-1]:  # lint: positional-ok (the newest lease, not a row)
            # Superseded: the command was issued again under a newer lease.
            outcomes.append({"command_id": command.id, "outcome": "ignored"})
            continue
        # The newest lease, live or expired-but-not-yet-reissued: the work was done, take it.
        row = {
            "id": command.id,
            "state": item["status"],
            "token": token,
            "result": item.get("result"),
            "error": "",
            "created_key": None,
        }
        if item["status"] == "done":
            row["result"] = item.get("result") or {}
            if command.type == "ensure_issue":
                row["created_key"] = row["result"]["key"]
                resolved.append({"batch_id": command.batch_id, "seq": command.seq, "created_key": row["created_key"]})
        else:
            row["error"] = item["error"].strip()[:10000]
            failed_by_batch.setdefault(command.batch_id, []).append(command.seq)
        applied.append(row)
        settle.add(command.batch_id)
        outcomes.append({"command_id": command.id, "outcome": "applied"})
    if applied:
        # One statement for the whole report (a per-row save() was most of a report's time).
        with connection.cursor() as cursor:
            cursor.execute(REPORT_APPLY_SQL, [json.dumps(applied)])
            if resolved:
                cursor.execute(REPORT_RESOLVE_REFS_SQL, [json.dumps(resolved)])

    for batch_id, seqs in failed_by_batch.items():
        services.fail_dependents(batch_id=batch_id, seqs=seqs)
    services.batches_settle(sorted(settle))

    if rate_limited:
        RateLimitEvent.objects.bulk_create(
            [
                RateLimitEvent(
                    sync_agent=sync_agent,
                    at=e["at"],
                    retry_after_seconds=e.get("retry_after_seconds") or 0,
                    path=(e.get("path") or "")[:500],
                )
                for e in rate_limited
            ],
            ignore_conflicts=True,
        )
    SyncAgentContact.objects.filter(sync_agent=sync_agent).update(last_contact_at=now)
    return outcomes


# ---------------------------------------------------------------- lease expiry


@transaction.atomic
def commands_requeue_expired() -> list[int]:
    """Beat job: a claimed command whose lease expired without a report goes back to the queue; the
    next claim issues it again («довыдача», claims += 1)."""
    with connection.cursor() as cursor:
        cursor.execute(
            """
            UPDATE hub_commands SET state = 'queued', lease_token = NULL, lease_expires_at = NULL
            WHERE id IN (SELECT id FROM hub_commands WHERE state = 'claimed' AND lease_expires_at < statement_timestamp()
                         FOR UPDATE SKIP LOCKED)
            RETURNING id
            """
        )
        return [command_id for (command_id,) in cursor.fetchall()]


# ---------------------------------------------------------------- sync runs


@transaction.atomic
def sync_run_start(*, sync_agent: SyncAgent, kind: str) -> SyncRun:
    SyncAgentContact.objects.filter(sync_agent=sync_agent).update(last_contact_at=timezone.now())
    return SyncRun.objects.create(sync_agent=sync_agent, kind=kind)


@transaction.atomic
def sync_run_finish(
    *, sync_agent: SyncAgent, sync_run_id: int, status: str, counts: dict[str, int], errors: list[str]
) -> SyncRun:
    run = SyncRun.objects.select_for_update().filter(pk=sync_run_id, sync_agent=sync_agent).first()
    if run is None:
        raise NotFound(f"sync run {sync_run_id} not found")
    if run.status != "running":
        if run.status == status and run.counts == counts and run.errors == errors:
            return run  # a retried finish
        raise Conflict(f"sync run {sync_run_id} is already {run.status}", code="sync_run_finished")
    run.status, run.counts, run.errors, run.finished_at = status, counts, errors, timezone.now()
    run.save(update_fields=["status", "counts", "errors", "finished_at"])
    if _idle(run):
        # An idle poll replaces the previous idle poll: at a 10 s interval they were ~8 640 rows a day
        # saying nothing. The latest one stays: its time is when the sync was last seen working.
        with connection.cursor() as cursor:
            cursor.execute(IDLE_RUNS_DELETE_SQL, [sync_agent.pk, run.pk])
    return run


IDLE_RUNS_DELETE_SQL = """
DELETE FROM hub_sync_runs r
WHERE r.sync_agent_id = %s AND r.id <> %s AND r.kind = 'incremental' AND r.status = 'ok'
  AND r.errors = '[]'::jsonb
  AND NOT EXISTS (SELECT 1 FROM jsonb_each(r.counts) c WHERE c.value NOT IN ('0'::jsonb, 'null'::jsonb))
"""


def _idle(run: SyncRun) -> bool:
    """An incremental run that went fine and uploaded nothing at all."""
    return (
        run.kind == "incremental"
        and run.status == "ok"
        and not run.errors
        and not any(value for value in (run.counts or {}).values())
    )


# ---------------------------------------------------------------- mirror upload

_SPRINT_RE = re.compile(r"name=([^,\]]+)")

# A page is COPYed into a session's temporary table (emptied at commit, and before each page: two
# uploads may share a transaction) and merged from there: COPY parses rows several times faster
# than jsonb_to_recordset did.
STAGE_SQL = """
CREATE TEMP TABLE IF NOT EXISTS hub_upload_stage (
    key varchar(64), project varchar(32), summary text, status varchar(100), issue_type varchar(100),
    priority varchar(100), assignee varchar(200), duedate date, sprint varchar(200), labels varchar(255)[],
    description text, fields jsonb, updated timestamptz, sha varchar(64)
) ON COMMIT DELETE ROWS
"""

UPSERT_SQL = """
INSERT INTO hub_issues AS h (key, project, summary, status, issue_type, priority, assignee, duedate, sprint, labels,
                             description, fields, updated, content_sha256, mirrored_at)
SELECT key, project, summary, status, issue_type, priority, assignee, duedate, sprint, labels, description, fields,
       updated, sha, statement_timestamp() FROM hub_upload_stage
ON CONFLICT (key) DO UPDATE SET
    project = EXCLUDED.project, summary = EXCLUDED.summary, status = EXCLUDED.status,
    issue_type = EXCLUDED.issue_type, priority = EXCLUDED.priority, assignee = EXCLUDED.assignee,
    duedate = EXCLUDED.duedate, sprint = EXCLUDED.sprint, labels = EXCLUDED.labels,
    description = EXCLUDED.description, fields = EXCLUDED.fields, updated = EXCLUDED.updated,
    content_sha256 = EXCLUDED.content_sha256, mirrored_at = statement_timestamp()
WHERE h.updated <= EXCLUDED.updated AND h.content_sha256 <> EXCLUDED.content_sha256
RETURNING h.id, h.key
"""


def sprint_name(value: Any) -> str:
    """A sprint as a name; DC v2's ``com.atlassian.greenhopper…Sprint@…[…,name=…,…]`` string is read too."""
    if value is None:
        return ""
    if isinstance(value, list):
        value = value[-1] if value else ""  # lint: positional-ok (the current sprint, not a row)
    if isinstance(value, dict):
        return str(value.get("name") or "")
    text = str(value)
    match = _SPRINT_RE.search(text) if "greenhopper" in text or text.startswith("com.") else None
    return match.group(1) if match else text


def _content_sha(issue: dict) -> str:
    return hashlib.sha256(json.dumps(issue, sort_keys=True, ensure_ascii=False, default=str).encode()).hexdigest()


def _sync_run_running(sync_agent: SyncAgent | None, sync_run_id: int) -> None:
    """NotFound unless ``sync_run_id`` is a run of ``sync_agent`` (any, for staff), Conflict unless it is running."""
    run = SyncRun.objects.filter(pk=sync_run_id).values_list("sync_agent_id", "status").first()
    if run is None:
        raise NotFound(f"sync run {sync_run_id} not found")
    run_agent_id, run_status = run
    if sync_agent is not None and run_agent_id != sync_agent.pk:
        raise NotFound(f"sync run {sync_run_id} not found")
    if run_status != "running":
        raise Conflict(f"sync run {sync_run_id} is already {run_status}", code="sync_run_finished")


# The mirror's columns a change is told in (hub_issues, in this order; the upload rows carry them at 1..10).
_WATCHED = (
    "project",
    "summary",
    "status",
    "issue_type",
    "priority",
    "assignee",
    "duedate",
    "sprint",
    "labels",
    "description",
)


def _announce_changes(*, rows: list[tuple], before: dict[str, tuple], known_projects: set[str]) -> None:
    """Tell ``hooks.jira_issues_changed`` what this page changed (inside the upload's transaction)."""
    acl_map = project_acl_map()
    changes = []
    for key, *columns in rows:
        now = tuple(columns[: len(_WATCHED)])
        fields = dict(zip(_WATCHED, now, strict=True))
        old = before.get(key)
        if old is None:
            if fields["project"] not in known_projects:
                continue
            kind, diff = "created", {}
        else:
            diff = {
                field: [_plain(a), _plain(b)]
                for field, a, b in zip(_WATCHED, old, now, strict=True)
                if _comparable(field, a) != _comparable(field, b)
            }
            if not diff:
                continue  # comments, links or raw fields only: not (yet) an event agents hear of
            kind = "transitioned" if "status" in diff else "updated"
        changes.append(
            hooks.JiraIssueChange(
                key=key,
                project=fields["project"],
                issue_type=fields["issue_type"],
                status=fields["status"],
                labels=tuple(fields["labels"]),
                kind=kind,
                changes=diff,
                readers=tuple(project_acl(fields["project"], acl_map)),
            )
        )
    if changes:
        hooks.jira_issues_changed.fire(hooks.JiraIssuesChanged(changes=tuple(changes)))


def _comparable(field: str, value: Any) -> Any:
    if field == "labels":
        return sorted(value or [])
    if hasattr(value, "isoformat"):
        return value.isoformat()
    return value or None


def _plain(value: Any) -> Any:
    """A column's value as JSON (dates as ISO text; descriptions cut to a line's worth)."""
    if hasattr(value, "isoformat"):
        return value.isoformat()
    if isinstance(value, str) and len(value) > 200:
        return value[:199] + "…"
    return value


def _upload_row(key: str, issue: dict) -> tuple:
    """An uploaded issue as a row of ``hub_upload_stage`` (the key, the watched columns, then the rest)."""
    return (
        key,
        issue["project"],
        issue.get("summary") or "",
        issue.get("status") or "",
        issue.get("issue_type") or "",
        issue.get("priority") or "",
        issue.get("assignee") or "",
        issue.get("duedate"),
        sprint_name(issue.get("sprint"))[:200],
        list(issue.get("labels") or []),
        (issue.get("fields") or {}).get("description") or issue.get("description") or "",
        Jsonb(issue.get("fields") or {}),
        issue["updated"],
        _content_sha(issue),
    )


@transaction.atomic
def mirror_upload(*, sync_agent: SyncAgent | None, sync_run_id: int | None, issues: list[dict]) -> dict[str, int]:
    """Upsert a page of issues: identical → unchanged, older ``updated`` → stale, else written with its
    links and comments replaced. One statement per table; the KS is fed on commit."""
    if sync_run_id is not None:
        _sync_run_running(sync_agent, sync_run_id)
    seen: dict[str, dict] = {}
    for issue in issues:
        seen[issue["key"]] = issue  # a page naming a key twice keeps the last
    rows, sub = [_upload_row(key, issue) for key, issue in seen.items()], dict(seen)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT key, updated, {', '.join(_WATCHED)} FROM hub_issues WHERE key = ANY(%s)", [list(seen)])
        existing, before = {}, {}
        for key, updated, *watched in cursor.fetchall():
            existing[key], before[key] = updated, tuple(watched)
        # A project's first upload is the mirror's initial load, not news: its issues are not "created".
        cursor.execute(
            "SELECT DISTINCT project FROM hub_issues WHERE project = ANY(%s)",
            [sorted({issue["project"] for issue in seen.values()})],
        )
        known_projects = {project for (project,) in cursor.fetchall()}
        cursor.execute(STAGE_SQL)
        cursor.execute("DELETE FROM hub_upload_stage")
        with cursor.copy("COPY hub_upload_stage FROM STDIN") as copy:
            for row in rows:
                copy.write_row(row)
        cursor.execute(UPSERT_SQL)
        written = cursor.fetchall()
        ids = {key: pk for pk, key in written}
        if ids:
            cursor.execute("DELETE FROM hub_issue_links WHERE issue_id = ANY(%s)", [list(ids.values())])
            cursor.execute("DELETE FROM hub_issue_comments WHERE issue_id = ANY(%s)", [list(ids.values())])
            # The rows of these issues were just deleted in this transaction, so COPY (several times
            # faster than INSERT … SELECT) is safe once the page's own duplicates are dropped.
            links: dict[tuple, tuple] = {}
            comments: dict[tuple, tuple] = {}
            for key, pk in ids.items():
                for link in sub[key].get("links") or []:
                    row = (pk, link["link_type"], link["direction"], link["other_key"])
                    links[row] = row
                for comment in sub[key].get("comments") or []:
                    comments[(pk, str(comment["id"]))] = (
                        pk,
                        str(comment["id"]),
                        comment.get("author") or "",
                        comment.get("created"),
                        comment.get("body") or "",
                    )
            if links:
                with cursor.copy("COPY hub_issue_links (issue_id, link_type, direction, other_key) FROM STDIN") as copy:
                    for row in links.values():
                        copy.write_row(row)
            if comments:
                with cursor.copy(
                    "COPY hub_issue_comments (issue_id, jira_id, author, created, body) FROM STDIN"
                ) as copy:
                    for row in comments.values():
                        copy.write_row(row)
    stale = sum(
        1 for key, issue in seen.items() if key not in ids and key in existing and issue["updated"] < existing[key]
    )
    if sync_agent is not None:
        SyncAgentContact.objects.filter(sync_agent=sync_agent).update(last_contact_at=timezone.now())
    if ids:
        tasks.mirror_to_knowledge_on_commit(list(ids.values()))
        _announce_changes(
            rows=[sub_row for key, sub_row in zip(seen, rows, strict=True) if key in ids],
            before=before,
            known_projects=known_projects,
        )
    return {"upserted": len(ids), "unchanged": len(seen) - len(ids) - stale, "stale": stale}


# ---------------------------------------------------------------- publications


@transaction.atomic
def publication_create(*, version: int, artifact: bytes, notes: str = "", user=None) -> Publication:
    """HUB-13: publish sync-agent version N (bytes + sha256); versions only grow."""
    if not isinstance(version, int) or version < 1:
        raise ValidationFailed("version: a positive integer")
    if not artifact:
        raise ValidationFailed("artifact: empty")
    latest = Publication.objects.order_by("-version").values_list("version", flat=True).first()
    if latest is not None and version <= latest:
        raise Conflict(f"version {version} is not newer than the published v{latest}", code="publication_version")
    publication = Publication.objects.create(
        version=version,
        artifact=artifact,
        sha256=hashlib.sha256(artifact).hexdigest(),
        size=len(artifact),
        notes=notes or "",
        published_by=user,
    )
    audit.audit_record(
        actor=user if user is not None else "system",
        action=audit.HUB_PUBLICATION_CREATED,
        target=f"publication:v{version}",
        details={"sha256": publication.sha256, "size": publication.size},
    )
    return publication


def publication_get(*, version: int) -> Publication:
    publication = Publication.objects.filter(version=version).first()
    if publication is None:
        raise NotFound(f"publication v{version} not found")
    return publication
