"""Conversations API (QE-17): list, read, rename / switch model, delete, feedback, citation click.

Sending a message is ``POST /api/chat`` (SSE, ``conversations.views``) or the websocket.
Unknown or someone else's thread or message → 404; no credentials → 401.
"""

from __future__ import annotations

import zoneinfo
from typing import Literal

from django.http import HttpRequest, HttpResponse
from django.utils import timezone
from django.utils.text import slugify
from django.utils.translation import gettext as _
from ninja import Query, Router, Schema, Status
from pydantic import Field

from achilles.errors import NotFound, ValidationFailed
from achilles.pagination import MAX_LIMIT, ListParams, Page
from achilles.selectors import allowed_model_names
from conversations import selectors, services
from conversations.access_requests import access_request_send
from conversations.branches import Branch
from conversations.export import ExportMessage, ExportSource, ExportThread, thread_markdown, thread_pdf
from conversations.hint_display import hint_for_people
from conversations.pipeline import engine_deps
from conversations.rendering import markdown_render
from conversations.schemas import (
    AccessRequestIn,
    AccessRequestOut,
    ConversationDetailOut,
    ConversationOut,
    ConversationPatchIn,
    FeedbackIn,
    FeedbackOut,
    MessageOut,
    SharedConversationDetailOut,
    SharedConversationOut,
    ShareIn,
    ShareOut,
)
from knowledge.facade import Identity, source_labels

router = Router(tags=["conversations"])


class MessageListParams(ListParams):
    order: str = Field(default="asc", pattern="^(asc|desc)$", description="asc: oldest first (the default).")


class ThreadParams(Schema):
    """The thread's first page of messages: the list contract's ``limit`` and the messages' ``order``."""

    limit: int = ListParams.model_fields["limit"]
    order: str = MessageListParams.model_fields["order"]
    # refused when given: a client paging the thread itself would get its first page again and again
    cursor: str | None = Field(
        default=None, description="Not taken here: pass `messages.next_cursor` to GET /conversations/{id}/messages."
    )


def _conversation_out(conversation) -> ConversationOut:
    return ConversationOut(
        id=conversation.id,
        title=conversation.title,
        selected_model=conversation.selected_model.name if conversation.selected_model_id else None,
        created_at=conversation.created_at,
        updated_at=conversation.updated_at,
    )


def _citation_out(c, visible: frozenset[int], labels: dict[str, str], *, shared: bool = False) -> dict:
    # Web results (no record) stay; a record the reader may no longer see keeps only its place.
    available = c.record_id is None or c.record_id in visible
    # A colleague reading a shared thread learns nothing of a source closed to them: not even
    # which record or system it was («источник недоступен»).
    hidden = shared and not available
    return {
        "record_id": None if hidden else c.record_id,
        "chunk_id": None if hidden else c.chunk_id,
        "title": c.title if available else "",
        "url": c.url if available else "",
        "source_system": "" if hidden else c.source_system,
        "source_label": "" if hidden else labels.get(c.source_system, c.source_system),
        "chunk_text": c.chunk_text if available else "",
        "rank": c.rank,
        "markers": list(c.markers),
        "passages": c.passages if available else [],
        "available": available,
    }


def _hint_out(hint: dict | None, labels: dict[str, str] | None = None) -> dict | None:
    """The stored hint in people's words (each source once, by its label: ``hint_for_people``). Access
    is asked for through ``POST /messages/{id}/access-requests``; no contact's address is handed out."""
    if not hint:
        return hint
    return hint_for_people(hint, labels or {})


def _message_out(
    message,
    visible: frozenset[int],
    labels: dict[str, str] | None = None,
    branch: Branch | None = None,
    shared: bool = False,
) -> MessageOut:
    citations = [_citation_out(c, visible, labels or {}, shared=shared) for c in message.citations.all()]
    content_html = None
    if message.role == "assistant":
        text = message.content
        hint_tail = "\n\n" + (message.withheld_hint or {}).get("text", "")
        if message.withheld_hint and text.endswith(hint_tail):
            # The page shows the withheld hint as a notice of its own, not as part of the answer.
            text = text[: -len(hint_tail)]
        content_html = markdown_render(
            text, message_id=message.id, markers={n for c in citations for n in c["markers"]}
        )
    index, count = branch.position(message.id) if branch is not None else (1, 1)
    return MessageOut(
        id=message.id,
        role=message.role,
        content=message.content,
        content_html=content_html,
        model=message.model,
        tokens_used=message.tokens_used,
        input_tokens=message.input_tokens,
        output_tokens=message.output_tokens,
        feedback=message.feedback,
        state=message.state,
        # The hint speaks of what the asker could not read: a shared reader is owed nothing of it.
        withheld_hint=None if shared else _hint_out(message.withheld_hint, labels),
        created_at=message.created_at,
        citations=citations,
        parent_id=message.parent_id,
        sibling_index=index,
        sibling_count=count,
        siblings=list(branch.siblings.get(message.id, (message.id,))) if branch is not None else [message.id],
    )


