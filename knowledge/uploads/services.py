"""Every write of uploaded documents: upload (with the ACL rules), parse (the task body), delete,
re-send of lost parse tasks."""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from urllib.parse import quote

from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.contrib.auth.models import Group
from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone
from django.utils.translation import gettext as _

import knowledge.tasks
from achilles.errors import ApplicationError, NotFound, PermissionDenied, ServiceUnavailable, ValidationFailed
from achilles.health import heartbeat_members, worker_known_dead
from achilles.identity import principals_for
from achilles.models import User
from knowledge import services
from knowledge.choices import DocumentState
from knowledge.models import Document, Record
from knowledge.parsers import NeedsOcr, ParsedDocument, ParseError, format_of, parse_file
from knowledge.parsers.ocr import ocr_available, ocr_pdf
from knowledge.uploads.selectors import document_get_for_user

logger = logging.getLogger(__name__)

SOURCE_SYSTEM = "uploads"
ORIGIN = "upload"
UPLOAD_PERMISSION = "knowledge.add_document"
ONLY_ME = "me"  # the ACL shorthand for «only me» (user:<uploader's id>)
MAX_FILENAME = 255
# A parse that never finished this often (the worker died, the hard time limit struck) fails the
# document instead of being sent again for ever.
MAX_PARSE_ATTEMPTS = 3


@dataclass(frozen=True)
class UploadFile:
    """One file of an upload request: its name, size and a reader (called only for a file that is
    accepted, so an oversized one is never read into memory)."""

    filename: str
    size: int
    read: Callable[[], bytes]

    @classmethod
    def of(cls, filename: str, data: bytes) -> UploadFile:
        return cls(filename=filename, size=len(data), read=lambda: data)


@dataclass(frozen=True)
class UploadRejection:
    """A file refused at upload (never stored): why, per file."""

    filename: str
    code: str
    detail: str


@dataclass(frozen=True)
class UploadOutcome:
    documents: list[Document]
    rejected: list[UploadRejection] = field(default_factory=list)


def max_upload_bytes() -> int:
    return int(settings.KNOWLEDGE_UPLOAD_MAX_MB) * 2**20


def can_upload(user: User) -> bool:
    """Admins and staff, or anyone granted ``knowledge.add_document`` (directly or by a group)."""
    return bool(user.is_active and (user.is_staff or user.has_perm(UPLOAD_PERMISSION)))


def document_acl_resolve(*, user: User, acl: Sequence[str]) -> list[str]:
    """The ACL an uploader asked for, checked: ``me`` / ``user:<self>``, ``everyone`` and the groups
    the uploader is in. Granting a group one is not in (or another user, or ``public``) would let
    anyone with the upload right publish to any audience, so only staff may; an unknown group or
    user is 422 for everyone. Empty → only me."""
    values = [value.strip() for value in acl if value and value.strip()] or [ONLY_ME]
    resolved: set[str] = set()
    for value in values:
        if "\x00" in value:
            raise ValidationFailed("a principal must not contain NUL", code="invalid_principal", field="acl")
        principal = f"user:{user.pk}" if value == ONLY_ME else services.principal_resolve(value)
        if principal.startswith("group:") and not Group.objects.filter(name=principal[6:]).exists():
            raise ValidationFailed(f"no group named «{principal[6:]}»", code="unknown_principal", field="acl")
        user_id = int(principal[5:]) if principal.startswith("user:") else None
        if user_id is not None and (user_id >= 2**63 or not User.objects.filter(pk=user_id).exists()):
            raise ValidationFailed(f"no user with id {principal[5:]}", code="unknown_principal", field="acl")
        resolved.add(principal)
    if not user.is_staff:
        held = set(principals_for(user)) - {"public"}
        foreign = sorted(resolved - held)
        if foreign:
            raise PermissionDenied(
                f"you may share a document only with yourself, everyone or your own groups (not {', '.join(foreign)})",
                code="acl_not_allowed",
            )
    return sorted(resolved)


def _clean_filename(name: str) -> str:
    # a browser may send a path (old IE) or control characters: keep the last component, printable
    name = (name or "").replace("\\", "/").rsplit("/", 1)[-1]
    name = "".join(ch for ch in name if ch.isprintable()).strip()
    if len(name) > MAX_FILENAME:
        stem, dot, suffix = name.rpartition(".")
        name = (
            (stem[: MAX_FILENAME - len(suffix) - 1] + dot + suffix) if dot and len(suffix) < 16 else name[:MAX_FILENAME]
        )
    return name


class _Rejected(Exception):
    def __init__(self, rejection: UploadRejection):
        super().__init__(rejection.detail)
        self.rejection = rejection


