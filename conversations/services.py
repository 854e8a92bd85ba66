"""Writes of the Query Engine: turn start, finalize (message + trace + citations), edits, feedback.

Every function is sync and atomic; the async pipeline calls them through ``sync_to_async``.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.core.cache import cache
from django.db import connection, models, transaction
from django.db.models import OuterRef, Subquery
from django.db.models.functions import Now
from django.utils import timezone, translation
from django.utils.translation import gettext as _
from psycopg.types.json import Jsonb

from achilles.errors import Conflict, NotFound, ValidationFailed
from achilles.llm import Message as LLMMessage
from achilles.llm import ModelSpec, Timeouts
from achilles.models import AllowedModel, ModelKind, Notification, User
from achilles.names import name_clean
from achilles.notifications import notify_on_commit
from achilles.platform import platform_settings
from achilles.rawsql import column, column_name, concrete_field, row_model, table
from achilles.selectors import allowed_model_get, default_model
from conversations.branches import Node, active_branch, path_to
from conversations.choices import MessageState, Role
from conversations.citations import CitationOut
from conversations.grounding import Contact, WithheldHint
from conversations.models import Citation, Conversation, ConversationShare, Message, RetrievalTrace
from conversations.rules import effective_model, feedback_update
from conversations.selectors import conversation_get_for_user, message_get_for_user
from conversations.trace import TraceDraft

HISTORY_LIMIT = 200  # older messages could never fit a window anyway
TITLE_LENGTH = 80
MAX_CONTENT_LENGTH = 32_000


@dataclass(frozen=True)
class TurnSettings:
    platform_prompt: str
    web_search_enabled: bool
    web_search_url: str
    answer_reserve_tokens: int
    retrieval_top_k: int
    cache_ttl_seconds: int


@dataclass(frozen=True)
class TurnStart:
    conversation_id: str
    created: bool
    user_message_id: int
    history: tuple[LLMMessage, ...]
    model: ModelSpec
    settings: TurnSettings
    # The question the turn answers as stored, when it is not the text sent (a regenerated answer).
    content: str | None = None


def turn_settings() -> TurnSettings:
    row = platform_settings()
    return TurnSettings(
        platform_prompt=row.platform_prompt,
        web_search_enabled=row.web_search_enabled,
        web_search_url=row.web_search_url,
        answer_reserve_tokens=row.answer_reserve_tokens,
        retrieval_top_k=row.retrieval_top_k,
        cache_ttl_seconds=row.cache_ttl_seconds,
    )


def conversation_model(conversation: Conversation | None) -> AllowedModel:
    """Intent → the model to generate with: the thread's selection, else the default chat model."""
    selected = conversation.selected_model if conversation is not None and conversation.selected_model_id else None
    if selected is not None:  # the default is read only when it is what generates
        return selected
    return effective_model(None, default_model(kind="chat"))


def turn_start(
    *,
    user: User,
    content: str,
    conversation_id: uuid.UUID | str | None = None,
    regenerate_of: int | None = None,
    edit_of: int | None = None,
) -> TurnStart:
    """Resolve (or lazily create) the thread, store the user's message, load the history.

    ``regenerate_of`` (an answer's id): answer its question again, the new answer beside the old one;
    ``edit_of`` (a question's id): ``content`` is a new version of that question, beside it."""
    content = content.strip()
    if regenerate_of is not None or edit_of is not None:
        if conversation_id is None:
            raise ValidationFailed(
                "a regenerated answer or an edited question needs its thread", field="conversation_id"
            )
        if regenerate_of is not None and edit_of is not None:
            raise ValidationFailed("regenerate_of or edit_of, not both", field="edit_of")
    if not content and regenerate_of is None:
        raise ValidationFailed("content must not be empty", field="content")
    if conversation_id is not None:
        return _turn_continue(
            user=user, content=content, conversation_id=conversation_id, regenerate_of=regenerate_of, edit_of=edit_of
        )
    thread_id = uuid.uuid4()
    sql, model_fields = _thread_start_sql()
    with connection.cursor() as cursor:
        cursor.execute(sql, {"id": thread_id, "user_id": user.pk, "title": _title(content), "content": content})
        row = cursor.fetchone()
    # No default chat model: no row, and nothing was written (the INSERTs read from the model).
    default = row_model(AllowedModel, model_fields, row[1:]) if row is not None else None
    model = effective_model(None, default)
    return TurnStart(
        conversation_id=str(thread_id),
        created=True,
        user_message_id=row[0],
        history=(),  # a thread created just now has no history to read
        model=model.spec(),
        settings=turn_settings(),
    )