def _visible_cited_records(user, messages) -> frozenset[int]:
    """Stored citations are copies: show each only while its record is still there for the reader."""
    cited = sorted({c.record_id for m in messages for c in m.citations.all() if c.record_id is not None})
    if not cited:
        return frozenset()
    return engine_deps().knowledge.visible_records(cited, Identity.for_user(user))


class ConversationListParams(ListParams):
    q: str | None = Field(
        default=None,
        max_length=200,
        description="Only threads whose title contains this or whose messages match it (full text, Russian stemming).",
    )


@router.get("/conversations", response=Page[ConversationOut])
def conversations_list(request: HttpRequest, params: Query[ConversationListParams]):
    page = selectors.conversation_list_for_user(user=request.auth, cursor=params.cursor, limit=params.limit, q=params.q)
    selected = {c.selected_model_id for c in page.items if c.selected_model_id}
    names = allowed_model_names(ids=selected)
    # Plain dicts: ninja validates the page against Page[ConversationOut] once as it answers;
    # building the schema here too validated every row twice (≈ 0.2–0.3 ms of 30 rows; bench/http).
    return page.map(
        lambda c: {
            "id": c.id,
            "title": c.title,
            "selected_model": names.get(c.selected_model_id),
            "created_at": c.created_at,
            "updated_at": c.updated_at,
        }
    )


def _messages_page(
    request: HttpRequest, conversation, *, cursor: str | None, limit: int, order: str, shared: bool = False
):
    """A page of the thread's shown branch; the cited sources under the reader's own access."""
    branch = selectors.conversation_branch(conversation=conversation)
    page = selectors.conversation_messages(
        conversation=conversation, cursor=cursor, limit=limit, order=order, branch=branch
    )
    visible = _visible_cited_records(request.auth, page.items)
    labels = _source_labels(page.items, hints=not shared)
    return page.map(lambda m: _message_out(m, visible, labels, branch=branch, shared=shared))


def _source_labels(messages, *, hints: bool) -> dict[str, str]:
    """The labels of the sources the messages cite and (``hints``) their withheld hints name (one
    query, none when nothing names a source)."""
    systems = {c.source_system for m in messages for c in m.citations.all()}
    if hints:
        systems |= {
            str(source.get("source_system", ""))
            for m in messages
            for source in (m.withheld_hint or {}).get("sources", [])
            if isinstance(source, dict)
        }
    return source_labels(sorted(systems)) if systems else {}


@router.get("/conversations/{conversation_id}", response=ConversationDetailOut)
def conversations_read(request: HttpRequest, conversation_id: str, params: Query[ThreadParams]):
    """The thread with its first page of messages (``messages``: the list envelope)."""
    if params.cursor is not None:
        raise ValidationFailed(
            "the thread's next pages come from GET /conversations/{id}/messages?cursor=…", field="cursor"
        )
    conversation = selectors.conversation_get_for_user(
        user=request.auth, conversation_id=conversation_id, with_model=True
    )
    page = _messages_page(request, conversation, cursor=None, limit=params.limit, order=params.order)
    return ConversationDetailOut(**_conversation_out(conversation).dict(), messages=page)


@router.get("/conversations/{conversation_id}/messages", response=Page[MessageOut])
def conversations_messages(request: HttpRequest, conversation_id: str, params: Query[MessageListParams]):
    """A thread's messages, page by page (``order``: asc = oldest first)."""
    conversation = selectors.conversation_get_for_user(user=request.auth, conversation_id=conversation_id)
    return _messages_page(request, conversation, cursor=params.cursor, limit=params.limit, order=params.order)


@router.patch("/conversations/{conversation_id}", response=ConversationOut)
def conversations_update(request: HttpRequest, conversation_id: str, payload: ConversationPatchIn):
    conversation = services.conversation_update(
        user=request.auth, conversation_id=conversation_id, fields=payload.dict(exclude_unset=True)
    )
    return _conversation_out(conversation)