def _accept(upload: UploadFile) -> tuple[str, str, bytes]:
    """``(clean name, format, bytes)`` of an acceptable file; otherwise ``_Rejected`` with why."""
    name = _clean_filename(upload.filename)
    limit = max_upload_bytes()
    try:
        if not name:
            raise ParseError("the file has no name", code="invalid_filename")
        fmt = format_of(name)
        if upload.size > limit:
            raise ParseError(
                f"the file is {upload.size / 2**20:.1f} MB, over the limit of {settings.KNOWLEDGE_UPLOAD_MAX_MB} MB",
                code="too_large",
            )
        data = upload.read() if upload.size else b""
        if not data:
            raise ParseError("the file is empty", code="empty_document")
        if len(data) > limit:
            raise ParseError(f"the file is over the limit of {settings.KNOWLEDGE_UPLOAD_MAX_MB} MB", code="too_large")
    except ParseError as exc:
        raise _Rejected(UploadRejection(filename=name or "(unnamed)", code=exc.code, detail=str(exc))) from exc
    return name, fmt, data


def documents_upload(*, owner: User, files: Sequence[UploadFile], acl: Sequence[str]) -> UploadOutcome:
    """Store each acceptable file as a ``queued`` document under ``acl`` and send its parse task
    after commit. A file with an unsupported extension, empty or over the size limit is rejected on
    its own (the others go on); no acceptable file at all → 422 with every reason."""
    if not can_upload(owner):
        raise PermissionDenied(
            _("Чтобы загружать документы, нужно право «добавление документа»."), code="permission_denied"
        )
    if not files:
        raise ValidationFailed(
            _("В загрузке нет файла (пришлите одну или несколько частей `files`)."), code="no_files", field="files"
        )
    if len(files) > settings.KNOWLEDGE_UPLOAD_MAX_FILES:
        raise ValidationFailed(
            _("Не больше %(n)s файлов за одну загрузку.") % {"n": settings.KNOWLEDGE_UPLOAD_MAX_FILES},
            code="too_many_files",
            field="files",
        )
    resolved_acl = document_acl_resolve(user=owner, acl=acl)
    accepted: list[tuple[str, str, bytes]] = []
    rejected: list[UploadRejection] = []
    for upload in files:
        try:
            accepted.append(_accept(upload))
        except _Rejected as exc:
            rejected.append(exc.rejection)
    if not accepted:
        reasons = "; ".join(f"{r.filename}: {r.detail}" for r in rejected)
        raise ValidationFailed(f"no file could be accepted ({reasons})", code="upload_rejected", field="files")
    with transaction.atomic():
        documents = Document.objects.bulk_create(
            [
                Document(
                    owner=owner,
                    filename=name,
                    format=fmt,
                    size=len(data),
                    sha256=hashlib.sha256(data).hexdigest(),
                    content=data,
                    acl=resolved_acl,
                    state=DocumentState.QUEUED,
                )
                for name, fmt, data in accepted
            ]
        )
        ids = [document.pk for document in documents]
        transaction.on_commit(lambda: _send_parse_tasks(ids))
    return UploadOutcome(documents=documents, rejected=rejected)


def _send_parse_tasks(document_ids: Sequence[int]) -> None:
    for document_id in document_ids:
        try:
            knowledge.tasks.document_parse_task.delay(document_id)
        except Exception:  # the broker away: the re-send job (documents_requeue_stale) sends it later
            logger.warning("parse task of document %s not sent; the re-send job will", document_id, exc_info=True)


def _finish(document_id: int, version: Mapping[str, object] | None = None, **fields: object) -> bool:
    """Set the outcome on the document unless it was deleted (or its file replaced: ``version``)
    meanwhile (False then). A document that did not become indexed keeps no record: the previous
    version's, left by a replace, goes now."""
    fields.setdefault("parsed_at", timezone.now())
    with transaction.atomic():
        settled = bool(Document.objects.filter(pk=document_id, **(version or {})).update(**fields))
        if settled and fields.get("state") != DocumentState.INDEXED:
            Record.objects.filter(source_system=SOURCE_SYSTEM, external_id=str(document_id)).delete()
    return settled


def _parse_with_ocr(data: bytes, *, filename: str) -> ParsedDocument:
    """The file's text; a scanned PDF OCR'd when Tesseract is installed (else NeedsOcr)."""
    try:
        return parse_file(data, filename=filename, max_bytes=max_upload_bytes())
    except NeedsOcr:
        if not (settings.KNOWLEDGE_OCR and ocr_available()):
            raise
    return ocr_pdf(data, languages=settings.KNOWLEDGE_OCR_LANGUAGES, max_pages=settings.KNOWLEDGE_OCR_MAX_PAGES)


