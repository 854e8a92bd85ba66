"""Writes of the hub for people (REST and MCP): notes, batches, cancel/retry, refresh, settings,
and ``batch_wait`` (sync and async), which sleeps on Redis pub/sub rather than polling."""

from __future__ import annotations

import asyncio
import re
import time
from typing import Any

import redis
from asgiref.sync import sync_to_async
from django.db import connection, transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from achilles import audit
from achilles.errors import Conflict, NotFound, ValidationFailed
from achilles.models import User
from achilles.names import text_problem
from hub import access, hub_settings, knowledge_feed, notify, selectors
from hub.command_contract import REAL_KEY_RE, REF_RE, command_dump, commands_parse, references
from hub.contracts import (
    CANCELLED,
    CLAIMED,
    FAILED,
    NOTE_FIELDS,
    QUEUED,
    BatchCancelResult,
    BatchCreated,
    BatchView,
    CommandView,
    NotesView,
)
from hub.models import Batch, Command, HubSetting, IssueNote
from hub.permissions import (
    HubCaller,
    author_name_check,
    batch_manage_check,
    batch_visible,
    hub_access_check,
)
from hub.texts import claimed_command_line

AUTHOR_RE = re.compile(r"^[a-z0-9_.@-]{1,64}$")
MAX_WAIT_MINUTES = 60
# A waiter re-reads the batch this often in case a pub/sub message was lost (Redis restart):
# a safety net, not the wake-up path.
WAIT_SAFETY_SECONDS = 30.0
# Without Redis (no pub/sub to wake on) a waiter reads the batch this often instead: the answer lives
# in PostgreSQL, so a Redis outage costs this much latency, not a 503.
WAIT_POLL_WITHOUT_REDIS_SECONDS = 1.0
NOTE_LIMITS = {"fact_status": 200, "note": 10000, "next_step": 10000, "owner": 200}
NOTE_MULTILINE = ("note", "next_step")
# Audit actions of the hub's queue (hub_setting_changed and hub_publication_created: achilles.audit).
HUB_BATCH_CREATED = "hub_batch_created"
HUB_BATCH_CANCELLED = "hub_batch_cancelled"
HUB_COMMAND_CANCELLED = "hub_command_cancelled"
HUB_COMMAND_RETRIED = "hub_command_retried"


# ---------------------------------------------------------------- notes


@transaction.atomic
def notes_set(*, user: HubCaller, key: str, fields: dict[str, Any]) -> NotesView:
    """HUB-2: set any subset of the notes; an unknown field or a non-string value is a 422."""
    user = hub_access_check(user)
    if not isinstance(fields, dict) or not fields:
        raise ValidationFailed(f"give at least one of: {', '.join(NOTE_FIELDS)}")
    unknown = [name for name in fields if name not in NOTE_FIELDS]
    if unknown:
        # no field=: the unknown name is not a field of the notes (MCP and REST answer the same text)
        raise ValidationFailed(f"unknown notes field «{unknown[0]}»; allowed: {', '.join(NOTE_FIELDS)}")
    clean: dict[str, str] = {}
    for name, value in fields.items():
        if value is None:
            value = ""
        if not isinstance(value, str):
            raise ValidationFailed("a string (or null to clear)", field=name)
        if "\x00" in value:
            raise ValidationFailed("NUL characters are not allowed", field=name)
        if len(value) > NOTE_LIMITS[name]:
            raise ValidationFailed(f"at most {NOTE_LIMITS[name]} characters", field=name)
        value = value.strip()
        problem = text_problem(value, multiline=name in NOTE_MULTILINE)
        if problem:
            raise ValidationFailed(problem, field=name)
        clean[name] = value
    issue = access.issue_readable_get(user=user, key=key)
    note, _created = IssueNote.objects.select_for_update().get_or_create(issue=issue)
    for name, value in clean.items():
        setattr(note, name, value)
    note.updated_by = user
    note.updated_at = timezone.now()
    note.save()
    return NotesView(
        key=issue.key,
        fact_status=note.fact_status,
        note=note.note,
        next_step=note.next_step,
        owner=note.owner,
        updated_at=note.updated_at,
    )


