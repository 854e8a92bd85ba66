"""Integers in request bodies are JSON integers: a boolean, a string or a fraction is a 422, never
taken for a number (the fuzzer's ``{"debounce_seconds": false}`` was stored as 0)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from agents.schemas import CalendarSchedule, IntervalSchedule, SubscriptionIn
from conversations.schemas import ChatIn

CASES = [
    (IntervalSchedule, {"type": "interval"}, "every_minutes", 5),
    (CalendarSchedule, {"type": "calendar", "time": "09:30"}, "weekday", 2),
    (SubscriptionIn, {"events": ["created"]}, "debounce_seconds", 5),
    (ChatIn, {"content": "вопрос"}, "regenerate_of", 5),
    (ChatIn, {"content": "вопрос"}, "edit_of", 5),
]


@pytest.mark.parametrize(("schema", "base", "field", "good"), CASES)
@pytest.mark.parametrize("bad", [False, True, "5", 5.5])
def test_a_non_integer_is_refused(schema, base, field, good, bad):
    assert getattr(schema.model_validate({**base, field: good}), field) == good
    with pytest.raises(ValidationError):
        schema.model_validate({**base, field: bad})