@functools.cache
def _thread_start_sql() -> tuple[str, list[models.Field]]:
    """A new thread and its first question in one statement (atomic by itself: no BEGIN/COMMIT
    round trips), with the default chat model it will generate with: the two INSERTs read from
    that model's row, so without one nothing is written. (SQL, the model's fields in column order);
    names spelled from the models' _meta once, so a model change cannot desync them."""
    model_fields = list(AllowedModel._meta.concrete_fields)
    model_columns = ", ".join(connection.ops.quote_name(f.column) for f in model_fields)
    thread_id, message_id = column(Conversation, "id"), column(Message, "id")
    sql = f"""
WITH model AS (
    SELECT {model_columns} FROM {table(AllowedModel)}
    WHERE {column(AllowedModel, "kind")} = '{ModelKind.CHAT.value}' AND {column(AllowedModel, "is_default")}
), thread AS (
    INSERT INTO {table(Conversation)} ({thread_id}, {column(Conversation, "user")}, {column(Conversation, "title")})
    SELECT %(id)s, %(user_id)s, %(title)s FROM model RETURNING {thread_id}
), question AS (
    INSERT INTO {table(Message)} ({column(Message, "conversation")}, {column(Message, "role")},
        {column(Message, "content")}, {column(Message, "state")})
    SELECT {thread_id}, '{Role.USER.value}', %(content)s, '{MessageState.COMPLETE.value}' FROM thread
    RETURNING {message_id}
)
SELECT question.{message_id}, model.* FROM model, question"""
    return sql, model_fields


@dataclass(frozen=True)
class _Said:
    """A message of the thread as the turn's start reads it."""

    id: int
    parent_id: int | None
    role: str
    content: str
    created_at: datetime
    chosen_at: datetime | None

    def node(self) -> Node:
        return Node(self.id, self.parent_id, self.created_at, self.chosen_at)


def _close_unanswered(conversation: Conversation, question_id: int) -> Message:
    """An empty failed answer under a question left without one (a dead turn, an old branch's)."""
    return Message.objects.create(
        conversation=conversation,
        role=Role.ASSISTANT,
        content="",
        tokens_used=0,
        state=MessageState.FAILED,
        parent_id=question_id,
    )


@transaction.atomic
def _turn_continue(
    *,
    user: User,
    content: str,
    conversation_id: uuid.UUID | str,
    regenerate_of: int | None = None,
    edit_of: int | None = None,
) -> TurnStart:
    # Locked: one turn at a time, and a delete racing the question is a clean 404.
    conversation = conversation_get_for_user(
        user=user, conversation_id=conversation_id, with_model=True, for_update=True
    )
    model = conversation_model(conversation)
    said = {
        row[0]: _Said(*row)
        for row in Message.objects.filter(conversation=conversation).values_list(
            "id", "parent_id", "role", "content", "created_at", "chosen_at"
        )
    }
    latest = said[max(said)] if said else None
    if latest is not None and latest.role == Role.USER:
        if latest.created_at > timezone.now() - _answer_window(model) and not _turn_abandoned(latest.id):
            # The thread's last question has no reply row yet: its answer is being written right now
            # (every turn ends with one, even an interrupted or failed one). One turn at a time.
            raise Conflict(
                _("В этой беседе ещё пишется ответ: дождитесь его или остановите."),
                code="turn_in_progress",
            )
        # Past its window the turn is dead (its process was killed mid-turn), or it said it ended
        # without storing its answer (the database was away): close it with an empty failed answer,
        # so no question stays without an answer row.
        closing = _close_unanswered(conversation, latest.id)
        said[closing.pk] = _Said(closing.pk, latest.id, Role.ASSISTANT, "", closing.created_at, None)
    nodes = [m.node() for m in said.values()]
    question: Message | None = None
    if regenerate_of is not None:  # the same question again: the path above it is the history
        answer = said.get(regenerate_of)
        if answer is None or answer.role != Role.ASSISTANT or answer.parent_id not in said:
            raise NotFound(_("Сообщение не найдено."))
        above = path_to(nodes, answer.parent_id)[:-1]
        asked = said[answer.parent_id]
        question_id, content = asked.id, asked.content
    else:
        if edit_of is not None:  # a new version of a question, beside it under the same parent
            edited = said.get(edit_of)
            if edited is None or edited.role != Role.USER:
                raise NotFound(_("Сообщение не найдено."))
            above = path_to(nodes, edited.parent_id) if edited.parent_id is not None else ()
        else:  # the next question follows the branch the reader sees
            above = active_branch(nodes).ids
            if above and said[above[-1]].role == Role.USER:  # an old branch's question left unanswered
                above = (*above, _close_unanswered(conversation, above[-1]).pk)
        question = Message(
            conversation=conversation, role=Role.USER, content=content, parent_id=above[-1] if above else None
        )
        question.save(root=not above)
        question_id = question.pk
    # Failed turns with no text (and empty interrupted ones) carry nothing for the model.
    # (only these two roles exist: conversations_message_role_valid)
    history = tuple(
        LLMMessage("user" if said[i].role == Role.USER else "assistant", said[i].content)
        for i in above[-HISTORY_LIMIT:]
        if i in said and said[i].content
    )
    return TurnStart(
        conversation_id=str(conversation.pk),
        created=False,
        user_message_id=question_id,
        history=history,
        model=model.spec(),
        settings=turn_settings(),
        content=content if regenerate_of is not None else None,
    )