# ---------------------------------------------------------------- batches


def _author_check(user: User, author: str | None, default: str) -> str:
    author = author_name_check(user, author=author, default=default).strip()
    if not AUTHOR_RE.match(author):
        raise ValidationFailed("1–64 characters of a-z 0-9 _ . @ -", field="author")
    return author


def _title_check(title: Any) -> str:
    if not isinstance(title, str) or not title.strip():
        raise ValidationFailed("required, a non-empty string", field="title")
    if len(title.strip()) > 300 or "\x00" in title:
        raise ValidationFailed("at most 300 characters", field="title")
    problem = text_problem(title.strip())
    if problem:
        raise ValidationFailed(problem, field="title")
    return title.strip()


def _batch_created_audit(*, user: User, batch: Batch, payloads: list[dict]) -> None:
    audit.audit_record(
        actor=user,
        action=HUB_BATCH_CREATED,
        target=f"hub_batch:{batch.id}",
        details={
            "title": batch.title,
            "author": batch.author,
            "command_count": len(payloads),
            "types": [p["type"] for p in payloads],
        },
    )


def _command_for_user(*, user: User, command_id: int, what: str) -> Command:
    """The command locked for update, if ``user`` may act on its batch: someone else's batch is a 404
    unless visible to the caller, then a 403 unless the caller may manage anyone's."""
    command = _command_for_update(command_id)
    if not batch_visible(user, created_by_id=command.batch.created_by_id):
        raise NotFound(_("Команда %(id)s не найдена.") % {"id": command_id})
    batch_manage_check(user, created_by_id=command.batch.created_by_id, what=f"{what} {command_id}")
    return command


def _touched_keys(parsed: list) -> list[str]:
    keys: list[str] = []
    for index, command in enumerate(parsed, start=1):
        if command.type == "refresh":
            continue
        own = [f"${index}"] if command.type == "ensure_issue" else command.issue_keys()
        for key in own:
            if key not in keys:
                keys.append(key)
    return keys


def _batch_insert(
    *,
    user: User,
    title: str,
    author: str,
    payloads: list[dict],
    deps: list[list[int]],
    waits: list[bool],
    retry_of: Command | None = None,
) -> Batch:
    batch = Batch.objects.create(
        title=title, author=author, created_by=user if getattr(user, "pk", None) else None, retry_of=retry_of
    )
    Command.objects.bulk_create(
        [
            Command(
                batch=batch,
                seq=seq,
                type=payload["type"],
                payload=payload,
                keys=_payload_keys(payload),
                depends_on=dep,
                waits_for_batch=wait,
            )
            for seq, (payload, dep, wait) in enumerate(zip(payloads, deps, waits, strict=True), start=1)
        ]
    )
    return batch


def _payload_keys(payload: dict) -> list[str]:
    if payload["type"] == "refresh":
        return list(payload.get("keys") or [])
    return [k for k in (payload.get("key"), payload.get("other_key")) if k]


def _base_label() -> str:
    return str(selectors.setting_value("base_label"))


@transaction.atomic
def batch_create(
    *,
    user: HubCaller,
    title: str,
    commands: list[dict],
    author: str | None = None,
    default_author: str = "api",
) -> BatchCreated:
    """HUB-6: validate, store the commands in order, append one refresh of every touched key.

    ``default_author`` names the surface (REST ``api``, MCP ``claude``); ``author``, a name the caller
    asks for, is for staff and service accounts only (``hub.name_batch_author``)."""
    user = hub_access_check(user)
    author = _author_check(user, author, default_author)
    title = _title_check(title)
    parsed = commands_parse(commands, base_label=_base_label())
    access.projects_write_check(user=user, projects=access.command_projects(parsed))
    payloads = [command_dump(c) for c in parsed]
    deps = [references(c) for c in parsed]
    waits = [False] * len(parsed)
    touched = _touched_keys(parsed)
    if touched:
        payloads.append({"type": "refresh", "keys": touched})
        deps.append([])
        waits.append(True)
    batch = _batch_insert(user=user, title=title, author=author, payloads=payloads, deps=deps, waits=waits)
    _batch_created_audit(user=user, batch=batch, payloads=payloads)
    estimate = selectors.estimate_seconds(commands=payloads, before_batch_id=batch.id)
    return BatchCreated(id=batch.id, estimate_seconds=estimate, command_count=len(payloads))


