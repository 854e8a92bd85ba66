"""Choices of the Query Engine tables."""

from django.db import models


class Role(models.TextChoices):
    USER = "user", "user"
    ASSISTANT = "assistant", "assistant"


class MessageState(models.TextChoices):
    COMPLETE = "complete", "complete"
    INTERRUPTED = "interrupted", "interrupted"  # the client went away mid-stream
    FAILED = "failed", "failed"  # the model provider failed mid-turn
