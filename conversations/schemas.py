"""Request and response schemas of the Query Engine (ninja / pydantic)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Literal

from ninja import Schema
from pydantic import BeforeValidator, Field, StrictInt, field_validator, model_validator

from achilles.names import name_clean
from achilles.pagination import Page
from conversations.services import MAX_CONTENT_LENGTH


class ChatIn(Schema):
    # the question; may be left out only with regenerate_of (the stored question is asked again)
    content: str = Field(default="", max_length=MAX_CONTENT_LENGTH)
    conversation_id: uuid.UUID | None = None
    # an answer of the thread: answer its question again, the new answer beside the old one (‹ 2/2 ›)
    regenerate_of: StrictInt | None = Field(default=None, ge=1)
    # a question of the thread: ``content`` is its new version, asked beside it (the old branch stays)
    edit_of: StrictInt | None = Field(default=None, ge=1)

    model_config = {"extra": "forbid"}

    @model_validator(mode="after")
    def _content_given(self) -> ChatIn:
        if not self.content and self.regenerate_of is None:
            raise ValueError("content is required (it may be left out only with regenerate_of)")
        if self.regenerate_of is not None and self.edit_of is not None:
            raise ValueError("regenerate_of or edit_of, not both")
        return self

    @field_validator("content")
    @classmethod
    def _no_nul(cls, value: str) -> str:
        # The websocket has no HTTP middleware in front of it (see achilles.middleware).
        if "\x00" in value:
            raise ValueError("text must not contain NUL (0x00) characters")
        return value


class PassageOut(Schema):
    marker: int
    chunk_id: int | None
    text: str


class CitationOut(Schema):
    record_id: int | None
    chunk_id: int | None
    title: str
    url: str
    # the internal key (``confluence:1``), kept for clients that branch on it; people read ``source_label``
    source_system: str
    source_label: str = Field(
        default="", description="The source as people know it: «Файлы», «Confluence», an admin's own label."
    )
    chunk_text: str
    rank: int
    markers: list[int] = []
    # per marker, the passage it points to (``chunk_text`` is the record's best cited chunk)
    passages: list[PassageOut] = []
    # False when the cited record was deleted or closed to the reader since: title, url and text
    # are then withheld from the stored copy.
    available: bool = True


class MessageOut(Schema):
    id: int
    role: str
    content: str
    # an assistant answer's Markdown rendered and sanitised on the server (conversations.rendering)
    content_html: str | None = None
    model: str | None
    tokens_used: int | None
    # the split of tokens_used (null on answers from before it was stored, and on questions)
    input_tokens: int | None = None
    output_tokens: int | None = None
    feedback: int | None
    state: str
    withheld_hint: dict | None
    created_at: datetime
    citations: list[CitationOut]
    # The thread is a tree of versions; these say where the message stands among its own (‹ 2/3 ›).
    parent_id: int | None = Field(default=None, description="The message it follows (null: the thread's first).")
    sibling_index: int = Field(default=1, description="1-based place among its versions (regenerated or edited).")
    sibling_count: int = Field(default=1, description="How many versions there are (1: none besides it).")
    siblings: list[int] = Field(default_factory=list, description="The versions' ids, oldest first.")


class ConversationOut(Schema):
    id: uuid.UUID
    title: str
    selected_model: str | None
    created_at: datetime
    updated_at: datetime


class ConversationDetailOut(ConversationOut):
    # the thread's first page of messages in the one list envelope; the next pages come from
    # GET /conversations/{id}/messages?cursor=<messages.next_cursor>
    messages: Page[MessageOut]


class ConversationPatchIn(Schema):
    title: str | None = Field(default=None, min_length=1, max_length=200)
    selected_model: str | None = None

    @field_validator("title")
    @classmethod
    def visible(cls, value: str | None) -> str | None:
        return name_clean(value) if value is not None else None  # trimmed, visible (achilles.names)

    model_config = {"extra": "forbid"}


def _json_integer(value):
    """A JSON integer only: pydantic's Literal[1] takes ``true`` and ``1.0`` for 1."""
    if value is not None and type(value) is not int:
        raise ValueError("must be an integer")
    return value


class FeedbackIn(Schema):
    value: Annotated[Literal[-1, 1], BeforeValidator(_json_integer)] | None

    model_config = {"extra": "forbid"}


class FeedbackOut(Schema):
    id: int
    feedback: int | None


class AccessRequestIn(Schema):
    """«Запросить доступ»: the source and the contact, as the answer's withheld hint names them."""

    source_system: str = Field(min_length=1, max_length=64)
    contact_id: StrictInt = Field(description="the contact's user_id in the hint")


class ShareIn(Schema):
    username: str = Field(min_length=1, max_length=150, description="The colleague's login.")

    model_config = {"extra": "forbid"}


class AccessRequestOut(Schema):
    contact_name: str
    source_label: str
    detail: str


class ShareOut(Schema):
    id: int
    reader_id: int
    username: str
    name: str
    created_at: datetime


class SharedConversationOut(ConversationOut):
    owner: str = Field(description="Who shared it (login).")
    owner_name: str


class SharedConversationDetailOut(SharedConversationOut):
    messages: Page[MessageOut]
