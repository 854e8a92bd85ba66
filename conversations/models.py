"""Query Engine tables: conversations, messages, retrieval traces and citations (SPEC §4).

The invariants live in the database: role/state/feedback CHECKs, feedback only on assistant
rows, one trace per message (UNIQUE), FK cascades at DB level (see migration 0002).
"""

from __future__ import annotations

import uuid

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.db import models
from django.db.models import Q

from achilles.models import TimestampedModel
from conversations.choices import MessageState, Role


class Conversation(TimestampedModel):
    """A chat thread of one user; born on its first message (QE-1), never expires from idleness."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.DO_NOTHING, related_name="conversations")
    title = models.CharField(max_length=200, blank=True, default="")
    # Intent: what to generate with next (NULL → the default chat model). The fact is messages.model.
    selected_model = models.ForeignKey(
        "achilles.AllowedModel", null=True, blank=True, on_delete=models.DO_NOTHING, related_name="+"
    )

    class Meta:
        db_table = "conversations"
        indexes = [models.Index(fields=["user", "-updated_at", "-id"], name="conversations_user_recent")]

    def __str__(self) -> str:
        return self.title or str(self.id)


class Message(TimestampedModel):
    """One message of a thread; assistant rows carry the model that generated them and tokens used."""

    conversation = models.ForeignKey(Conversation, on_delete=models.DO_NOTHING, related_name="messages")
    role = models.CharField(max_length=16, choices=Role.choices)
    content = models.TextField(blank=True, default="")
    model = models.CharField(max_length=100, null=True, blank=True, help_text="Fact: the model that generated it.")
    tokens_used = models.PositiveIntegerField(null=True, blank=True, help_text="Input + output of the whole turn.")
    # The split of tokens_used, stored since «Расходы AI»; older answers carry the total only (NULL).
    input_tokens = models.PositiveIntegerField(null=True, blank=True)
    output_tokens = models.PositiveIntegerField(null=True, blank=True)
    feedback = models.SmallIntegerField(null=True, blank=True)
    state = models.CharField(max_length=16, choices=MessageState.choices, default=MessageState.COMPLETE)
    withheld_hint = models.JSONField(null=True, blank=True)
    # The thread is a tree: a question's parent is the answer it follows (NULL: the thread's first
    # question), an answer's the question it answers. Regenerating an answer or editing a question
    # adds a sibling beside it; the versions stay and the reader flips between them.
    parent = models.ForeignKey(
        "self",
        null=True,
        blank=True,
        on_delete=models.DO_NOTHING,
        related_name="+",
        db_index=False,  # messages_parent (partial, built concurrently: migration 0007) serves it
        help_text="the message it follows",
    )
    # When the reader last flipped to this version: among siblings the latest of created_at and
    # chosen_at is the one shown (conversations.branches), so a new version is shown at once.
    chosen_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "messages"
        ordering = ["id"]
        indexes = [
            models.Index(fields=["conversation", "id"], name="messages_conversation_order"),
            models.Index(fields=["parent"], name="messages_parent", condition=Q(parent__isnull=False)),
        ]
        constraints = [
            # The rest of the tree's rules (the parent in the same thread, questions and answers
            # alternating) need the parent's row: the trigger of migration 0006 holds them.
            models.CheckConstraint(
                condition=Q(parent__isnull=True) | ~Q(parent=models.F("id")),
                name="conversations_message_parent_not_self",
                violation_error_message="A message cannot follow itself.",
            ),
            models.CheckConstraint(
                condition=Q(role__in=["user", "assistant"]),
                name="conversations_message_role_valid",
                violation_error_message="role is user or assistant.",
            ),
            models.CheckConstraint(
                condition=Q(state__in=["complete", "interrupted", "failed"]), name="conversations_message_state_valid"
            ),
            models.CheckConstraint(
                condition=Q(feedback__isnull=True) | Q(feedback__in=[-1, 1]),
                name="conversations_message_feedback_values",
                violation_error_message="feedback is -1, 1 or empty.",
            ),
            models.CheckConstraint(
                condition=Q(feedback__isnull=True) | Q(role="assistant"),
                name="conversations_message_feedback_assistant_only",
                violation_error_message="Only assistant messages take feedback.",
            ),
            models.CheckConstraint(
                condition=Q(tokens_used__isnull=True) | Q(role="assistant"),
                name="conversations_message_tokens_assistant_only",
            ),
            # A split is whole or absent, and adds up to the total the budget and the report count.
            models.CheckConstraint(
                condition=Q(input_tokens__isnull=True, output_tokens__isnull=True)
                | Q(
                    input_tokens__isnull=False,
                    output_tokens__isnull=False,
                    tokens_used=models.F("input_tokens") + models.F("output_tokens"),
                ),
                name="conversations_message_split_adds_up",
                violation_error_message="input_tokens + output_tokens is tokens_used.",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.role}: {self.content[:60]}"

    def save(self, *args, root: bool = False, **kwargs) -> None:
        """A message added without a parent follows the thread's last message of the other role (the
        thread as a line, as before it was a tree; a second answer in a row becomes a version of the
        first, a message with none of the other role before it a root); ``root=True`` keeps it a root
        (an edit of the first question)."""
        if self._state.adding and self.parent_id is None and not root:
            self.parent_id = (
                Message.objects.filter(conversation_id=self.conversation_id)
                .exclude(role=self.role)
                .order_by("-id")
                .values_list("id", flat=True)
                .first()
            )
        super().save(*args, **kwargs)


class RetrievalTrace(TimestampedModel):
    """What one grounding turn retrieved, packed and withheld; at most one per message (QE-12)."""

    message = models.ForeignKey(Message, on_delete=models.DO_NOTHING, related_name="+")
    standalone_query = models.TextField()
    identity = models.JSONField(help_text="principals and user_id the KS call ran under")
    candidates = models.JSONField(default=list)
    packed = models.JSONField(default=list)
    withheld = models.JSONField(default=list)
    web_results = models.JSONField(default=list)
    cache_hit = models.BooleanField(default=False)
    timings = models.JSONField(default=dict)
    ungrounded_sentences = models.JSONField(
        default=list,
        help_text="sentences the support check refused (never streamed nor stored): "
        "{sentence, reason, markers, missing?, overlap?}",
    )

    class Meta:
        db_table = "retrieval_trace"
        constraints = [
            models.UniqueConstraint(
                fields=["message"],
                name="conversations_retrievaltrace_one_per_message",
                violation_error_message="A message has at most one retrieval trace.",
            ),
        ]


class Citation(TimestampedModel):
    """A record-level source of an assistant answer, with the best packed chunk kept (QE-10)."""

    message = models.ForeignKey(Message, on_delete=models.DO_NOTHING, related_name="citations")
    record_id = models.BigIntegerField(null=True, blank=True, help_text="KS record; NULL for a web result")
    chunk_id = models.BigIntegerField(null=True, blank=True)
    title = models.CharField(max_length=500, blank=True, default="")
    url = models.TextField(blank=True, default="")
    source_system = models.CharField(max_length=64)
    chunk_text = models.TextField(blank=True, default="")
    rank = models.PositiveIntegerField(help_text="1 = the leading source")
    markers = ArrayField(
        models.PositiveSmallIntegerField(),
        default=list,
        blank=True,
        help_text="the [N] markers of the answer that point at this source",
    )
    passages = models.JSONField(
        default=list,
        blank=True,
        help_text="per marker, the chunk it points to: [{marker, chunk_id, text}] (chunk_text is the best one)",
    )

    class Meta:
        db_table = "message_citations"
        ordering = ["message_id", "rank"]
        constraints = [
            models.UniqueConstraint(fields=["message", "rank"], name="conversations_citation_rank_unique"),
            models.UniqueConstraint(
                fields=["message", "record_id"],
                condition=Q(record_id__isnull=False),
                name="conversations_citation_record_once",
            ),
        ]


class ConversationShare(TimestampedModel):
    """A colleague who may read a thread, read-only; the cited sources stay under the reader's own access."""

    conversation = models.ForeignKey(Conversation, on_delete=models.DO_NOTHING, related_name="shares")
    reader = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.DO_NOTHING, related_name="+")

    class Meta:
        db_table = "conversation_shares"
        ordering = ["conversation_id", "id"]
        indexes = [models.Index(fields=["reader", "-created_at"], name="conversation_shares_reader")]
        constraints = [
            models.UniqueConstraint(
                fields=["conversation", "reader"],
                name="conversations_share_once",
                violation_error_message="The thread is already shared with this colleague.",
            ),
        ]
