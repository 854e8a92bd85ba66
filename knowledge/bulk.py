"""Many records written at once (a connector's batch): the same outcome as ``record_upsert`` and
``record_links_set`` item by item, in a handful of statements.

Per batch: one read of the stored records, one embedding call for every chunk that changed (the
model batches inside), then in one transaction one INSERT of the new records, one UPDATE per
changed record, one DELETE and one INSERT of their chunks, and the links resolved, read and written
in three statements. ``record_upsert`` item by item costs about ten statements and one embedding
call per record; that made the connector bound by round trips (bench/ingest, Confluence sync).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from achilles.errors import ApplicationError, ValidationFailed
from knowledge.chunking import ChunkDraft, chunk_text
from knowledge.models import Chunk, Record
from knowledge.search.embedding import embedding_config
from knowledge.services import (
    _RECORD_URL,
    UpsertOutcome,
    _content_hash,
    _embed,
    acl_also_resolve,
    acl_resolve,
    principal_resolve,
    records_links_set,
)


@dataclass(frozen=True)
class RecordWrite:
    """One record to create or replace (the arguments of ``facade.upsert_record``)."""

    source_system: str
    external_id: str
    title: str
    text: str
    acl: Sequence[str]
    acl_also: Sequence[Sequence[str]] = ()
    url: str = ""
    author_principal_id: str | None = None
    links: Sequence[tuple[str, str]] = ()
    never_hint: bool = False
    user_writable: bool = True


@dataclass
class _Prepared:
    item: RecordWrite
    fields: dict
    drafts: list[ChunkDraft]
    links: list[tuple[str, str]]
    warnings: tuple[str, ...]


def _prepare(item: RecordWrite, model: str | None) -> _Prepared:
    source_system, external_id = (item.source_system or "").strip(), (item.external_id or "").strip()
    title, url = (item.title or "").strip()[:500], (item.url or "").strip()
    if url and not _RECORD_URL.match(url):
        raise ValidationFailed("url must be an http:// or https:// address", code="invalid_url")
    if not source_system or not external_id:
        raise ValidationFailed("source_system and external_id are required", code="invalid_record")
    if not title:
        raise ValidationFailed("title is required", code="invalid_record")
    acl = acl_resolve(item.acl)
    clauses = acl_also_resolve([list(c) for c in item.acl_also], acl)
    warnings: list[str] = []
    author = None
    if item.author_principal_id:
        try:
            author = principal_resolve(item.author_principal_id)
        except ValidationFailed as exc:
            warnings.append(f"author dropped: {exc.detail}")
    drafts = chunk_text(item.text or "", title=title)
    if not drafts:
        raise ValidationFailed("empty document: no text to index", code="empty_document")
    links = sorted((str(to), str(kind)) for to, kind in item.links)
    digest = _content_hash(
        title=title,
        url=url,
        acl=acl,
        author=author,
        drafts=drafts,
        model=model,
        extra=[links, "never_hint"] if item.never_hint else links,
    )
    fields = {
        "source_system": source_system,
        "external_id": external_id,
        "title": title,
        "url": url,
        "acl": acl,
        "acl_also": clauses,
        "author_principal_id": author,
        "origin": f"app:{source_system}",
        "content_hash": digest,
        "embedding_model": model,
        "never_hint": bool(item.never_hint),
        "user_writable": bool(item.user_writable),
    }
    return _Prepared(item, fields, drafts, links, tuple(warnings))


def records_upsert(items: Sequence[RecordWrite]) -> list[UpsertOutcome | ApplicationError]:
    """Create or replace every item (and make its outgoing links exactly ``links``), in one
    transaction; per item its outcome, or the validation error that kept it out (the others are
    written). An error of the database (a constraint, a concurrent writer) rolls the whole batch
    back and is raised: the caller may then write the items one by one."""
    config = embedding_config()
    model = config.name if config else None
    results: list[UpsertOutcome | ApplicationError | None] = [None] * len(items)
    prepared: dict[int, _Prepared] = {}
    for index, item in enumerate(items):
        try:
            prepared[index] = _prepare(item, model)
        except ApplicationError as exc:
            results[index] = exc
    keys = {(p.fields["source_system"], p.fields["external_id"]) for p in prepared.values()}
    existing = _existing(keys)
    todo: list[int] = []  # items whose content changed: embedded and rewritten
    flags: list[int] = []  # same content, other clauses or user_writable: those two columns only
    for index, p in prepared.items():
        stored = existing.get((p.fields["source_system"], p.fields["external_id"]))
        if (
            stored is not None
            and stored.content_hash == p.fields["content_hash"]
            and list(stored.acl) == p.fields["acl"]
        ):
            same = stored.user_writable == p.fields["user_writable"] and stored.acl_also == p.fields["acl_also"]
            results[index] = UpsertOutcome(stored.pk, "unchanged" if same else "updated", len(p.drafts), p.warnings)
            if not same:
                flags.append(index)
        else:
            todo.append(index)
    drafts = [d for index in todo for d in prepared[index].drafts]
    vectors: list[list[float] | None] = list(_embed(config, drafts)) if config and drafts else [None] * len(drafts)
    with transaction.atomic():
        for index in flags:
            stored = existing[(prepared[index].fields["source_system"], prepared[index].fields["external_id"])]
            Record.objects.filter(pk=stored.pk).update(
                user_writable=prepared[index].fields["user_writable"], acl_also=prepared[index].fields["acl_also"]
            )
        ids = _write(prepared, todo, existing)
        chunks: list[Chunk] = []
        cursor = 0
        for index in todo:
            p = prepared[index]
            for d in p.drafts:
                chunks.append(
                    Chunk(
                        record_id=ids[index],
                        ordinal=d.ordinal,
                        heading=d.heading[:1000],
                        text=d.text,
                        embedding=vectors[cursor],
                    )
                )
                cursor += 1
            status = "updated" if (p.fields["source_system"], p.fields["external_id"]) in existing else "created"
            results[index] = UpsertOutcome(ids[index], status, len(p.drafts), p.warnings)
        Chunk.objects.bulk_create(chunks, batch_size=1000)
        record_ids = {
            index: result.record_id for index, result in enumerate(results) if isinstance(result, UpsertOutcome)
        }
        records_links_set({record_ids[i]: (prepared[i].fields["source_system"], prepared[i].links) for i in record_ids})
    return [r for r in results if r is not None]


def _existing(keys: set[tuple[str, str]]) -> dict[tuple[str, str], Record]:
    if not keys:
        return {}
    match = Q()
    for system in {s for s, _ in keys}:
        match |= Q(source_system=system, external_id__in=[e for s, e in keys if s == system])
    rows = Record.objects.filter(match).only(
        "id", "source_system", "external_id", "content_hash", "acl", "acl_also", "user_writable"
    )
    return {(r.source_system, r.external_id): r for r in rows}


def _write(prepared: dict[int, _Prepared], todo: list[int], existing: dict[tuple[str, str], Record]) -> dict[int, int]:
    """Insert the new records, replace the changed ones (their chunks deleted); index → record id."""
    ids: dict[int, int] = {}
    new = [i for i in todo if (prepared[i].fields["source_system"], prepared[i].fields["external_id"]) not in existing]
    changed = [i for i in todo if i not in set(new)]
    if changed:
        pks = [existing[(prepared[i].fields["source_system"], prepared[i].fields["external_id"])].pk for i in changed]
        locked = {r.pk: r for r in Record.objects.select_for_update().filter(pk__in=pks)}
        now = timezone.now()
        for index, pk in zip(changed, pks, strict=True):
            record = locked.get(pk)
            if record is None:  # deleted since it was read: written as new
                new.append(index)
                continue
            for name, value in prepared[index].fields.items():
                setattr(record, name, value)
            record.content_changed_at = now
            record.save()
            ids[index] = pk
        Chunk.objects.filter(record_id__in=[ids[i] for i in changed if i in ids]).delete()
    if new:
        created = Record.objects.bulk_create([Record(**prepared[i].fields) for i in new])
        ids.update({index: record.pk for index, record in zip(new, created, strict=True)})
    return ids
