"""Every write of the Knowledge Store: records (upsert/delete/prune), links, access signals, trust.

Callers (the ingest command, the REST API, the admin, Celery tasks) parse input and call these;
they never save a model themselves.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import timedelta

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.db.models import Count, Q
from django.utils import timezone

from achilles import audit
from achilles.errors import NotFound, PermissionDenied, ServiceUnavailable, ValidationFailed
from achilles.models import User
from knowledge.chunking import HEADING_SEPARATOR, ChunkDraft, chunk_text
from knowledge.contracts import ACCESS_KINDS, AccessKind, Identity, SearchResult
from knowledge.documents import DocumentError, validate_principal
from knowledge.models import EMBEDDING_DIM, RECORD_URL_PATTERN, Chunk, PendingLink, Record, RecordLink
from knowledge.search.embedding import EmbeddingConfig, embedding_config
from knowledge.search.hybrid import search
from knowledge.selectors import principals_of

logger = logging.getLogger(__name__)

_USER_ID = re.compile(r"^user:\d+$")
_RECORD_URL = re.compile(RECORD_URL_PATTERN, re.IGNORECASE)
TRUST_HALF_LIFE_DAYS = 180
TRUST_FLOOR = 0.1


@dataclass(frozen=True)
class UpsertOutcome:
    """What ``record_upsert`` did: ``created`` | ``updated`` | ``unchanged``."""

    record_id: int
    status: str
    chunks: int
    warnings: tuple[str, ...] = field(default_factory=tuple)


# --------------------------------------------------------------------------- principals


def principal_resolve(value: str) -> str:
    """Canonical principal: ``user:<username>`` → ``user:<id>``; unknown user → ValidationFailed."""
    try:
        value = validate_principal(value)
    except DocumentError as exc:
        raise ValidationFailed(str(exc), code="invalid_principal") from exc
    if value.startswith("user:") and not _USER_ID.match(value):
        user_id = User.objects.filter(username=value[5:]).values_list("pk", flat=True).first()
        if user_id is None:
            raise ValidationFailed(f"no user named «{value[5:]}» for principal {value}", code="unknown_principal")
        return f"user:{user_id}"
    return value


def acl_resolve(values: Iterable[str], *, resolve: Callable[[str], str] = principal_resolve) -> list[str]:
    if isinstance(values, str):
        raise ValidationFailed(
            "acl must be a list of principals, not one string", code="invalid_principal", field="acl"
        )
    acl = sorted({resolve(value) for value in values})
    if not acl:
        raise ValidationFailed("acl must name at least one principal", code="empty_acl", field="acl")
    return acl


Clauses = list[list[str]] | None


def acl_also_resolve(
    clauses: Iterable[Iterable[str]], acl: Sequence[str], *, resolve: Callable[[str], str] = principal_resolve
) -> Clauses:
    """The canonical form of ``acl_also`` (further any-of lists a reader must each match) beside the
    resolved ``acl``: each clause resolved, sorted and deduplicated; a clause every reader of ``acl``
    meets anyway (it holds all of ``acl``) or one a stricter clause implies (a superset of another)
    is dropped; ``None`` when no clause is left (the database's one «no clause»). An empty clause →
    ``empty_acl``; a bad principal → ``invalid_principal``."""
    if isinstance(clauses, str):
        raise ValidationFailed(
            "acl_also must be a list of lists of principals", code="invalid_principal", field="acl_also"
        )
    resolved: set[tuple[str, ...]] = set()
    for clause in clauses:
        try:
            resolved.add(tuple(acl_resolve(clause, resolve=resolve)))
        except ValidationFailed as exc:
            raise ValidationFailed(f"acl_also: {exc.message}", code=exc.code, field="acl_also") from exc
        except TypeError as exc:
            raise ValidationFailed(
                "acl_also must be a list of lists of principals", code="invalid_principal", field="acl_also"
            ) from exc
    wide = set(acl)
    kept = [
        clause
        for clause in resolved
        if not wide <= set(clause) and not any(other != clause and set(other) < set(clause) for other in resolved)
    ]
    return [list(clause) for clause in sorted(kept)] or None


# --------------------------------------------------------------------------- records


def _content_hash(
    *,
    title: str,
    url: str,
    acl: Sequence[str],
    author: str | None,
    drafts: Sequence[ChunkDraft],
    model: str | None,
    extra: object = None,
) -> str:
    payload = json.dumps(
        [title, url, list(acl), author, [(d.heading, d.text) for d in drafts], model, extra],
        ensure_ascii=False,
        sort_keys=True,
    )
    return hashlib.sha256(payload.encode()).hexdigest()


def _embed(config: EmbeddingConfig, drafts: Sequence[ChunkDraft | Chunk]) -> list[list[float]]:
    texts = [f"{d.heading}{HEADING_SEPARATOR}{d.text}" if d.heading else d.text for d in drafts]
    try:
        vectors = config.provider.embed(texts)
    except Exception as exc:
        raise ServiceUnavailable(f"embedding with {config.name} failed: {exc}", code="embedding_failed") from exc
    if len(vectors) != len(texts) or any(len(v) != EMBEDDING_DIM for v in vectors):
        raise ServiceUnavailable(
            f"embedding model {config.name} must return {EMBEDDING_DIM}-dimensional vectors (set options.dimensions)",
            code="embedding_failed",
        )
    return vectors


@dataclass(frozen=True)
class ReembedReport:
    model: str
    records: int
    chunks: int


def chunks_reembed(
    *,
    everything: bool = False,
    batch: int = 32,
    on_total: Callable[[int], None] | None = None,
    on_progress: Callable[[int], None] | None = None,
) -> ReembedReport:
    """Embed again the chunks of the records not embedded with the default embedding model (all
    with ``everything``), record by record, each in its own transaction (a stopped run resumes).

    The record's content hash still names its former model, so the next ingest of an unchanged
    document rewrites it once (same text, same vectors)."""
    config = embedding_config()
    if config is None:
        raise ValueError("no default embedding model")
    records = Record.objects.annotate(n=Count("chunks"))
    if not everything:
        records = records.filter(Q(embedding_model__isnull=True) | ~Q(embedding_model=config.name))
    todo = list(records.values_list("id", "n"))
    if on_total:
        on_total(sum(n for _, n in todo))
    done_records = done_chunks = 0
    for record_id, _ in todo:
        chunks = list(Chunk.objects.filter(record_id=record_id).order_by("ordinal"))
        vectors: list[list[float]] = []
        for start in range(0, len(chunks), max(1, batch)):
            part = chunks[start : start + max(1, batch)]
            vectors += _embed(config, part)
            if on_progress:
                on_progress(len(part))
        with transaction.atomic():
            for chunk, vector in zip(chunks, vectors, strict=True):
                chunk.embedding = vector
            Chunk.objects.bulk_update(chunks, ["embedding"])
            Record.objects.filter(pk=record_id).update(embedding_model=config.name)
        done_records += 1
        done_chunks += len(chunks)
    return ReembedReport(model=config.name, records=done_records, chunks=done_chunks)


def record_upsert(
    *,
    source_system: str,
    external_id: str,
    title: str,
    text: str,
    acl: Sequence[str],
    acl_also: Iterable[Iterable[str]] = (),
    url: str = "",
    author_principal_id: str | None = None,
    origin: str = "api",
    links_fingerprint: object = None,
    never_hint: bool = False,
    user_writable: bool = True,
) -> UpsertOutcome:
    """Create or replace the record ``(source_system, external_id)`` and its chunks.

    ``user_writable``: people other than admins can write this content, so it never counts as
    evidence for a withheld hint (``knowledge.search.withheld``); only curated writers pass False.
    Idempotent: the same content (and embedding model) is ``unchanged`` and writes nothing; the
    same content with only ``user_writable`` changed updates that flag alone.
    Embedding happens before the transaction, so a slow provider holds no row locks.
    """
    source_system = (source_system or "").strip()
    external_id = (external_id or "").strip()
    title = (title or "").strip()[:500]
    url = (url or "").strip()
    if url and not _RECORD_URL.match(url):
        raise ValidationFailed("url must be an http:// or https:// address", code="invalid_url", field="url")
    if not source_system or not external_id:
        raise ValidationFailed("source_system and external_id are required", code="invalid_record")
    if not title:
        raise ValidationFailed("title is required", code="invalid_record", field="title")
    acl = acl_resolve(acl)
    clauses = acl_also_resolve(acl_also, acl)
    warnings: list[str] = []
    author = None
    if author_principal_id:
        try:
            author = principal_resolve(author_principal_id)
        except ValidationFailed as exc:
            warnings.append(f"author dropped: {exc.detail}")
    drafts = chunk_text(text or "", title=title)
    if not drafts:
        raise ValidationFailed("empty document: no text to index", code="empty_document")
    config = embedding_config()
    model = config.name if config else None
    # (never_hint joins the hash only when set, so the hashes of existing records stay as they were)
    digest = _content_hash(
        title=title,
        url=url or "",
        acl=acl,
        author=author,
        drafts=drafts,
        model=model,
        extra=[links_fingerprint, "never_hint"] if never_hint else links_fingerprint,
    )
    existing = (
        Record.objects.filter(source_system=source_system, external_id=external_id)
        .only("id", "content_hash", "acl", "acl_also", "user_writable")
        .first()
    )
    # (the ACL is compared too: ``records_acl_set`` changes it without rehashing the content; the
    # clauses are not in the hash: changed alone, they are written without embedding again)
    if existing is not None and existing.content_hash == digest and list(existing.acl) == acl:
        if existing.user_writable == bool(user_writable) and existing.acl_also == clauses:
            return UpsertOutcome(existing.pk, "unchanged", len(drafts), tuple(warnings))
        # the chunks and the generation follow by trigger
        Record.objects.filter(pk=existing.pk).update(user_writable=bool(user_writable), acl_also=clauses)
        return UpsertOutcome(existing.pk, "updated", len(drafts), tuple(warnings))
    vectors: list[list[float] | None] = list(_embed(config, drafts)) if config else [None] * len(drafts)
    fields = {
        "title": title,
        "url": url or "",
        "acl": acl,
        "acl_also": clauses,
        "author_principal_id": author,
        "origin": origin,
        "content_hash": digest,
        "embedding_model": model,
        "never_hint": bool(never_hint),
        "user_writable": bool(user_writable),
    }
    with transaction.atomic():
        record = Record.objects.select_for_update().filter(source_system=source_system, external_id=external_id).first()
        status = "updated"
        if record is None:
            try:
                with transaction.atomic():
                    record = Record.objects.create(source_system=source_system, external_id=external_id, **fields)
                status = "created"
            except IntegrityError:  # a concurrent upsert created it first: replace theirs
                record = Record.objects.select_for_update().get(source_system=source_system, external_id=external_id)
        if status == "updated":
            for name, value in fields.items():
                setattr(record, name, value)
            record.content_changed_at = timezone.now()
            record.save()
            Chunk.objects.filter(record=record).delete()
        Chunk.objects.bulk_create(
            [
                Chunk(record=record, ordinal=d.ordinal, heading=d.heading[:1000], text=d.text, embedding=v)
                for d, v in zip(drafts, vectors, strict=True)
            ]
        )
    return UpsertOutcome(record.pk, status, len(drafts), tuple(warnings))


def record_acl_set(*, record_id: int, acl: Sequence[str]) -> list[str]:
    """Replace a record's ACL (the admin's one edit); the chunks follow by trigger."""
    resolved = acl_resolve(acl)
    if not Record.objects.filter(pk=record_id).update(acl=resolved):
        raise NotFound("record not found", code="record_not_found")
    return resolved


def records_acl_set(*, source_system: str, external_ids: Sequence[str], acl: Sequence[str]) -> int:
    """Give every record of ``source_system`` among ``external_ids`` the ACL ``acl`` (another app's
    bulk re-ACL, e.g. the hub's project ACL); returns how many records changed.

    One UPDATE in the caller's transaction: the chunks follow by trigger (``knowledge_chunks.acl``
    is a copy of the record's) and so does the content generation, so no cache serves the old ACL.
    Records already under ``acl`` are not touched, and nothing at all is written when none differs
    (the generation triggers fire per statement, even for zero rows). A record's clauses
    (``acl_also``) are kept: this call never widens who passes them (``records_access_set`` sets
    both)."""
    resolved = acl_resolve(acl)
    ids = sorted({str(external_id) for external_id in external_ids})
    if not ids:
        return 0
    stale = Record.objects.filter(source_system=source_system, external_id__in=ids).exclude(acl=resolved)
    if not stale.exists():
        return 0
    return stale.update(acl=resolved)


def records_access_set(
    *, source_system: str, access: Mapping[str, tuple[Iterable[str], Iterable[Iterable[str]]]]
) -> int:
    """Give each record of ``source_system`` named in ``access`` (external id → ``(acl, acl_also)``)
    exactly that access; returns how many records changed. A permission sync's one write.

    Everything is resolved and checked first (a bad principal or an empty list → 422, nothing
    written); then one UPDATE in the caller's transaction touches only the records whose canonical
    access differs. The chunks follow by trigger, nothing is embedded again, and the content
    generation moves (by trigger) only when a record changed. Ids without a record are skipped."""
    resolved_users: dict[str, str] = {}

    def resolve(value: str) -> str:
        if value not in resolved_users:
            resolved_users[value] = principal_resolve(value)
        return resolved_users[value]

    wanted: dict[str, tuple[list[str], Clauses]] = {}
    for external_id, pair in access.items():
        try:
            acl_values, clause_values = pair
        except (TypeError, ValueError) as exc:
            raise ValidationFailed(
                f"access of {external_id}: give (acl, acl_also)", code="invalid_access", field="access"
            ) from exc
        acl = acl_resolve(acl_values, resolve=resolve)
        wanted[str(external_id)] = (acl, acl_also_resolve(clause_values, acl, resolve=resolve))
    if not wanted:
        return 0
    changes = [
        {"id": pk, "acl": wanted[external_id][0], "acl_also": wanted[external_id][1]}
        for pk, external_id, acl, clauses in Record.objects.filter(
            source_system=source_system, external_id__in=list(wanted)
        ).values_list("pk", "external_id", "acl", "acl_also")
        if (list(acl), clauses) != wanted[external_id]
    ]
    if not changes:
        return 0
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE knowledge_records r SET acl = ARRAY(SELECT jsonb_array_elements_text(v.acl)), "
            "acl_also = CASE WHEN jsonb_typeof(v.acl_also) = 'array' THEN v.acl_also END "
            "FROM jsonb_to_recordset(%s::jsonb) AS v(id bigint, acl jsonb, acl_also jsonb) WHERE r.id = v.id",
            [json.dumps(changes)],
        )
        return cursor.rowcount


def record_never_hint_set(*, record_id: int, never_hint: bool) -> None:
    """Per-record opt-out of withheld hints (the record is never mentioned in one)."""
    if not Record.objects.filter(pk=record_id).update(never_hint=bool(never_hint)):
        raise NotFound("record not found", code="record_not_found")


def record_delete(*, source_system: str, external_id: str) -> None:
    """Delete a record; chunks, links and signals go with it (ON DELETE CASCADE in the DB)."""
    deleted, _ = Record.objects.filter(source_system=source_system, external_id=external_id).delete()
    if not deleted:
        raise NotFound("record not found", code="record_not_found")


def records_prune(*, origin: str, keep: set[tuple[str, str]]) -> int:
    """Delete records written by ``origin`` whose (source_system, external_id) is not in ``keep``."""
    stale = [
        pk
        for pk, system, ext in Record.objects.filter(origin=origin).values_list("pk", "source_system", "external_id")
        if (system, ext) not in keep
    ]
    if stale:
        Record.objects.filter(pk__in=stale).delete()
    return len(stale)


def record_links_set(*, record_id: int, source_system: str, links: Sequence[tuple[str, str]]) -> list[str]:
    """Make the record's outgoing links exactly ``links`` [(to external id, type)]. Targets not
    stored yet are kept pending (``PendingLink``) and become links when they are stored; returns them."""
    return records_links_set({record_id: (source_system, links)})[record_id]


def records_links_set(wanted_by_record: Mapping[int, tuple[str, Iterable[tuple[str, str]]]]) -> dict[int, list[str]]:
    """Each record's outgoing links become exactly its pairs [(to external id, type)], its targets
    resolved in its own source system; per record, the targets not stored yet (kept pending)."""
    wanted_by_record = {pk: (system, sorted(set(links))) for pk, (system, links) in wanted_by_record.items()}
    if not wanted_by_record:
        return {}
    by_system: dict[str, set[str]] = {}
    for system, links in wanted_by_record.values():
        by_system.setdefault(system, set()).update(to for to, _ in links)
    match = Q(pk__in=[])
    for system, external_ids in by_system.items():
        if external_ids:
            match |= Q(source_system=system, external_id__in=external_ids)
    targets = {
        (system, ext): pk
        for pk, system, ext in Record.objects.filter(match).values_list("pk", "source_system", "external_id")
    }
    wanted: set[tuple[int, int, str]] = set()
    pending: set[tuple[int, str, str, str]] = set()
    unresolved: dict[int, list[str]] = {pk: [] for pk in wanted_by_record}
    for record_id, (system, links) in wanted_by_record.items():
        for to, kind in links:
            target = targets.get((system, to))
            if target is None:
                pending.add((record_id, system, to, kind))
                unresolved[record_id].append(to)
            elif target != record_id:
                wanted.add((record_id, target, kind))
    with transaction.atomic():
        current = set(
            RecordLink.objects.filter(from_record_id__in=list(wanted_by_record)).values_list(
                "from_record_id", "to_record_id", "link_type"
            )
        )
        if stale := current - wanted:
            gone = Q(pk__in=[])
            for from_id, to_id, kind in stale:
                gone |= Q(from_record_id=from_id, to_record_id=to_id, link_type=kind)
            RecordLink.objects.filter(gone).delete()
        RecordLink.objects.bulk_create(
            [RecordLink(from_record_id=f, to_record_id=t, link_type=k) for f, t, k in wanted - current],
            ignore_conflicts=True,
        )
        held = set(
            PendingLink.objects.filter(from_record_id__in=list(wanted_by_record)).values_list(
                "from_record_id", "to_source_system", "to_external_id", "link_type"
            )
        )
        if stale_pending := held - pending:
            gone = Q(pk__in=[])
            for from_id, system, to, kind in stale_pending:
                gone |= Q(from_record_id=from_id, to_source_system=system, to_external_id=to, link_type=kind)
            PendingLink.objects.filter(gone).delete()
        PendingLink.objects.bulk_create(
            [
                PendingLink(from_record_id=f, to_source_system=system, to_external_id=to, link_type=k)
                for f, system, to, k in pending - held
            ],
            ignore_conflicts=True,
        )
    return unresolved


def record_link_create(*, from_record_id: int, to_record_id: int, link_type: str = "relates") -> RecordLink:
    if from_record_id == to_record_id:
        raise ValidationFailed("a record cannot link to itself", code="invalid_link")
    link, _ = RecordLink.objects.get_or_create(
        from_record_id=from_record_id, to_record_id=to_record_id, link_type=link_type or "relates"
    )
    return link


def record_link_delete(*, link_id: int) -> None:
    """Remove one link between records (the admin's inline); an unknown link is already gone."""
    RecordLink.objects.filter(pk=link_id).delete()


# --------------------------------------------------------------------------- access signals and trust


def access_register(*, record_id: int, identity: Identity, kind: AccessKind, message_id: str | None = None) -> None:
    """Record one use of a record (KS-8). The identity must see the record (else NotFound);
    an ``answer`` signal counts once per message (a repeat is a no-op)."""
    principals = principals_of(identity)
    if kind not in ACCESS_KINDS:
        raise ValidationFailed(f"kind must be one of {', '.join(ACCESS_KINDS)}", code="invalid_access_kind")
    message = str(message_id)[:64] if message_id is not None else None
    principal = f"user:{identity.user_id}" if identity.user_id is not None else None
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            "UPDATE knowledge_records SET last_accessed_at = %s WHERE id = %s AND knowledge_acl_allows(acl, acl_also, %s::text[])",
            [timezone.now(), record_id, principals],
        )
        if cursor.rowcount == 0:
            raise NotFound("record not found", code="record_not_found")
        cursor.execute(
            "INSERT INTO knowledge_access_signals (record_id, kind, principal, message_id) VALUES (%s, %s, %s, %s) "
            "ON CONFLICT DO NOTHING",
            [record_id, kind, principal, message],
        )


TRUST_DECAY_SQL = """
WITH target AS (
    SELECT id, GREATEST(%(floor)s, power(0.5, EXTRACT(EPOCH FROM (%(now)s - GREATEST(content_changed_at,
           COALESCE(last_accessed_at, content_changed_at)))) / 86400.0 / %(half_life)s)) AS trust
    FROM knowledge_records
)
UPDATE knowledge_records r SET trust_score = LEAST(1.0, target.trust)
FROM target
WHERE r.id = target.id AND abs(r.trust_score - LEAST(1.0, target.trust)) > 0.001
"""


def trust_decay(*, half_life_days: float = TRUST_HALF_LIFE_DAYS, floor: float = TRUST_FLOOR) -> int:
    """Recompute trust: halves every ``half_life_days`` without a content change or an access
    signal, never below ``floor``; a fresh access or edit restores it. Returns rows changed."""
    with transaction.atomic(), connection.cursor() as cursor:
        # the application's clock (not the database's), so one notion of «now» rules signals and decay
        cursor.execute(TRUST_DECAY_SQL, {"floor": floor, "half_life": half_life_days, "now": timezone.now()})
        return cursor.rowcount


# --------------------------------------------------------------------------- withheld hints

# A fixed key space for pg_advisory_xact_lock(int, int): one lock per user serialises the rate check.
_HINT_LOCK_SPACE = 0x6B73  # "ks"


def withheld_release(*, query: str, identity: Identity, result: SearchResult) -> SearchResult:
    """The hint policy on a search result: per-user rate, and every hint in the audit trail.

    A user (or, for identities without one, the anonymous bucket) gets withheld coordinates in at
    most ``WITHHELD_HINTS_PER_HOUR`` searches per hour; beyond that the coordinates are left out
    (and the suppression is recorded). The audit event carries the query and the coordinates.
    """
    if not result.withheld:
        return result
    coordinates = [
        {"source_system": w.source_system, "author_principal_id": w.author_principal_id} for w in result.withheld
    ]
    details = {"query": query[:500], "withheld": coordinates}
    limit = settings.WITHHELD_HINTS_PER_HOUR
    # one round trip: lock, count and insert (the lock before the count, so the rate is exact)
    released = audit.audit_record_capped(
        user_id=identity.user_id,
        action=audit.WITHHELD_HINT,
        over_action=audit.WITHHELD_HINT_SUPPRESSED,
        limit=limit,
        since=timezone.now() - timedelta(hours=1),
        target="knowledge.search",
        lock=(_HINT_LOCK_SPACE, (identity.user_id or 0) % 2**31),
        details=details,
        over_details={**details, "limit_per_hour": limit},
    )
    if not released:
        logger.warning("withheld hints over the hourly limit for user %s: left out", identity.user_id)
        return replace(result, withheld=())
    return result


SEARCH_AS_USER_PERMISSION = "knowledge.search_as_user"


def search_as_user(*, actor: User, user: User | None, query: str, k: int = 8) -> SearchResult:
    """What ``user`` (None: anonymous) would get for ``query``, for an admin's preview.

    Needs the dedicated permission ``knowledge.search_as_user`` (superusers have it) and leaves
    an audit event. The preview shows the withheld coordinates as computed, outside the user's
    hint rate (the previewer is not the user).
    """
    if not actor.has_perm(SEARCH_AS_USER_PERMISSION):
        raise PermissionDenied("searching as another user needs the «search as user» permission")
    identity = Identity.for_user(user) if user is not None else Identity.anonymous()
    result = search(query, identity, k)
    audit.audit_record(
        actor=actor,
        action=audit.SEARCH_AS_USER,
        target=f"user:{user.pk}" if user is not None else "anonymous",
        details={"query": query[:500], "k": k, "candidates": len(result.candidates), "withheld": len(result.withheld)},
    )
    return result