def _answer_window(model: AllowedModel | ModelSpec) -> timedelta:
    """How long a question may wait for its reply row before its turn counts as dead (a process
    killed mid-turn writes none): two model rounds at their total timeout, and a margin."""
    spec = model.spec() if isinstance(model, AllowedModel) else model
    return timedelta(seconds=2 * Timeouts.from_spec(spec).total + 30)


def _abandoned_key(question_id: int) -> str:
    return f"conversations:turn_abandoned:{question_id}"


def turn_abandon(*, start: TurnStart) -> None:
    """Note (in the cache: the database is what is away) that ``start``'s turn ended without its
    answer row, so the thread's next turn closes the question at once instead of answering 409
    ``turn_in_progress`` until the answer window passes. Kept for that window; with Redis away too
    the note is lost and the window decides, as for a killed process."""
    cache.set(
        _abandoned_key(start.user_message_id),
        start.conversation_id,
        timeout=int(_answer_window(start.model).total_seconds()) + 60,
    )


def _turn_abandoned(question_id: int) -> bool:
    return cache.get(_abandoned_key(question_id)) is not None


ORPHAN_SWEEP_LOOKBACK = timedelta(days=1)


def unanswered_questions_close(*, now: datetime | None = None) -> int:
    """Close with an empty ``failed`` answer every thread whose last message is a question older
    than the longest answer window of any chat model: its turn died with its process (a killed web
    process writes no answer row). The periodic sweep; ``turn_start`` does the same for one thread.
    Each thread is locked and checked again, so a live turn's own answer is never doubled."""
    now = now or timezone.now()
    windows = [_answer_window(m) for m in AllowedModel.objects.filter(kind=ModelKind.CHAT)]
    cutoff = now - max(windows, default=timedelta(seconds=2 * Timeouts().total + 30))
    latest = Message.objects.filter(conversation=OuterRef("conversation")).order_by("-id").values("id")[:1]
    candidates = list(
        Message.objects.filter(role=Role.USER, created_at__lt=cutoff, created_at__gte=cutoff - ORPHAN_SWEEP_LOOKBACK)
        .annotate(latest=Subquery(latest))
        .filter(id=models.F("latest"))
        .values_list("conversation_id", flat=True)
    )
    closed = 0
    for conversation_id in candidates:
        with transaction.atomic():
            if not Conversation.objects.select_for_update().filter(pk=conversation_id).exists():
                continue
            last = (
                Message.objects.filter(conversation_id=conversation_id)
                .order_by("-id")
                .values_list("role", flat=True)
                .first()
            )
            if last != Role.USER:
                continue
            last_id = (
                Message.objects.filter(conversation_id=conversation_id).order_by("-id").values_list("id", flat=True)[0]
            )
            Message.objects.create(
                conversation_id=conversation_id,
                role=Role.ASSISTANT,
                content="",
                tokens_used=0,
                state=MessageState.FAILED,
                parent_id=last_id,
            )
            closed += 1
    return closed