def _wait_seconds(timeout_minutes: Any) -> float:
    if isinstance(timeout_minutes, bool) or not isinstance(timeout_minutes, (int, float)):
        raise ValidationFailed(f"timeout_minutes: a number of minutes, 0 < timeout_minutes ≤ {MAX_WAIT_MINUTES}")
    if not 0 < timeout_minutes <= MAX_WAIT_MINUTES:
        raise ValidationFailed(
            f"timeout_minutes must be more than 0 and at most {MAX_WAIT_MINUTES} (got {timeout_minutes})"
        )
    return float(timeout_minutes) * 60.0


def batch_wait(*, user: HubCaller, batch_id: int, timeout_minutes: float) -> BatchView:
    """HUB-8: block until the batch is finished (woken by pub/sub) or the timeout passes."""
    timeout = _wait_seconds(timeout_minutes)
    selectors.batch_get_for_user(user=user, batch_id=batch_id)
    deadline = time.monotonic() + timeout
    pubsub = notify.redis_client().pubsub(ignore_subscribe_messages=True)
    try:
        try:
            pubsub.subscribe(notify.batch_channel(batch_id))
            subscribed = True
        except redis.RedisError:
            subscribed = False  # Redis away: poll the database (see WAIT_POLL_WITHOUT_REDIS_SECONDS)
        # Subscribed first, then read: a finish between the two cannot be missed.
        while not selectors.batch_finished(batch_id):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            if not subscribed:
                time.sleep(min(remaining, WAIT_POLL_WITHOUT_REDIS_SECONDS))
                continue
            try:
                message = pubsub.get_message(timeout=min(remaining, WAIT_SAFETY_SECONDS))
            except redis.RedisError:
                time.sleep(min(max(remaining, 0), WAIT_POLL_WITHOUT_REDIS_SECONDS))
                continue
            if message is not None and message.get("type") == "message":
                break
    finally:
        pubsub.close()
    batch = selectors.batch_get(batch_id)
    return selectors.batch_view(batch, timed_out=time.monotonic() >= deadline)


async def batch_wait_async(*, user: HubCaller, batch_id: int, timeout_minutes: float) -> BatchView:
    """The coroutine twin of ``batch_wait`` for async views and the MCP server."""
    timeout = _wait_seconds(timeout_minutes)
    await sync_to_async(selectors.batch_get_for_user)(user=user, batch_id=batch_id)
    deadline = time.monotonic() + timeout
    client = notify.async_redis_client()
    pubsub = client.pubsub(ignore_subscribe_messages=True)
    try:
        try:
            await pubsub.subscribe(notify.batch_channel(batch_id))
            subscribed = True
        except redis.RedisError:
            subscribed = False  # Redis away: poll the database, as batch_wait does
        while not await sync_to_async(selectors.batch_finished)(batch_id):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            if not subscribed:
                await asyncio.sleep(min(remaining, WAIT_POLL_WITHOUT_REDIS_SECONDS))
                continue
            try:
                message = await pubsub.get_message(timeout=min(remaining, WAIT_SAFETY_SECONDS))
            except redis.RedisError:
                await asyncio.sleep(min(max(remaining, 0), WAIT_POLL_WITHOUT_REDIS_SECONDS))
                continue
            if message is not None and message.get("type") == "message":
                break
    finally:
        await pubsub.aclose()
        await client.aclose()

    def _view() -> BatchView:
        return selectors.batch_view(selectors.batch_get(batch_id), timed_out=time.monotonic() >= deadline)

    return await sync_to_async(_view)()


# ---------------------------------------------------------------- finishing commands (shared with the protocol)


