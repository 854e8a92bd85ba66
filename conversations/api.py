"""Conversations API (QE-17): list, read, rename / switch model, delete, feedback, citation click.

Sending a message is ``POST /api/chat`` (SSE, ``conversations.views``) or the websocket.
Unknown or someone else's thread or message → 404; no credentials → 401.
"""

from __future__ import annotations

from urllib.parse import quote

from django.http import HttpRequest
from ninja import Query, Router, Schema, Status
from pydantic import Field

from achilles.errors import NotFound, ValidationFailed
from achilles.pagination import ListParams, Page
from achilles.selectors import allowed_model_names
from conversations import selectors, services
from conversations.access_requests import access_request_send
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


def _citation_out(c, visible: frozenset[int]) -> dict:
    # Web results (no record) stay; a record the reader may no longer see keeps only its place.
    available = c.record_id is None or c.record_id in visible
    return {
        "record_id": c.record_id,
        "chunk_id": c.chunk_id,
        "title": c.title if available else "",
        "url": c.url if available else "",
        "source_system": c.source_system,
        "chunk_text": c.chunk_text if available else "",
        "rank": c.rank,
        "markers": list(c.markers),
        "available": available,
    }


def _hint_out(hint: dict | None, emails: dict[int, str], labels: dict[str, str] | None = None) -> dict | None:
    """The stored hint in people's words (each source once, by its label: ``hint_for_people``), each
    named author with a ``request_access_url`` (a mailto) when the platform knows their address: the
    one request-access path it can really deliver."""
    if not hint:
        return hint
    hint = hint_for_people(hint, labels or {})
    sources = []
    for source in hint.get("sources", []):
        contact = source.get("contact")
        email = emails.get(contact.get("user_id")) if isinstance(contact, dict) else None
        if email:
            subject = quote(f"Запрос доступа к материалам «{source.get('label') or source.get('source_system', '')}»")
            body = quote(
                "Здравствуйте! Поиск Achilles нашёл по моему вопросу материалы, закрытые для меня. "
                "Можно ли получить к ним доступ?"
            )
            source = {
                **source,
                "contact": {
                    **contact,
                    "request_access_url": f"mailto:{quote(email, safe='@')}?subject={subject}&body={body}",
                },
            }
        sources.append(source)
    return {**hint, "sources": sources}


def _message_out(
    message, visible: frozenset[int], emails: dict[int, str] | None = None, labels: dict[str, str] | None = None
) -> MessageOut:
    citations = [_citation_out(c, visible) for c in message.citations.all()]
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
        withheld_hint=_hint_out(message.withheld_hint, emails or {}, labels),
        created_at=message.created_at,
        citations=citations,
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
    return page.map(
        lambda c: ConversationOut(
            id=c.id,
            title=c.title,
            selected_model=names.get(c.selected_model_id),
            created_at=c.created_at,
            updated_at=c.updated_at,
        )
    )


def _messages_page(request: HttpRequest, conversation, *, cursor: str | None, limit: int, order: str):
    page = selectors.conversation_messages(conversation=conversation, cursor=cursor, limit=limit, order=order)
    visible = _visible_cited_records(request.auth, page.items)
    emails = selectors.withheld_contact_emails(messages=page.items)
    labels = _hint_source_labels(page.items)
    return page.map(lambda m: _message_out(m, visible, emails, labels))


def _hint_source_labels(messages) -> dict[str, str]:
    """The labels of the sources the messages' withheld hints name (one query, none without hints)."""
    systems = {
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
            detail=f"Запрос отправлен: {sent.contact_name} получит уведомление.",
        ),
    )


@router.post("/messages/{message_id}/citations/{record_id}/click", response={204: None}, tags=["messages"])
def citations_click(request: HttpRequest, message_id: int, record_id: int):
    citation = services.citation_for_click(user=request.auth, message_id=message_id, record_id=record_id)
    identity = Identity.for_user(request.auth)
    knowledge = engine_deps().knowledge
    if citation.record_id not in knowledge.visible_records([citation.record_id], identity):
        raise NotFound("citation not found")  # deleted or closed to the reader since it was cited
    # A click is its own «обращение» for that record (QE-11), under the clicker's identity.
    knowledge.register_access(citation.record_id, identity, "click", str(message_id))
    return Status(204, None)