@router.delete("/conversations/{conversation_id}", response={204: None})
def conversations_delete(request: HttpRequest, conversation_id: str):
    services.conversation_delete(user=request.auth, conversation_id=conversation_id)
    return Status(204, None)


@router.put("/messages/{message_id}/feedback", response=FeedbackOut, tags=["messages"])
def messages_feedback(request: HttpRequest, message_id: int, payload: FeedbackIn):
    message = services.message_feedback_set(user=request.auth, message_id=message_id, value=payload.value)
    return FeedbackOut(id=message.id, feedback=message.feedback)


@router.post(
    "/messages/{message_id}/access-requests",
    response={201: AccessRequestOut},
    tags=["messages"],
    summary="Ask the withheld hint's named contact for access (a notice to them; rate-limited)",
    openapi_extra={
        "responses": {
            "429": {
                "description": "Asked too often: access_request_repeated (this source and contact within 24 h) "
                "or too_many_requests (over five an hour)",
                "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
            }
        }
    },
)
def messages_access_request(request: HttpRequest, message_id: int, payload: AccessRequestIn):
    sent = access_request_send(
        user=request.auth, message_id=message_id, source_system=payload.source_system, contact_id=payload.contact_id
    )
    return Status(
        201,
        AccessRequestOut(
            contact_name=sent.contact_name,
            source_label=sent.source_label,
            detail=_("Запрос отправлен: %(name)s получит уведомление.") % {"name": sent.contact_name},
        ),
    )


@router.post("/messages/{message_id}/citations/{record_id}/click", response={204: None}, tags=["messages"])
def citations_click(request: HttpRequest, message_id: int, record_id: int):
    citation = services.citation_for_click(user=request.auth, message_id=message_id, record_id=record_id)
    identity = Identity.for_user(request.auth)
    knowledge = engine_deps().knowledge
    if citation.record_id not in knowledge.visible_records([citation.record_id], identity):
        raise NotFound(_("Источник не найден."))  # deleted or closed to the reader since it was cited
    # A click is its own «обращение» for that record (QE-11), under the clicker's identity.
    knowledge.register_access(citation.record_id, identity, "click", str(message_id))
    return Status(204, None)


@router.post("/messages/{message_id}/choose", response={204: None}, tags=["messages"])
def messages_choose(request: HttpRequest, message_id: int):
    """Show this version of a message (a regenerated answer, an edited question): the thread's
    branch goes through it from now on (``sibling_index`` / ``siblings`` in the thread)."""
    services.message_choose(user=request.auth, message_id=message_id)
    return Status(204, None)


# --- sharing ----------------------------------------------------------------------------------


def _share_out(share) -> ShareOut:
    return ShareOut(
        id=share.pk,
        reader_id=share.reader_id,
        username=share.reader.username,
        name=share.reader.get_full_name(),
        created_at=share.created_at,
    )


@router.get("/conversations/{conversation_id}/shares", response=Page[ShareOut])
def conversations_shares(request: HttpRequest, conversation_id: str, params: Query[ListParams]):
    """The colleagues who may read the thread, in the order it was shared with them."""
    conversation = selectors.conversation_get_for_user(user=request.auth, conversation_id=conversation_id)
    page = selectors.conversation_shares(conversation=conversation, cursor=params.cursor, limit=params.limit)
    return page.map(_share_out)


@router.post("/conversations/{conversation_id}/shares", response={201: ShareOut})
def conversations_share(request: HttpRequest, conversation_id: str, payload: ShareIn):
    """Share the thread read-only with a colleague (by login); again with the same one: the same share."""
    share = services.conversation_share_add(
        user=request.auth, conversation_id=conversation_id, username=payload.username
    )
    return Status(201, _share_out(share))


@router.delete("/conversations/{conversation_id}/shares/{reader_id}", response={204: None})
def conversations_unshare(request: HttpRequest, conversation_id: str, reader_id: int):
    """Revoke: the colleague can no longer read the thread."""
    services.conversation_share_remove(user=request.auth, conversation_id=conversation_id, reader_id=reader_id)
    return Status(204, None)


def _shared_out(conversation) -> SharedConversationOut:
    return SharedConversationOut(
        **_conversation_out(conversation).dict(),
        owner=conversation.user.username,
        owner_name=conversation.user.get_full_name(),
    )