def document_parse(*, document_id: int) -> str:
    """The parse task's body: parse, upsert the record, settle the state; returns the new state.

    Safe to run twice (a re-delivered task, two deliveries at once): a document already settled is
    left alone, and the record is an upsert keyed by the document, so it is never doubled. A
    document deleted while it was parsed takes the record it just got with it."""
    with transaction.atomic():
        document = Document.objects.select_for_update().defer("content").filter(pk=document_id).first()
        if document is None:
            return "gone"
        if document.state not in (DocumentState.QUEUED, DocumentState.PARSING):
            return str(document.state)
        if document.attempts >= MAX_PARSE_ATTEMPTS:
            _finish(
                document_id,
                state=DocumentState.FAILED,
                error=f"parsing did not finish in {MAX_PARSE_ATTEMPTS} attempts (the file is too large or too complex)",
                error_code="parse_unfinished",
            )
            return DocumentState.FAILED
        Document.objects.filter(pk=document_id).update(state=DocumentState.PARSING, attempts=F("attempts") + 1)
    row = Document.objects.filter(pk=document_id).values_list("content", "sha256", "filename", "acl").first()
    if row is None:
        return "gone"
    data, filename, acl = bytes(row[0]), row[2], list(row[3])
    # the file and readers parsed: a replace meanwhile makes this outcome stale (not written)
    version_of = {"sha256": row[1], "acl": acl}
    try:
        parsed = _parse_with_ocr(data, filename=filename)
    except NeedsOcr as exc:
        _finish(document_id, version_of, state=DocumentState.NEEDS_OCR, error=str(exc), error_code=exc.code)
        return DocumentState.NEEDS_OCR
    except ParseError as exc:
        if isinstance(exc.__cause__, SoftTimeLimitExceeded):
            limit = settings.CELERY_TASK_SOFT_TIME_LIMIT
            exc = ParseError(
                f"parsing took longer than {limit} s (the file is too large or too complex)", code="too_slow"
            )
        _finish(
            document_id, version_of, state=DocumentState.FAILED, error=str(exc)[:2000] or exc.code, error_code=exc.code
        )
        return DocumentState.FAILED
    except SoftTimeLimitExceeded:
        limit = settings.CELERY_TASK_SOFT_TIME_LIMIT
        _finish(
            document_id,
            version_of,
            state=DocumentState.FAILED,
            error=f"parsing took longer than {limit} s (the file is too large or too complex)",
            error_code="too_slow",
        )
        return DocumentState.FAILED
    try:
        outcome = services.record_upsert(
            source_system=SOURCE_SYSTEM,
            external_id=str(document_id),
            title=parsed.title or filename,
            text=parsed.text,
            acl=acl,
            url=document.download_url,
            author_principal_id=f"user:{document.owner_id}",
            origin=ORIGIN,
            user_writable=True,  # written by people, not curated (README § Withheld policy)
        )
    except ServiceUnavailable:
        # the embedding provider is away: back to the queue, the task retries later
        Document.objects.filter(pk=document_id, state=DocumentState.PARSING).update(state=DocumentState.QUEUED)
        raise
    except ApplicationError as exc:
        _finish(
            document_id,
            version_of,
            state=DocumentState.FAILED,
            error=str(exc.message)[:2000] or exc.code,
            error_code=exc.code,
        )
        return DocumentState.FAILED
    with transaction.atomic():
        settled = _finish(
            document_id,
            version_of,
            state=DocumentState.INDEXED,
            record_id=outcome.record_id,
            title=(parsed.title or filename)[:500],
            chunks=outcome.chunks,
            error="",
            error_code="",
        )
        if not settled:
            if not Document.objects.filter(pk=document_id).exists():  # deleted while parsing: its record goes too
                Record.objects.filter(pk=outcome.record_id).delete()
                return "gone"
            return "stale"  # replaced while parsing: the new file's parse task writes the record
    return DocumentState.INDEXED


