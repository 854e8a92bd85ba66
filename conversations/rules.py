"""Pure rules behind conversation edits: model choice (QE-13) and feedback (QE-14). No ORM."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeVar

from achilles.errors import ServiceUnavailable, ValidationFailed
from achilles.selectors import allowed_model_check

T = TypeVar("T")

FEEDBACK_VALUES = (-1, 1, None)


def resolve_selected_model(name: str | None, allowed_chat_models: Mapping[str, T]) -> T | None:
    """The allow-list row for a requested model name; None clears the choice (→ default).

    A name outside the admin's allow-list of chat models is refused (422 ``unknown_model``, the
    allow-list's one vocabulary: ``achilles.selectors``) and never stored.
    """
    if name is None:
        return None
    model = allowed_chat_models.get(name)
    if model is None:
        return allowed_model_check(name, None, field="selected_model")  # raises unknown_model
    return model


def effective_model(selected: T | None, default: T | None) -> T:
    """Intent → what generates: the thread's selection, else the default chat model."""
    model = selected if selected is not None else default
    if model is None:
        raise ServiceUnavailable(
            "no chat model is configured; an admin must add one to the allow-list", code="no_default_model"
        )
    return model


def feedback_update(*, role: str, value: int | None) -> dict:
    """The one column a rating changes; user messages take no rating."""
    if value not in FEEDBACK_VALUES or isinstance(value, bool):
        raise ValidationFailed("value is -1, 1 or null", field="value")
    if role != "assistant":
        raise ValidationFailed(
            "only assistant messages take feedback", field="message_id", code="feedback_on_user_message"
        )
    return {"feedback": value}
