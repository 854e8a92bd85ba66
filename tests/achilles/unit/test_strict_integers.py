"""Integers in request bodies are JSON integers: a boolean, a string or a fraction is a 422, never
taken for a number (the fuzzer's ``{"debounce_seconds": false}`` was stored as 0, and pydantic's
lax mode takes ``true`` for 1 wherever 1 is allowed: a search's ``k``, a connector's schedule, a
feedback's value)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from agents.schemas import CalendarSchedule, IntervalSchedule, SubscriptionIn
from conversations.schemas import AccessRequestIn, ChatIn, FeedbackIn
from hub.schemas import ClaimIn, PublicationIn, RateLimitedIn, ResultIn, SyncRunFinishIn, UpdateIn, UploadIn
from knowledge.api import SearchIn
from knowledge.connectors.api import ConnectorIn, ConnectorPatch

CONNECTOR = {"name": "Wiki", "base_url": "https://wiki.example.com", "token": "t", "spaces": ["HR"]}
CLAIM = {"version": 3}
RESULT = {"command_id": 1, "lease_token": "x", "status": "done"}

CASES = [
    (IntervalSchedule, {"type": "interval"}, "every_minutes", 5),
    (CalendarSchedule, {"type": "calendar", "time": "09:30"}, "weekday", 2),
    (SubscriptionIn, {"events": ["created"]}, "debounce_seconds", 5),
    (ChatIn, {"content": "вопрос"}, "regenerate_of", 5),
    (ChatIn, {"content": "вопрос"}, "edit_of", 5),
    (FeedbackIn, {}, "value", 1),
    (FeedbackIn, {}, "value", -1),
    (AccessRequestIn, {"source_system": "confluence"}, "contact_id", 5),
    (SearchIn, {"query": "отпуск"}, "k", 1),
    (SearchIn, {"query": "отпуск"}, "as_user_id", 5),
    (ConnectorIn, CONNECTOR, "schedule_minutes", 1),
    (ConnectorIn, CONNECTOR, "permission_sync_minutes", 1),
    (ConnectorPatch, {}, "schedule_minutes", 1),
    (ConnectorPatch, {}, "permission_sync_minutes", 1),
    (PublicationIn, {"artifact_base64": "AA=="}, "version", 1),
    (ClaimIn, {}, "version", 1),
    (ClaimIn, CLAIM, "launcher_version", 1),
    (ClaimIn, CLAIM, "max_commands", 1),
    (ClaimIn, CLAIM, "settings_version", 1),
    (UpdateIn, {"state": "done"}, "from_version", 1),
    (UpdateIn, {"state": "done"}, "to_version", 1),
    (ResultIn, {k: v for k, v in RESULT.items() if k != "command_id"}, "command_id", 1),
    (UploadIn, {"issues": []}, "sync_run_id", 1),
]


@pytest.mark.parametrize(("schema", "base", "field", "good"), CASES)
@pytest.mark.parametrize("bad", [False, True, "1", 1.0, 5.5])
def test_a_non_integer_is_refused(schema, base, field, good, bad):
    assert getattr(schema.model_validate({**base, field: good}), field) == good
    with pytest.raises(ValidationError):
        schema.model_validate({**base, field: bad})


def test_a_counter_of_a_sync_run_is_an_integer():
    assert SyncRunFinishIn.model_validate({"status": "ok", "counts": {"upserted": 1}}).counts == {"upserted": 1}
    for bad in (True, "1", 1.0):
        with pytest.raises(ValidationError):
            SyncRunFinishIn.model_validate({"status": "ok", "counts": {"upserted": bad}})


def test_a_retry_after_is_a_number_not_a_boolean():
    at = "2026-12-05T09:00:00.000+0000"
    assert RateLimitedIn.model_validate({"at": at, "retry_after_seconds": 1}).retry_after_seconds == 1.0
    assert RateLimitedIn.model_validate({"at": at, "retry_after_seconds": 1.5}).retry_after_seconds == 1.5
    for bad in (True, "1"):
        with pytest.raises(ValidationError):
            RateLimitedIn.model_validate({"at": at, "retry_after_seconds": bad})
