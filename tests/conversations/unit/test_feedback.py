"""Оценка ответа: CHECK ±1, in-place правка, только assistant (seed: test_feedback.py).

These unit tests pin the rule and the declared constraints; the database itself refusing a bad
value, the UPDATE in place and updated_at moved by the trigger are proven against PostgreSQL in
integration/test_db_invariants.py (test_feedback_check_rejected_by_the_database, …).
"""

import pytest
from pydantic import ValidationError

from achilles.errors import ValidationFailed
from conversations.models import Message
from conversations.rules import feedback_update
from conversations.schemas import FeedbackIn

pytestmark = [pytest.mark.unit]


def _check(name):
    return next(c for c in Message._meta.constraints if c.name == name)


def test_check_rejects_outside_plus_minus_one():
    """CHECK — вне {-1, 1} отбито: на уровне БД (CHECK объявлен), не только кодом; NULL допустим."""
    constraint = _check("conversations_message_feedback_values")
    assert "feedback__in" in str(constraint.condition) and "feedback__isnull" in str(constraint.condition)
    for bad in (0, 2, -2):
        with pytest.raises(ValidationError):
            FeedbackIn(value=bad)
        with pytest.raises(ValidationFailed):
            feedback_update(role="assistant", value=bad)
    assert feedback_update(role="assistant", value=None) == {"feedback": None}


def test_changing_rating_is_an_in_place_update():
    """смена оценки — in-place UPDATE: переоценка правит feedback той же строки, новой реплики нет."""
    assert feedback_update(role="assistant", value=1) == {"feedback": 1}
    assert feedback_update(role="assistant", value=-1) == {"feedback": -1}
    import inspect

    from conversations import services

    body = inspect.getsource(services.message_feedback_set)
    assert ".update(" in body and ".create(" not in body and ".save(" not in body


def test_only_on_assistant_message():
    """только на assistant-сообщении: попытка оценить user-сообщение не принимается."""
    with pytest.raises(ValidationFailed) as refused:
        feedback_update(role="user", value=1)
    assert refused.value.code == "feedback_on_user_message"
    assert "role" in str(_check("conversations_message_feedback_assistant_only").condition)


def test_body_and_role_unchanged():
    """тело и роль при оценке неизменны: правка трогает только feedback."""
    assert set(feedback_update(role="assistant", value=1)) == {"feedback"}