def fail_dependents(*, batch_id: int, seqs: list[int]) -> None:
    """Queued commands naming a failed/cancelled command as `$N` fail too, transitively, with a message naming it."""
    pending = list(seqs)
    while pending:
        with connection.cursor() as cursor:
            cursor.execute(
                """
                UPDATE hub_commands c SET state = 'failed', finished_at = statement_timestamp(),
                       error = 'не выполнена: зависит от команды ' || (
                           SELECT string_agg('$' || d.seq || ' (#' || d.id || ', ' || d.state || ')', ', ' ORDER BY d.seq)
                           FROM hub_commands d WHERE d.batch_id = c.batch_id AND d.seq = ANY(c.depends_on)
                                 AND d.state IN ('failed', 'cancelled'))
                WHERE c.batch_id = %s AND c.state = 'queued' AND c.depends_on && %s::integer[]
                RETURNING c.seq
                """,
                [batch_id, pending],
            )
            pending = [row[0] for row in cursor.fetchall()]


def batches_settle(batch_ids: list[int]) -> list[int]:
    """Mark batches whose every command is final as finished; publish each on commit."""
    if not batch_ids:
        return []
    with connection.cursor() as cursor:
        # Lock the batches first: two transactions finishing a batch's last two commands would each
        # see the other's command still open (READ COMMITTED) and neither would mark it finished.
        # With the lock, the second one's check runs on a snapshot taken after the first commits.
        cursor.execute("SELECT id FROM hub_batches WHERE id = ANY(%s) ORDER BY id FOR UPDATE", [sorted(set(batch_ids))])
        cursor.execute(
            """
            UPDATE hub_batches b SET finished_at = greatest(statement_timestamp(), b.created_at)
            WHERE b.id = ANY(%s) AND b.finished_at IS NULL
              AND NOT EXISTS (SELECT 1 FROM hub_commands c WHERE c.batch_id = b.id AND c.state IN ('queued', 'claimed'))
            RETURNING b.id
            """,
            [sorted(set(batch_ids))],
        )
        finished = [row[0] for row in cursor.fetchall()]
    notify.batches_finished_on_commit(finished)
    notify.batch_owners_notify_on_commit(finished)
    return finished


def _command_for_update(command_id: int) -> Command:
    command = Command.objects.select_for_update().select_related("batch").filter(pk=command_id).first()
    if command is None:
        raise NotFound(_("Команда %(id)s не найдена.") % {"id": command_id})
    return command


def _cancel_queued(commands: list[Command]) -> list[int]:
    ids = [c.id for c in commands]
    Command.objects.filter(pk__in=ids, state=QUEUED).update(state=CANCELLED, finished_at=timezone.now())
    return ids


@transaction.atomic
def batch_cancel(*, user: HubCaller, batch_id: int) -> BatchCancelResult:
    """HUB-9: queued commands → cancelled; claimed ones stay with the sync agent (see the returned lines)."""
    user = hub_access_check(user)
    batch = selectors.batch_get_for_user(user=user, batch_id=batch_id)
    batch_manage_check(user, created_by_id=batch.created_by_id, what=f"batch {batch_id}")
    commands = list(Command.objects.select_for_update().filter(batch=batch).order_by("seq"))
    queued = [c for c in commands if c.state == QUEUED]
    claimed = tuple(c.id for c in commands if c.state == CLAIMED)
    cancelled = _cancel_queued(queued)
    if queued:
        fail_dependents(batch_id=batch.id, seqs=[c.seq for c in queued])
    batches_settle([batch.id])
    audit.audit_record(
        actor=user,
        action=HUB_BATCH_CANCELLED,
        target=f"hub_batch:{batch.id}",
        details={"cancelled": cancelled, "claimed": list(claimed), "owner": selectors.batch_owner_name(batch)},
    )
    batch.refresh_from_db(fields=["finished_at"])
    return BatchCancelResult(batch=selectors.batch_view(batch), cancelled=tuple(cancelled), claimed=claimed)


def batch_cancel_lines(result: BatchCancelResult) -> list[str]:
    """The per-command lines the seed asks for after a batch_cancel."""
    return [claimed_command_line(command_id) for command_id in result.claimed]