def _title(content: str) -> str:
    line = " ".join(content.split())
    return line if len(line) <= TITLE_LENGTH else line[: TITLE_LENGTH - 1].rstrip() + "…"


# The answer in one statement (atomic by itself: no BEGIN/COMMIT round trips): the UPDATE that
# locks and bumps the thread, then the message, its citations and its trace, each fed by the step
# before it — a thread deleted meanwhile updates no row, so nothing at all is written.
# What a citation row takes from a CitationOut (the model's field names).
_CITATION_FIELDS = (
    "record_id",
    "chunk_id",
    "title",
    "url",
    "source_system",
    "chunk_text",
    "rank",
    "markers",
    "passages",
)


@dataclass(frozen=True)
class _FinalizeSql:
    answer: str  # the thread's UPDATE and the answer's INSERT (the CTEs ``thread``, ``answer``)
    citations: str  # ``, cited AS (…)``: the citations from the JSON array %(citations)s
    trace: str  # ``, traced AS (…)``: the trace from the %(trace_<field>)s parameters
    returning: str  # the final SELECT of the answer's id, created_at, updated_at
    citation_keys: dict[str, str]  # citation field → its key in the JSON array (its column)
    trace_fields: tuple[tuple[str, bool], ...]  # (trace field, a JSON column?) in column order


@functools.cache
def _finalize_sql() -> _FinalizeSql:
    """The finalize statement's parts, names spelled from the models' _meta once (a model change
    cannot silently desync them; ``test_turn_queries`` pins the statement)."""
    qn = connection.ops.quote_name
    thread_id, message_id = column(Conversation, "id"), column(Message, "id")
    message_columns = ", ".join(
        column(Message, name)
        for name in (
            "conversation",
            "role",
            "content",
            "model",
            "tokens_used",
            "input_tokens",
            "output_tokens",
            "state",
            "withheld_hint",
            "parent",
        )
    )
    stamps = f"{message_id}, {column(Message, 'created_at')}, {column(Message, 'updated_at')}"
    answer = f"""
WITH thread AS (
    UPDATE {table(Conversation)} SET {column(Conversation, "updated_at")} = STATEMENT_TIMESTAMP()
    WHERE {thread_id} = %(conversation_id)s RETURNING {thread_id}
), answer AS (
    INSERT INTO {table(Message)} ({message_columns})
    SELECT {thread_id}, '{Role.ASSISTANT.value}', %(content)s, %(model)s, %(tokens_used)s,
        %(input_tokens)s, %(output_tokens)s, %(state)s, %(withheld_hint)s, %(question_id)s
    FROM thread
    RETURNING {stamps}
)"""
    cited_columns = [column(Citation, name) for name in _CITATION_FIELDS]
    record = ", ".join(
        f"{column(Citation, name)} {concrete_field(Citation, name).db_type(connection)}" for name in _CITATION_FIELDS
    )
    citations = f""", cited AS (
    INSERT INTO {table(Citation)} ({column(Citation, "message")}, {", ".join(cited_columns)})
    SELECT answer.{message_id}, {", ".join(f"c.{c}" for c in cited_columns)}
    FROM answer, jsonb_to_recordset(%(citations)s) AS c({record})
)"""
    # Every column of the trace but its key, its message and its timestamps: what TraceDraft.columns() gives.
    trace_fields = [
        f for f in RetrievalTrace._meta.concrete_fields if f.name not in ("id", "message", "created_at", "updated_at")
    ]
    trace = f""", traced AS (
    INSERT INTO {table(RetrievalTrace)} ({column(RetrievalTrace, "message")}, {", ".join(qn(f.column) for f in trace_fields)})
    SELECT answer.{message_id}, {", ".join(f"%(trace_{f.name})s" for f in trace_fields)}
    FROM answer
)"""
    return _FinalizeSql(
        answer=answer,
        citations=citations,
        trace=trace,
        returning=f" SELECT {stamps} FROM answer",
        citation_keys={name: column_name(Citation, name) for name in _CITATION_FIELDS},
        trace_fields=tuple((f.name, isinstance(f, models.JSONField)) for f in trace_fields),
    )


