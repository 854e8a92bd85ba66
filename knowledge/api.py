"""REST routes of the Knowledge Store, mounted at ``/api/knowledge/``.

``POST /search`` runs a search as the caller (an admin may preview another user's result);
``PUT /records`` and ``DELETE /records`` are for service tokens of admins (KS-2); ``/documents``
uploads office files (multipart) parsed in the ``ingest`` queue (``knowledge.uploads``).
"""

from __future__ import annotations

from datetime import datetime

from django.http import HttpRequest, HttpResponse
from ninja import File, Form, Query, Router, Schema, Status, UploadedFile
from pydantic import Field, StrictBool, StrictInt, field_validator

from achilles.errors import NotFound, PermissionDenied
from achilles.pagination import ListParams, Page
from achilles.selectors import user_by_id
from knowledge import facade, selectors, services
from knowledge.contracts import MAX_K, MAX_QUERY_CHARS, Identity
from knowledge.search.embedding import embedding_config
from knowledge.uploads import selectors as upload_selectors
from knowledge.uploads import services as uploads

router = Router(tags=["knowledge"])


class SearchIn(Schema):
    query: str = Field(min_length=1, max_length=MAX_QUERY_CHARS)
    k: StrictInt = Field(default=8, ge=1, le=MAX_K)
    as_user_id: StrictInt | None = Field(
        default=None,
        description="Admins with the «search as user» permission only: search as this user would (audited).",
    )

    @field_validator("query")
    @classmethod
    def not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("query must not be blank")
        return value


class CandidateOut(Schema):
    record_id: int
    chunk_id: int
    title: str
    url: str
    source_system: str
    text: str
    score: float
    rank: int


class WithheldOut(Schema):
    source_system: str
    author_principal_id: str | None


class SearchOut(Schema):
    candidates: list[CandidateOut]
    withheld: list[WithheldOut]
    is_empty: bool


class RecordIn(Schema):
    source_system: str = Field(min_length=1, max_length=64, pattern=r"^[a-z][a-z0-9_-]*$")
    external_id: str = Field(min_length=1, max_length=512)
    title: str = Field(min_length=1, max_length=500)
    text: str = Field(min_length=1, max_length=2_000_000)
    acl: list[str] = Field(min_length=1, max_length=200)
    acl_also: list[list[str]] = Field(
        default_factory=list,
        max_length=50,
        description="Further lists of principals («all of»): a reader must match `acl` and one principal of "
        "every list (a Confluence page: the space permission in `acl`, each restriction on its path a list).",
    )
    url: str = Field(default="", max_length=2000)
    author_principal_id: str | None = Field(default=None, max_length=200)
    never_hint: StrictBool = Field(default=False, description="Never mention this record in a withheld hint.")
    user_writable: StrictBool = Field(
        default=False,
        description="People other than admins can write this content where it comes from (an open wiki space, "
        "uploads): it then never counts as evidence that a word is common when withheld hints are decided.",
    )


class RecordOut(Schema):
    record_id: int
    status: str
    chunks: int
    warnings: list[str]


class StatusOut(Schema):
    is_empty: bool
    records: int
    chunks: int
    embedding_model: str | None
    vector_search: bool


def _require_admin(request: HttpRequest) -> None:
    if not request.auth.is_staff:
        raise PermissionDenied("admins only")


@router.post("/search", response=SearchOut)
def knowledge_search(request: HttpRequest, payload: SearchIn):
    user = request.auth
    if payload.as_user_id is not None and payload.as_user_id != user.pk:
        _require_admin(request)
        if not user.has_perm(services.SEARCH_AS_USER_PERMISSION):
            raise PermissionDenied("searching as another user needs the «search as user» permission")
        target = user_by_id(user_id=payload.as_user_id)
        if target is None:
            raise NotFound("user not found", code="user_not_found")
        result = services.search_as_user(actor=user, user=target, query=payload.query, k=payload.k)
    else:
        result = facade.search(payload.query, facade.Identity.for_user(user), payload.k)
    return SearchOut(
        candidates=[CandidateOut(**vars(c)) for c in result.candidates],
        withheld=[WithheldOut(**vars(w)) for w in result.withheld],
        is_empty=result.is_empty,
    )


@router.get("/status", response=StatusOut)
def knowledge_status(request: HttpRequest):
    config = embedding_config()
    counts = selectors.record_and_chunk_counts()
    return StatusOut(
        is_empty=facade.is_empty(),
        records=counts.records,
        chunks=counts.chunks,
        embedding_model=config.name if config else None,
        vector_search=config is not None,
    )


class SourceOut(Schema):
    source_system: str = Field(description="uploads (files), confluence, jira, or another connector's name")
    documents: int = Field(description="Records of this source the caller may read.")


class SourcesOut(Schema):
    items: list[SourceOut]


# the sources the «Знания» page always names, even with nothing readable in them
NAMED_SOURCES = ("uploads", "confluence", "jira")


@router.get("/sources", response=SourcesOut)
def knowledge_sources(request: HttpRequest):
    """Each source with the number of its documents the caller may read (under the caller's ACL:
    what one cannot read is neither counted nor named). Files, Confluence and Jira always appear."""
    counts = facade.readable_counts_by_source(Identity.for_user(request.auth))
    names = [*NAMED_SOURCES, *sorted(set(counts) - set(NAMED_SOURCES))]
    return SourcesOut(items=[SourceOut(source_system=name, documents=counts.get(name, 0)) for name in names])