@transaction.atomic
def command_cancel(*, user: HubCaller, command_id: int, force: bool = False) -> CommandView:
    """HUB-9: cancel one command; a claimed one needs ``force`` (the sync agent is told on its next claim)."""
    user = hub_access_check(user)
    command = _command_for_user(user=user, command_id=command_id, what="command")
    if command.state in (CANCELLED, FAILED, "done"):
        raise Conflict(
            _("Команда %(id)s уже завершена (%(state)s).") % {"id": command_id, "state": command.state},
            code="command_final",
        )
    if command.state == CLAIMED and not force:
        raise Conflict(claimed_command_line(command_id), code="command_claimed")
    was_claimed = command.state == CLAIMED
    Command.objects.filter(pk=command.pk).update(
        state=CANCELLED,
        finished_at=timezone.now(),
        lease_token=None,
        lease_expires_at=None,
        force_cancelled=was_claimed,
    )
    fail_dependents(batch_id=command.batch_id, seqs=[command.seq])
    batches_settle([command.batch_id])
    audit.audit_record(
        actor=user,
        action=HUB_COMMAND_CANCELLED,
        target=f"hub_command:{command.id}",
        details={
            "batch_id": command.batch_id,
            "force": force,
            "was": CLAIMED if was_claimed else QUEUED,
            "owner": selectors.batch_owner_name(command.batch),
        },
    )
    command.refresh_from_db()
    return selectors.command_view(command)


@transaction.atomic
def command_retry(
    *, user: HubCaller, command_id: int, author: str | None = None, default_author: str = "api"
) -> BatchCreated:
    """HUB-9: run a done, failed or cancelled command again, in a new batch (with its refresh).

    A done one too: every command is an idempotent ensure (an ensure_issue adopts the issue it made),
    so re-running it is how a person re-asserts it; the sync agent changes nothing that already holds.
    """
    user = hub_access_check(user)
    author = _author_check(user, author, default_author)
    command = _command_for_user(user=user, command_id=command_id, what="command")
    if command.state in (QUEUED, CLAIMED):
        raise Conflict(
            _("Команда %(id)s ещё не завершена (%(state)s): отмените её или дождитесь.")
            % {"id": command_id, "state": command.state},
            code="command_open",
        )
    payload = dict(command.payload)
    # `$N` of the old batch: substitute the key its command created, if any.
    for field in ("key", "other_key"):
        value = payload.get(field)
        match = REF_RE.match(value) if isinstance(value, str) else None
        if match:
            payload[field] = _created_key(batch_id=command.batch_id, seq=int(match.group(1)), command_id=command_id)
    if payload["type"] == "refresh" and payload.get("keys"):
        resolved = []
        for key in payload["keys"]:
            match = REF_RE.match(key)
            if match:
                created = (
                    Command.objects.filter(batch_id=command.batch_id, seq=int(match.group(1)))
                    .values_list("created_key", flat=True)
                    .first()
                )
                if created:
                    resolved.append(created)
            else:
                resolved.append(key)
        if not resolved:
            raise Conflict(
                _("Команда %(id)s обновляет только задачи, которые её пакет не создал.") % {"id": command_id},
                code="nothing_to_retry",
            )
        payload["keys"] = resolved
    parsed = commands_parse([payload], base_label=_base_label())
    access.projects_write_check(user=user, projects=access.command_projects(parsed))
    payloads = [command_dump(parsed[0])]
    deps: list[list[int]] = [[]]
    waits = [False]
    touched = _touched_keys(parsed)
    if touched:
        payloads.append({"type": "refresh", "keys": touched})
        deps.append([])
        waits.append(True)
    title = f"повтор команды #{command.id}: {command.batch.title}"[:300]
    batch = _batch_insert(
        user=user, title=title, author=author, payloads=payloads, deps=deps, waits=waits, retry_of=command
    )
    audit.audit_record(
        actor=user,
        action=HUB_COMMAND_RETRIED,
        target=f"hub_command:{command.id}",
        details={
            "batch_id": batch.id,
            "author": author,
            "command_count": len(payloads),
            "owner": selectors.batch_owner_name(command.batch),
        },
    )
    return BatchCreated(
        id=batch.id,
        estimate_seconds=selectors.estimate_seconds(commands=payloads, before_batch_id=batch.id),
        command_count=len(payloads),
    )