def message_finalize(
    *,
    conversation_id: str,
    content: str,
    model_name: str,
    tokens_used: int,
    state: str,
    citations: Sequence[CitationOut] = (),
    trace: TraceDraft | None = None,
    withheld_hint: WithheldHint | None = None,
    tokens_split: tuple[int, int] | None = None,
    question_id: int | None = None,
) -> Message:
    """Write the assistant message, its citations and its trace in one statement (never half-written).

    The thread's row is locked first — by the UPDATE that moves it to the top of the list (any
    UPDATE bumps ``updated_at``, trigger), one step for the lock and the bump: a delete racing
    the answer either happened (404 ``conversation_deleted``, the question went with it) or waits
    for this commit and cascades it. The database's CHECKs and FKs hold for every row as for the
    ORM's INSERTs; the returned message carries the columns written.
    """
    tokens = max(0, int(tokens_used))
    # The split as the provider reported it (input, output); kept only when it adds up to the total.
    split = (max(0, int(tokens_split[0])), max(0, int(tokens_split[1]))) if tokens_split is not None else None
    if split is not None and sum(split) != tokens:
        split = None
    hint = withheld_hint.as_dict() if withheld_hint is not None else None
    params: dict[str, Any] = {
        "conversation_id": conversation_id,
        "content": content,
        "model": model_name,
        "tokens_used": tokens,
        "input_tokens": split[0] if split else None,
        "output_tokens": split[1] if split else None,
        "state": state,
        "withheld_hint": Jsonb(hint) if hint is not None else None,
        "question_id": question_id,  # the answer's parent: the question it answers
    }
    parts = _finalize_sql()
    sql = parts.answer
    if citations:
        sql += parts.citations
        keys = parts.citation_keys
        params["citations"] = Jsonb(
            [
                {
                    keys["record_id"]: c.record_id,
                    keys["chunk_id"]: c.chunk_id,
                    keys["title"]: c.title[:500],
                    keys["url"]: c.url,
                    keys["source_system"]: c.source_system,
                    keys["chunk_text"]: c.chunk_text,
                    keys["rank"]: c.rank,
                    keys["markers"]: list(c.markers),
                    keys["passages"]: [p.as_dict() for p in c.passages],
                }
                for c in citations
            ]
        )
    if trace is not None:
        sql += parts.trace
        columns = trace.columns()  # a trace column the draft does not give: KeyError, not a NULL
        params.update(
            {
                f"trace_{name}": Jsonb(columns[name]) if is_json else columns[name]
                for name, is_json in parts.trace_fields
            }
        )
    with connection.cursor() as cursor:
        cursor.execute(sql + parts.returning, params)
        row = cursor.fetchone()
    if row is None:
        raise NotFound(_("Беседу удалили, пока писался ответ."), code="conversation_deleted")
    message = Message(
        id=row[0],
        conversation_id=conversation_id,
        role=Role.ASSISTANT,
        content=content,
        model=model_name,
        tokens_used=tokens,
        input_tokens=split[0] if split else None,
        output_tokens=split[1] if split else None,
        state=state,
        withheld_hint=hint,
        parent_id=question_id,
        created_at=row[1],
        updated_at=row[2],
    )
    message._state.adding = False
    message._state.db = connection.alias
    return message


def contacts_for(user_ids: Iterable[int]) -> dict[int, Contact]:
    """Existing, active users among ``user_ids`` (withheld-hint contacts)."""
    ids = {i for i in user_ids if i is not None}
    if not ids:
        return {}
    return {
        row.pk: Contact(user_id=row.pk, username=row.username, name=row.get_full_name())
        for row in User.objects.filter(pk__in=ids, is_active=True)
    }


@transaction.atomic
def conversation_update(*, user: User, conversation_id: uuid.UUID | str, fields: dict[str, Any]) -> Conversation:
    """Rename and/or switch the model (validated against the chat allow-list; NULL → default)."""
    conversation = conversation_get_for_user(user=user, conversation_id=conversation_id, for_update=True)
    update_fields = []
    if "title" in fields:
        try:  # trimmed, with a visible character (no title of zero-width or RTL marks)
            title = name_clean(fields["title"] or "")
        except ValueError as exc:
            raise ValidationFailed(f"title {exc}", field="title") from exc
        conversation.title = title[:200]
        update_fields.append("title")
    if "selected_model" in fields:
        name = fields["selected_model"]
        conversation.selected_model = (
            None if name is None else allowed_model_get(name=name, kind="chat", field="selected_model")
        )
        update_fields.append("selected_model")
    if update_fields:
        conversation.save(update_fields=update_fields)
        conversation.refresh_from_db()
    return conversation