@router.get("/shared", response=Page[SharedConversationOut], tags=["shared"])
def shared_list(request: HttpRequest, params: Query[ListParams]):
    """The threads colleagues shared with you, most recently active first."""
    page = selectors.conversations_shared_with(reader=request.auth, cursor=params.cursor, limit=params.limit)
    return page.map(_shared_out)


@router.get("/shared/{conversation_id}", response=SharedConversationDetailOut, tags=["shared"])
def shared_read(request: HttpRequest, conversation_id: str, params: Query[ThreadParams]):
    """A thread shared with you, read-only: its shown branch; each cited source only when you may
    read it yourself, else ``available: false`` with no title, text, link, system or record."""
    if params.cursor is not None:
        raise ValidationFailed("the thread's next pages come from GET /shared/{id}/messages?cursor=…", field="cursor")
    conversation = selectors.conversation_get_shared(reader=request.auth, conversation_id=conversation_id)
    page = _messages_page(request, conversation, cursor=None, limit=params.limit, order=params.order, shared=True)
    return SharedConversationDetailOut(**_shared_out(conversation).dict(), messages=page)


@router.get("/shared/{conversation_id}/messages", response=Page[MessageOut], tags=["shared"])
def shared_messages(request: HttpRequest, conversation_id: str, params: Query[MessageListParams]):
    """A shared thread's messages, page by page, as ``GET /shared/{id}`` shows them."""
    conversation = selectors.conversation_get_shared(reader=request.auth, conversation_id=conversation_id)
    return _messages_page(
        request, conversation, cursor=params.cursor, limit=params.limit, order=params.order, shared=True
    )


# --- export -----------------------------------------------------------------------------------


class ExportParams(Schema):
    format: Literal["markdown", "pdf"] = Field(default="markdown", description="markdown (.md) or pdf.")


def _thread_export(request: HttpRequest, conversation, *, shared: bool, fmt: str) -> HttpResponse:
    """The shown branch, every page of it, each cited source only as the exporter may read it."""
    items: list[MessageOut] = []
    cursor = None
    while True:
        page = _messages_page(request, conversation, cursor=cursor, limit=MAX_LIMIT, order="asc", shared=shared)
        items += page.items
        cursor = page.next_cursor
        if cursor is None:
            break
    user = request.auth
    try:
        zone = zoneinfo.ZoneInfo(user.effective_timezone())
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        zone = zoneinfo.ZoneInfo("UTC")
    thread = ExportThread(
        title=conversation.title,
        exported_at=timezone.now().astimezone(zone),
        exported_by=user.get_full_name() or user.username,
        messages=tuple(
            ExportMessage(
                role=m.role,
                content=_without_hint(m),
                state=m.state,
                sources=tuple(
                    ExportSource(markers=tuple(c.markers) or (c.rank,), title=c.title, url=c.url, available=c.available)
                    for c in m.citations
                ),
            )
            for m in items
        ),
    )
    stem = slugify(conversation.title, allow_unicode=False) or "thread"
    if fmt == "pdf":
        response = HttpResponse(thread_pdf(thread), content_type="application/pdf")
        name = f"{stem}.pdf"
    else:
        response = HttpResponse(thread_markdown(thread), content_type="text/markdown; charset=utf-8")
        name = f"{stem}.md"
    response["Content-Disposition"] = f'attachment; filename="{name}"'
    return response


def _without_hint(message: MessageOut) -> str:
    text = message.content
    tail = "\n\n" + ((message.withheld_hint or {}).get("text") or "")
    return text[: -len(tail)] if message.withheld_hint and text.endswith(tail) else text


@router.get("/conversations/{conversation_id}/export", tags=["conversations"])
def conversations_export(request: HttpRequest, conversation_id: str, params: Query[ExportParams]):
    """The thread as it is shown (its current versions) in Markdown or PDF, the sources as footnotes."""
    conversation = selectors.conversation_get_for_user(
        user=request.auth, conversation_id=conversation_id, with_model=True
    )
    return _thread_export(request, conversation, shared=False, fmt=params.format)


@router.get("/shared/{conversation_id}/export", tags=["shared"])
def shared_export(request: HttpRequest, conversation_id: str, params: Query[ExportParams]):
    """A thread shared with you, exported; a source you may not read is «источник недоступен»."""
    conversation = selectors.conversation_get_shared(reader=request.auth, conversation_id=conversation_id)
    return _thread_export(request, conversation, shared=True, fmt=params.format)