def document_replace(*, actor: User, document_id: int, file: UploadFile, acl: Sequence[str] | None = None) -> Document:
    """Replace a document's file (its owner or staff; others 404): the same document and, once the
    new file is indexed, the same record (its chunks are the new file's, so citations point to the
    new version). It is ``queued`` again meanwhile; until then search still answers from the old
    version, and a new file that fails to parse takes the old version's record away with it. A file
    refused at upload (unsupported, empty, oversized) is a 422 and changes nothing. ``acl`` None
    keeps the document's readers."""
    document = document_get_for_user(user=actor, document_id=document_id)
    if not can_upload(actor):
        raise PermissionDenied(
            _("Чтобы заменять документы, нужно право «добавление документа»."), code="permission_denied"
        )
    try:
        name, fmt, data = _accept(file)
    except _Rejected as exc:
        raise ValidationFailed(
            f"{exc.rejection.filename}: {exc.rejection.detail}", code=exc.rejection.code, field="file"
        ) from exc
    resolved_acl = document.acl if acl is None else document_acl_resolve(user=actor, acl=acl)
    with transaction.atomic():
        updated = Document.objects.filter(pk=document.pk).update(
            filename=name,
            format=fmt,
            size=len(data),
            sha256=hashlib.sha256(data).hexdigest(),
            content=data,
            acl=resolved_acl,
            state=DocumentState.QUEUED,
            error="",
            error_code="",
            attempts=0,
            record=None,  # the record stays in the store until the new version replaces it
            chunks=0,
            parsed_at=None,
        )
        if not updated:
            raise NotFound(_("Документ не найден."), code="document_not_found")
        transaction.on_commit(lambda: _send_parse_tasks([document.pk]))
    return Document.objects.defer("content").get(pk=document.pk)


def document_delete(*, actor: User, document_id: int) -> None:
    """Delete a document (its owner or staff; others 404) and the record it became."""
    document = document_get_for_user(user=actor, document_id=document_id)
    with transaction.atomic():
        Record.objects.filter(source_system=SOURCE_SYSTEM, external_id=str(document.pk)).delete()
        Document.objects.filter(pk=document.pk).delete()  # (the record's delete cascades here too)


def documents_requeue_stale(*, queued_for: timedelta = timedelta(minutes=2)) -> int:
    """Send again the parse task of documents queued longer than ``queued_for`` (a lost send) or
    parsing longer than the task's hard time limit (a worker that died mid-parse)."""
    now = timezone.now()
    parsing_for = timedelta(seconds=int(settings.CELERY_TASK_TIME_LIMIT) + 60)
    stale = list(
        Document.objects.filter(
            Q(state=DocumentState.QUEUED, updated_at__lt=now - queued_for)
            | Q(state=DocumentState.PARSING, updated_at__lt=now - parsing_for)
        ).values_list("pk", flat=True)[:500]
    )
    if stale:
        Document.objects.filter(pk__in=stale).update(state=DocumentState.QUEUED)  # updated_at moves (trigger)
        _send_parse_tasks(stale)
    return len(stale)


def documents_requeue_orphaned(*, starting_worker: str) -> int | None:
    """An ingest worker starting: if no other ingest worker may be alive (each one's heartbeat gone
    or known stale, ``achilles.health.worker_known_dead``), every ``parsing`` document was left by a
    dead one (``kill -9``, a lost machine) and is queued and sent again; returns how many. None when
    another ingest worker may still be parsing (the task asks again a little later; beyond that the
    periodic ``documents_requeue_stale`` catches it after the hard time limit).

    Safe against the original message coming back too (``acks_late``: Redis re-delivers it after
    the visibility timeout): ``document_parse`` leaves a settled document alone and the record is an
    upsert keyed by the document, so nothing is parsed into two records; ``attempts`` still counts,
    so a file that kills its worker every time fails after ``MAX_PARSE_ATTEMPTS``."""
    others = [m for m in heartbeat_members("ingest_worker") if m != starting_worker]
    if any(not worker_known_dead(member, role="ingest_worker") for member in others):
        return None
    orphaned = list(Document.objects.filter(state=DocumentState.PARSING).values_list("pk", flat=True)[:500])
    if orphaned:
        Document.objects.filter(pk__in=orphaned, state=DocumentState.PARSING).update(state=DocumentState.QUEUED)
        logger.warning("re-sending %d document(s) a stopped ingest worker left parsing", len(orphaned))
        _send_parse_tasks(orphaned)
    return len(orphaned)


_CONTENT_TYPES = {
    "pdf": "application/pdf",
    "docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    "pptx": "application/vnd.openxmlformats-officedocument.presentationml.presentation",
    "xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
    "csv": "text/csv",
    "text": "text/plain",
    "markdown": "text/markdown",
    "eml": "message/rfc822",
}


def content_type_of(fmt: str) -> str:
    """The download's type; HTML goes out as an opaque download, never as a page of our origin."""
    return _CONTENT_TYPES.get(fmt, "application/octet-stream")


def content_disposition(filename: str) -> str:
    """``attachment`` with an ASCII fallback and the UTF-8 name (RFC 6266 / 5987)."""
    fallback = "".join(ch if ch.isascii() and ch.isprintable() and ch not in '"\\' else "_" for ch in filename)
    return f"attachment; filename=\"{fallback}\"; filename*=UTF-8''{quote(filename)}"
