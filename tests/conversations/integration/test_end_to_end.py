"""End to end on the real Knowledge Store: the demo corpus, the offline ``builtin`` model, the
Redis candidate cache — nothing stubbed. A grounded answer with citations, «не нашёл» for an
absent fact, a withheld hint for a document only finance can read."""

import re

import pytest
from django.core.management import call_command
from django.test import Client

from achilles.llm import NOT_FOUND_TEXT
from conversations import pipeline
from conversations.models import Message, RetrievalTrace
from tests.conversations.conftest import run_turn

pytestmark = [pytest.mark.integration, pytest.mark.p1]


@pytest.fixture
def demo_knowledge(db, model_factory, user_factory):
    pipeline.set_engine_deps(None)  # the real facade, the real cache
    model_factory(name="builtin-extractive", provider="builtin", is_default=True)
    user_factory(username="admin", first_name="Анна", last_name="Админова")  # authors of the corpus
    user_factory(username="demo")
    call_command("demo_knowledge", stdout=open("/dev/null", "w"))  # noqa: SIM115


def test_grounded_answer_with_citations(demo_knowledge, user_factory):
    employee = user_factory(username="petrov", groups=["it"])

    outcome = run_turn(employee, "Сколько дней ежегодного оплачиваемого отпуска положено сотруднику?")

    assert outcome.error is None
    assert "28 календарных дней" in outcome.text
    titles = [c["title"] for c in outcome.done.citations]
    assert "Ежегодный оплачиваемый отпуск" in titles
    message = Message.objects.get(pk=outcome.done.message_id)
    assert message.model == "builtin-extractive" and message.tokens_used > 0
    trace = RetrievalTrace.objects.get(message=message)
    assert trace.packed and trace.ungrounded_sentences == []
    assert f"user:{employee.pk}" in trace.identity["principals"]
    # every [N] of the answer belongs to exactly one stored citation, so a reloaded thread labels them alike
    stored = {marker for citation in message.citations.all() for marker in citation.markers}
    assert stored and stored == {int(n) for n in re.findall(r"\[(\d+)\]", outcome.text)}


def test_absent_fact_not_found(demo_knowledge, user_factory):
    employee = user_factory(username="petrov", groups=["it"])

    outcome = run_turn(employee, "Сколько спутников у Юпитера?")

    assert NOT_FOUND_TEXT in outcome.text
    assert outcome.done.citations == []


def test_finance_only_document_gives_a_withheld_hint(demo_knowledge, user_factory):
    employee = user_factory(username="petrov", groups=["it"])
    accountant = user_factory(username="buh", groups=["finance"])
    question = "Какой план выручки заложен в бюджет компании на 2026 год?"

    hidden = run_turn(employee, question)
    visible = run_turn(accountant, question)

    assert hidden.done.withheld_hint is not None
    assert "1,8 млрд" not in hidden.text
    hint = hidden.done.withheld_hint
    assert all(set(s) <= {"source_system", "contact"} for s in hint["sources"])
    assert {s.get("contact", {}).get("username") for s in hint["sources"]} >= {"admin"}  # author mapped to a user
    assert "Бюджет компании на 2026 год" not in str(hidden.done.payload())
    assert "1,8 млрд" in visible.text
    assert "Бюджет компании на 2026 год" in [c["title"] for c in visible.done.citations]


def test_a_revoked_document_is_not_served_from_the_candidate_cache(demo_knowledge, user_factory):
    from django.db import connection

    from knowledge.models import Record

    employee = user_factory(username="petrov", groups=["it"])
    question = "Сколько дней ежегодного оплачиваемого отпуска положено сотруднику?"
    vacation = Record.objects.get(title="Ежегодный оплачиваемый отпуск")

    first = run_turn(employee, question)
    repeat = run_turn(employee, question)
    assert vacation.pk in {c["record_id"] for c in first.done.citations}
    assert [_trace(first).cache_hit, _trace(repeat).cache_hit] == [False, True]  # the cache answers a repeat

    # when the document is closed to everyone but finance (straight in the database)
    with connection.cursor() as cursor:
        cursor.execute("UPDATE knowledge_records SET acl = '{group:finance}' WHERE id = %s", [vacation.pk])
    after = run_turn(employee, question)

    # then the cached candidates are not reused: the store is searched again and the text is gone
    assert _trace(after).cache_hit is False
    assert vacation.pk not in {c["record_id"] for c in after.done.citations}
    assert "Ежегодный оплачиваемый отпуск" not in str(after.done.payload())
    # and the earlier answer, read back, keeps the citation's place but no longer its copy of the text
    client = Client()
    client.force_login(employee)
    thread = client.get(f"/api/conversations/{first.conversation_id}").json()
    [old] = [c for c in thread["messages"]["items"][1]["citations"] if c["record_id"] == vacation.pk]
    assert (old["available"], old["title"], old["chunk_text"]) == (False, "", "")
    assert client.post(f"/api/messages/{first.done.message_id}/citations/{vacation.pk}/click").status_code == 404


def _trace(outcome) -> RetrievalTrace:
    return RetrievalTrace.objects.get(message_id=outcome.done.message_id)