@router.put("/records", response={200: RecordOut, 201: RecordOut})
def knowledge_record_upsert(request: HttpRequest, payload: RecordIn):
    _require_admin(request)
    outcome = services.record_upsert(
        source_system=payload.source_system,
        external_id=payload.external_id,
        title=payload.title,
        text=payload.text,
        acl=payload.acl,
        acl_also=payload.acl_also,
        url=payload.url,
        author_principal_id=payload.author_principal_id,
        origin="api",
        never_hint=payload.never_hint,
        user_writable=payload.user_writable,
    )
    body = RecordOut(
        record_id=outcome.record_id, status=outcome.status, chunks=outcome.chunks, warnings=list(outcome.warnings)
    )
    return Status(201 if outcome.status == "created" else 200, body)


@router.delete("/records", response={204: None})
def knowledge_record_delete(request: HttpRequest, source_system: str, external_id: str):
    _require_admin(request)
    services.record_delete(source_system=source_system, external_id=external_id)
    return Status(204, None)


# --------------------------------------------------------------------------- uploaded documents


class DocumentOut(Schema):
    id: int
    filename: str
    format: str
    size: int
    acl: list[str]
    state: str = Field(description="queued, parsing, indexed, failed or needs_ocr")
    error: str = Field(description="Why it failed or needs OCR (empty otherwise).")
    error_code: str
    title: str
    chunks: int
    record_id: int | None
    owner_id: int
    download_url: str
    created_at: datetime
    updated_at: datetime
    parsed_at: datetime | None


class RejectedFileOut(Schema):
    filename: str
    code: str
    detail: str


class DocumentsUploadedOut(Schema):
    items: list[DocumentOut]
    rejected: list[RejectedFileOut] = Field(description="Files refused at upload (never stored), with why.")


# multipart/form-data: `files` parts (one or many) and `acl` (repeated or comma-separated; `me` is
# «only me», the default). The middleware lets this route's body through (achilles.middleware).
@router.post("/documents", response={202: DocumentsUploadedOut}, tags=["knowledge"])
def knowledge_documents_upload(
    request: HttpRequest,
    files: File[list[UploadedFile]],
    acl: Form[list[str]] = (),
):
    """Upload one or many files (multipart: `files`, `acl`); each is parsed and indexed in the
    background (its `state` says how far). Needs the «add document» permission (staff have it)."""
    principals = [part for value in acl for part in value.split(",")]
    outcome = uploads.documents_upload(
        owner=request.auth,
        files=[uploads.UploadFile(filename=f.name or "", size=f.size or 0, read=f.read) for f in files],
        acl=principals,
    )
    return Status(
        202,
        DocumentsUploadedOut(
            items=[DocumentOut.from_orm(d) for d in outcome.documents],
            rejected=[RejectedFileOut(**vars(r)) for r in outcome.rejected],
        ),
    )


@router.get("/documents", response=Page[DocumentOut], tags=["knowledge"])
def knowledge_documents_list(request: HttpRequest, params: Query[ListParams]):
    """Your uploaded documents with their state, newest first (staff: everyone's)."""
    return upload_selectors.document_page_for_user(user=request.auth, cursor=params.cursor, limit=params.limit)


@router.get("/documents/{document_id}", response=DocumentOut, tags=["knowledge"])
def knowledge_document_get(request: HttpRequest, document_id: int):
    return upload_selectors.document_get_for_user(user=request.auth, document_id=document_id)


@router.put("/documents/{document_id}", response={202: DocumentOut}, tags=["knowledge"])
def knowledge_document_replace(
    request: HttpRequest,
    document_id: int,
    file: File[UploadedFile],
    acl: Form[list[str]] | None = None,
):
    """Replace your document's file (staff: anyone's; multipart: `file`, optional `acl`, else the
    readers stay). The same document and record; it is parsed again (`state` queued) and citations
    point to the new version once it is indexed."""
    principals = None if acl is None else [part for value in acl for part in value.split(",")]
    document = uploads.document_replace(
        actor=request.auth,
        document_id=document_id,
        file=uploads.UploadFile(filename=file.name or "", size=file.size or 0, read=file.read),
        acl=principals,
    )
    return Status(202, document)


@router.delete("/documents/{document_id}", response={204: None}, tags=["knowledge"])
def knowledge_document_delete(request: HttpRequest, document_id: int):
    """Delete your document (staff: anyone's) and the record it became."""
    uploads.document_delete(actor=request.auth, document_id=document_id)
    return Status(204, None)


@router.get(
    "/documents/{document_id}/download",
    response={200: None},
    url_name="knowledge_document_download",
    tags=["knowledge"],
)
def knowledge_document_download(request: HttpRequest, document_id: int):
    """The uploaded file, for those its record's ACL lets read it (404 for anyone else)."""
    document = upload_selectors.document_file_for_user(user=request.auth, document_id=document_id)
    response = HttpResponse(bytes(document.content), content_type=uploads.content_type_of(document.format))
    response["Content-Disposition"] = uploads.content_disposition(document.filename)
    response["X-Content-Type-Options"] = "nosniff"
    return response
