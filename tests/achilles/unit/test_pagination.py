"""The list contract's cursor (``achilles.pagination``): exact keysets, bound to their list."""

from __future__ import annotations

import datetime as dt
import uuid

import pytest

from achilles.pagination import BadCursor, cursor_decode, cursor_encode
from conversations.models import Conversation

KEYS = ("-updated_at", "-id")


def _row(at: dt.datetime) -> Conversation:
    return Conversation(id=uuid.UUID("6f1c1d2e-0000-4000-8000-00000000000a"), updated_at=at)


def test_a_cursor_carries_its_keyset_to_the_microsecond():
    """Rows a microsecond apart must stay apart: a keyset cut to milliseconds (Django's JSON
    encoder) would skip or repeat them across pages."""
    at = dt.datetime(2026, 11, 30, 12, 0, 0, 123456, tzinfo=dt.UTC)
    cursor = cursor_encode(_row(at), scope="conversations", keys=KEYS)
    assert cursor_decode(cursor, scope="conversations", model=Conversation, keys=KEYS) == [at, _row(at).id]


def test_a_cursor_is_url_safe_and_opaque():
    cursor = cursor_encode(_row(dt.datetime(2026, 1, 1, tzinfo=dt.UTC)), scope="conversations", keys=KEYS)
    assert set(cursor) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.")


@pytest.mark.parametrize("change", ["another list", "other keys", "tampered", "truncated"])
def test_a_cursor_of_another_list_or_changed_is_bad_cursor(change):
    cursor = cursor_encode(_row(dt.datetime(2026, 1, 1, tzinfo=dt.UTC)), scope="conversations", keys=KEYS)
    scope, keys = "conversations", KEYS
    if change == "another list":
        scope = "tokens"
    elif change == "other keys":
        keys = ("-id",)
    elif change == "tampered":
        cursor = ("B" if cursor[0] != "B" else "C") + cursor[1:]
    else:
        cursor = cursor[:-3]
    with pytest.raises(BadCursor) as raised:
        cursor_decode(cursor, scope=scope, model=Conversation, keys=keys)
    assert (raised.value.status, raised.value.code, raised.value.field) == (422, "bad_cursor", "cursor")
