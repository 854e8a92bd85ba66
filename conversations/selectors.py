"""Reads of the Query Engine, with ownership built in: foreign or unknown → NotFound (never 403)."""

from __future__ import annotations

import uuid

from django.contrib.postgres.search import SearchQuery, SearchVector
from django.db.models import Prefetch, Q
from django.utils.translation import gettext as _

from achilles.errors import NotFound, ValidationFailed
from achilles.models import User
from achilles.pagination import DEFAULT_LIMIT, Window, keyset_page
from conversations.branches import Branch, Node, active_branch
from conversations.models import Citation, Conversation, ConversationShare, Message


def _as_uuid(value: object) -> uuid.UUID:
    try:
        return value if isinstance(value, uuid.UUID) else uuid.UUID(str(value))
    except (ValueError, TypeError, AttributeError):
        raise NotFound(_("Беседа не найдена.")) from None


def conversation_get_for_user(
    *, user: User, conversation_id: uuid.UUID | str, with_model: bool = False, for_update: bool = False
) -> Conversation:
    """The user's own thread (404 otherwise); ``for_update`` locks its row until the transaction
    ends, so a concurrent delete either happened (404) or waits."""
    qs = Conversation.objects.filter(pk=_as_uuid(conversation_id), user=user)
    if for_update:
        qs = qs.select_for_update(of=("self",))
    conversation = (qs.select_related("selected_model") if with_model else qs).first()
    if conversation is None:
        raise NotFound(_("Беседа не найдена."))
    return conversation


def message_get_for_user(*, user: User, message_id: int, for_update: bool = False) -> Message:
    qs = Message.objects.filter(pk=message_id, conversation__user=user)
    message = (qs.select_for_update(of=("self",)) if for_update else qs).first()
    if message is None:
        raise NotFound(_("Сообщение не найдено."))
    return message


# --- lists (achilles.pagination: one keyset contract) -------------------------------------


# Russian stemming: «28 календарных» finds «28 календарных дней», «отпуска» finds «отпуск».
SEARCH_CONFIG = "russian"


def conversation_list_for_user(
    *, user: User, cursor: str | None = None, limit: int = DEFAULT_LIMIT, q: str | None = None
) -> Window[Conversation]:
    """Own conversations, most recently active first; keyset on (updated_at, id). ``q``: only those
    whose title contains it or one of whose messages matches it in PostgreSQL full text (every word,
    stemmed), so a thread is found by what was said in it, not by its title alone."""
    conversations = Conversation.objects.filter(user=user)
    text = (q or "").replace("\x00", " ").strip()  # PostgreSQL text takes no NUL
    if text:
        query = SearchQuery(text, config=SEARCH_CONFIG, search_type="plain")
        said = (
            Message.objects.filter(conversation__user=user)
            .annotate(document=SearchVector("content", config=SEARCH_CONFIG))
            .filter(document=query)
            .values("conversation_id")
        )
        conversations = conversations.filter(Q(title__icontains=text) | Q(pk__in=said))
    return keyset_page(
        conversations,
        scope="conversations",
        keys=("-updated_at", "-id"),
        cursor=cursor,
        limit=limit,
    )


def conversation_branch(*, conversation: Conversation) -> Branch:
    """The branch of versions the thread shows (``conversations.branches``), with each message's siblings."""
    rows = Message.objects.filter(conversation=conversation).values_list("id", "parent_id", "created_at", "chosen_at")
    return active_branch(Node(*row) for row in rows)


def conversation_messages(
    *,
    conversation: Conversation,
    cursor: str | None = None,
    limit: int = DEFAULT_LIMIT,
    order: str = "asc",
    branch: Branch | None = None,
) -> Window[Message]:
    """The messages of the thread's shown branch with their citations: three queries whatever the
    thread's length (the branch, the page, the citations)."""
    if order not in ("asc", "desc"):
        raise ValidationFailed("order is asc or desc", field="order")
    branch = branch if branch is not None else conversation_branch(conversation=conversation)
    qs = Message.objects.filter(conversation=conversation, id__in=branch.ids).prefetch_related(
        Prefetch("citations", queryset=Citation.objects.order_by("rank"))
    )
    # The order is part of the list: an ascending walk's cursor is refused on a descending one.
    return keyset_page(
        qs, scope=f"messages:{order}", keys=("id",) if order == "asc" else ("-id",), cursor=cursor, limit=limit
    )


# --- shared threads -------------------------------------------------------------------------


def conversation_get_shared(*, reader: User, conversation_id: uuid.UUID | str) -> Conversation:
    """A thread shared with ``reader`` (404 otherwise: unknown, not shared, or the share revoked)."""
    conversation = (
        Conversation.objects.filter(pk=_as_uuid(conversation_id), shares__reader=reader)
        .select_related("user", "selected_model")
        .first()
    )
    if conversation is None:
        raise NotFound(_("Беседа не найдена."))
    return conversation


def conversation_shares(
    *, conversation: Conversation, cursor: str | None = None, limit: int = DEFAULT_LIMIT
) -> Window[ConversationShare]:
    """Who may read the thread, in the order it was shared with them."""
    return keyset_page(
        ConversationShare.objects.filter(conversation=conversation).select_related("reader"),
        scope=f"shares:{conversation.pk}",
        keys=("id",),
        cursor=cursor,
        limit=limit,
    )


def conversations_shared_with(
    *, reader: User, cursor: str | None = None, limit: int = DEFAULT_LIMIT
) -> Window[Conversation]:
    """The threads colleagues shared with ``reader``, most recently active first."""
    return keyset_page(
        Conversation.objects.filter(shares__reader=reader).select_related("user", "selected_model"),
        scope="conversations:shared",
        keys=("-updated_at", "-id"),
        cursor=cursor,
        limit=limit,
    )