def _created_key(*, batch_id: int, seq: int, command_id: int) -> str:
    created = Command.objects.filter(batch_id=batch_id, seq=seq).values_list("created_key", flat=True).first()
    if not created or not REAL_KEY_RE.match(created):
        raise Conflict(
            _("Команда %(id)s ссылается на $%(seq)s, которая не создала задачу: сначала повторите команду %(seq)s.")
            % {"id": command_id, "seq": seq},
            code="dependency_not_created",
        )
    return created


@transaction.atomic
def refresh(
    *,
    user: HubCaller,
    keys: list[str] | None = None,
    full: bool = False,
    author: str | None = None,
    default_author: str = "api",
) -> BatchCreated:
    """HUB-10: a batch of one refresh (keys or full)."""
    user = hub_access_check(user)
    author = _author_check(user, author, default_author)
    raw: dict[str, Any] = {"type": "refresh"}
    if keys:
        raw["keys"] = [k.strip().upper() if isinstance(k, str) else k for k in keys]
    if full:
        raw["full"] = True
    parsed = commands_parse([raw])
    for key in parsed[0].issue_keys():
        if not REAL_KEY_RE.match(key):
            raise ValidationFailed(f"refresh: «{key}» is not an issue key (PROJ-123)")
    access.projects_write_check(user=user, projects=access.command_projects(parsed))
    payloads = [command_dump(parsed[0])]
    title = "полная синхронизация" if full else f"обновить {', '.join(parsed[0].issue_keys())}"[:300]
    batch = _batch_insert(user=user, title=title, author=author, payloads=payloads, deps=[[]], waits=[False])
    _batch_created_audit(user=user, batch=batch, payloads=payloads)
    return BatchCreated(
        id=batch.id,
        estimate_seconds=selectors.estimate_seconds(commands=payloads, before_batch_id=batch.id),
        command_count=1,
    )


# ---------------------------------------------------------------- settings


@transaction.atomic
def settings_set(*, user: HubCaller, key: str, value: Any) -> int:
    """HUB-15: validate and store; bump the one monotonic settings_version and return it (staff only).

    ``project_acl``: the Knowledge Store record of every mirrored issue is put under its project's ACL
    in the new map, in this same transaction (a project left out goes back to ``everyone``); the
    audit event counts the records changed per project (``records_re_acled``). Setting the same map
    again re-applies it, which repairs records written under an older ACL."""
    user = hub_access_check(user, staff=True)
    clean = hub_settings.setting_validate(key=key, value=value)
    re_acled: dict[str, int] | None = None
    if key == access.PROJECT_ACL:
        # Exclusive: a feed's final ACL check (shared) waits for this change to commit.
        knowledge_feed.project_acl_lock(shared=False)
    HubSetting.objects.update_or_create(
        key=key, defaults={"value": clean, "updated_by": user, "updated_at": timezone.now()}
    )
    if key == access.PROJECT_ACL:
        # In this transaction: the setting and the ACL of every record it rules commit together.
        # Every mirrored project, not only those whose entry changed (a project dropped from the map
        # included): records written under an older ACL (before this rule existed, or by a feed that
        # failed half-way) are put right too.
        re_acled = knowledge_feed.project_acl_apply(acl_map=clean, projects=knowledge_feed.mirrored_projects())
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO hub_state (id, settings_version) VALUES (1, 2) ON CONFLICT (id) DO UPDATE "
            "SET settings_version = hub_state.settings_version + 1 RETURNING settings_version"
        )
        settings_version = cursor.fetchone()[0]
    audit.audit_record(
        actor=user,
        action=audit.HUB_SETTING_CHANGED,
        target=f"hub_setting:{key}",
        details={"value": clean, "settings_version": settings_version}
        | ({"records_re_acled": re_acled} if re_acled is not None else {}),
    )
    return settings_version