@transaction.atomic
def conversation_delete(*, user: User, conversation_id: uuid.UUID | str) -> None:
    conversation = conversation_get_for_user(user=user, conversation_id=conversation_id)
    # One DELETE: messages, traces and citations go by ON DELETE CASCADE in the database.
    Conversation.objects.filter(pk=conversation.pk).delete()


@transaction.atomic
def message_feedback_set(*, user: User, message_id: int, value: int | None) -> Message:
    """Set or clear feedback in place; only assistant messages take it (the DB CHECK agrees)."""
    message = message_get_for_user(user=user, message_id=message_id, for_update=True)
    # In place: one UPDATE of one column; content and role are never rewritten.
    Message.objects.filter(pk=message.pk).update(**feedback_update(role=message.role, value=value))
    message.refresh_from_db()
    return message


def citation_for_click(*, user: User, message_id: int, record_id: int) -> Citation:
    message = message_get_for_user(user=user, message_id=message_id)
    citation = Citation.objects.filter(message=message, record_id=record_id).first()
    if citation is None:
        raise NotFound(_("Источник не найден."))
    return citation


@transaction.atomic
def message_choose(*, user: User, message_id: int) -> Message:
    """Flip the thread to this version of a message (a regenerated answer, an edited question): the
    branch through it is shown until a newer version comes (``conversations.branches``)."""
    message = message_get_for_user(user=user, message_id=message_id, for_update=True)
    Message.objects.filter(pk=message.pk).update(chosen_at=Now())
    message.refresh_from_db()
    return message


# --- sharing: a thread read-only for chosen colleagues ------------------------------------------


@transaction.atomic
def conversation_share_add(*, user: User, conversation_id: uuid.UUID | str, username: str) -> ConversationShare:
    """Share the user's thread with a colleague (an active account other than the owner); sharing
    again with the same colleague keeps the first share (idempotent)."""
    conversation = conversation_get_for_user(user=user, conversation_id=conversation_id, for_update=True)
    reader = User.objects.filter(username=username.strip(), is_active=True).first()
    if reader is None:
        raise NotFound(_("Нет активного сотрудника с таким логином."), code="user_not_found")
    if reader.pk == user.pk:
        raise ValidationFailed(_("Это ваша беседа."), field="username", code="share_with_owner")
    share, created = ConversationShare.objects.get_or_create(conversation=conversation, reader=reader)
    if created:
        _notify_reader_of_share(conversation=conversation, owner=user, reader=reader)
    return share


def _notify_reader_of_share(*, conversation: Conversation, owner: User, reader: User) -> None:
    """The colleague's notice that a thread was shared with them (the bell, e-mail when they opted in),
    in their own interface language; written after commit, so a rolled-back share leaves none."""
    owner_name = owner.get_full_name() or owner.username
    with translation.override(reader.language or settings.LANGUAGE_CODE):
        title = _("%(owner)s открывает вам тред «%(title)s»") % {
            "owner": owner_name,
            "title": conversation.title or _("Без названия"),
        }
        body = _("Тред открыт вам только для чтения; источники вы увидите по своим правам доступа.")
    notify_on_commit(
        user_id=reader.pk,
        kind=Notification.Kind.THREAD_SHARED,
        title=title,
        body=body,
        link=f"/chat/shared/{conversation.pk}/",
    )


@transaction.atomic
def conversation_share_remove(*, user: User, conversation_id: uuid.UUID | str, reader_id: int) -> None:
    """Revoke a colleague's reading of the user's thread (404 when it was not shared with them)."""
    conversation = conversation_get_for_user(user=user, conversation_id=conversation_id)
    deleted, _kinds = ConversationShare.objects.filter(conversation=conversation, reader_id=reader_id).delete()
    if not deleted:
        raise NotFound(_("Этому сотруднику беседа не открыта."))
