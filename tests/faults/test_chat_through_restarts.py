"""Chat streams through a PostgreSQL restart and Redis stopping (issue 10, finding 5): every turn
ends with ``done`` or ``error``, its answer row is written, and its thread takes the next turn."""

from __future__ import annotations

import threading
import time

import pytest

from conversations.models import Message
from tests.conversations.http import bearer
from tests.conversations.integration.test_stream_ends import sse_events
from tests.llm_fake import Delay, answer
from tests.processes import database_reconnect, postgres_start, postgres_stop

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def restarting_postgres_then(text: str, down_for: float = 3.0):
    """A model round during which PostgreSQL stops (every session cut) and comes back."""

    def round_(call):
        def restart():
            postgres_stop()
            time.sleep(down_for)
            postgres_start()

        threading.Thread(target=restart, daemon=True).start()
        return [Delay(0.5), *answer(text), Delay(1.0)]

    return round_


def test_a_postgres_restart_mid_stream_still_stores_the_answer_and_frees_the_thread(engine, user):
    """Failed before the fix: the answer's write hit the dead session, the stream ended with neither
    ``done`` nor ``error``, and the thread answered 409 turn_in_progress for ~10 minutes."""
    headers = bearer(user)
    engine.script(restarting_postgres_then("Ответ пережил рестарт."), answer("Следующий ответ."))

    first = sse_events(headers, {"content": "Вопрос"}, timeout=60)
    database_reconnect()  # this test's own sessions went with the restart

    assert first[-1][0] == "done", first[-1]
    done = first[-1][1]
    assert Message.objects.get(pk=done["message_id"]).content == "Ответ пережил рестарт."
    second = sse_events(headers, {"content": "Ещё вопрос", "conversation_id": done["conversation_id"]}, timeout=30)
    assert second[-1][0] == "done"
    roles = list(
        Message.objects.filter(conversation_id=done["conversation_id"]).order_by("id").values_list("role", flat=True)
    )
    assert roles == ["user", "assistant", "user", "assistant"]
