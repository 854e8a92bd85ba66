"""Решение о поиске: разговор vs grounding (seed: test_route.py)."""

import pytest

from conversations.models import RetrievalTrace
from conversations.tools import SEARCH_KNOWLEDGE, WEB_SEARCH, plan_tool_round, tool_set
from conversations.websearch import WebResult
from tests.conversations.conftest import candidate, result, search_then
from tests.llm_fake import answer, call_tool, call_tools, tool_call

pytestmark = [pytest.mark.unit]


def test_calls_tool_means_grounding(memory_engine, alice):
    """зовёт инструмент → grounding: retrieval, упаковка, ответ по найденному, retrieval_trace."""
    memory_engine.ks.default = result(candidate(1, "Отпуск составляет 28 дней."))
    memory_engine.script(*search_then("отпуск", "Отпуск составляет 28 дней [1]."))

    outcome = memory_engine.turn(alice, "Сколько дней отпуска?")

    assert memory_engine.ks.queries == ["отпуск"]
    round_two = memory_engine.calls[1]
    assert "Отпуск составляет 28 дней." in round_two.messages[-1].content  # packed into the tool message
    assert outcome.done.citations[0]["record_id"] == 1
    [trace] = memory_engine.store.traces
    assert trace["standalone_query"] == "отпуск"
    assert [p["record_id"] for p in trace["packed"]] == [1]


def test_no_tool_call_means_conversation(memory_engine, alice):
    """не зовёт → разговор: retrieval не вызывается, цитат нет, снимка нет, «не нашёл» нет."""
    memory_engine.script(answer("Привет! Чем помочь?"))

    outcome = memory_engine.turn(alice, "Привет")

    assert memory_engine.ks.searches == []
    assert outcome.done.citations == []
    assert memory_engine.store.traces == []
    assert "не нашёл" not in outcome.text
    assert outcome.text == "Привет! Чем помочь?"


def test_exactly_one_trace_per_message(memory_engine, alice):
    """ровно один снимок на сообщение: UNIQUE(message_id) в БД; у разговорного ответа снимка нет.

    The database side (a second row for the same message rejected) is proven in
    integration/test_db_invariants.py::test_second_trace_for_a_message_is_rejected_by_unique.
    """
    unique = [c for c in RetrievalTrace._meta.constraints if c.name == "conversations_retrievaltrace_one_per_message"]
    assert unique and tuple(unique[0].fields) == ("message",)
    memory_engine.ks.default = result(candidate(1, "Факт."))
    memory_engine.script(*search_then("факт", "Факт [1]."), answer("Пожалуйста!"))

    memory_engine.turn(alice, "Какой факт?")
    memory_engine.turn(alice, "Спасибо")

    grounded, chatty = memory_engine.store.assistant
    assert grounded["trace"] is not None
    assert chatty["trace"] is None


def test_standalone_query_is_the_model_argument(memory_engine, alice):
    """самостоятельный запрос — аргумент модели: retrieval идёт по нему, не по сырой реплике."""
    memory_engine.script(*search_then("отпуск Иванова в 2026 году", "x"))

    memory_engine.turn(alice, "а у него?")

    assert memory_engine.ks.queries == ["отпуск Иванова в 2026 году"]


def test_an_overlong_standalone_query_is_clipped_not_fatal(memory_engine, alice):
    """A model echoing a very long message as its query: the search runs on its head, cut at a word."""
    from knowledge.facade import MAX_QUERY_CHARS

    long_query = "сколько дней отпуска " * 400
    memory_engine.script(*search_then(long_query, "x"))

    memory_engine.turn(alice, long_query)

    [query] = memory_engine.ks.queries
    assert len(query) <= MAX_QUERY_CHARS and long_query.startswith(query) and query.endswith("отпуска")


def test_at_most_one_search_per_turn(memory_engine, alice):
    """не более одного вызова за ход: максимум один retrieve, без агентной петли."""
    memory_engine.ks.default = result(candidate(1, "Факт один."))
    memory_engine.script(
        call_tools(
            tool_call("search_knowledge", "c1", query="первый"), tool_call("search_knowledge", "c2", query="второй")
        ),
        answer("Факт один [1]."),
    )

    outcome = memory_engine.turn(alice, "Расскажи про факты")

    assert memory_engine.ks.queries == ["первый"]
    tool_messages = [m for m in memory_engine.calls[1].messages if m.role == "tool"]
    assert [m.tool_call_id for m in tool_messages] == ["c1", "c2"]  # the ignored call is answered, not run
    assert "Ignored" in tool_messages[1].content
    assert outcome.done is not None


def test_multi_tool_in_one_round(memory_engine, alice):
    """мульти-инструмент одним раундом: search_knowledge + web_search параллельно, ответ на объединении."""
    memory_engine.settings(web_search_enabled=True, web_search_url="http://searx.local")
    memory_engine.web_search.results = [
        WebResult(title="Курс ЦБ", url="https://cbr.example/rate", snippet="Курс 90 рублей.")
    ]
    memory_engine.ks.default = result(candidate(1, "Командировочные 700 рублей в день."))
    memory_engine.script(
        call_tools(
            tool_call(SEARCH_KNOWLEDGE, "k", query="командировочные"), tool_call(WEB_SEARCH, "w", query="курс доллара")
        ),
        answer("Командировочные 700 рублей [1]. Курс 90 рублей [2]."),
    )

    outcome = memory_engine.turn(alice, "Командировочные и курс доллара?")

    assert memory_engine.ks.queries == ["командировочные"]
    assert memory_engine.web_search.queries == ["курс доллара"]
    tools = {m.tool_call_id: m.content for m in memory_engine.calls[1].messages if m.role == "tool"}
    assert "700 рублей" in tools["k"] and "Курс 90" in tools["w"]
    assert [c["source_system"] for c in outcome.done.citations] == ["files", "web"]


def test_after_the_round_answer_no_second_round(memory_engine, alice):
    """после раунда — ответ, второго раунда нет: раунд 2 без инструментов, новый вызов не исполняется."""
    memory_engine.ks.default = result(candidate(1, "Факт."))
    memory_engine.script(
        call_tool("search_knowledge", query="факт"),
        [*call_tool("search_knowledge", query="ещё раз"), *answer("Факт [1].")],
    )

    outcome = memory_engine.turn(alice, "Какой факт?")

    assert len(memory_engine.calls) == 2
    assert memory_engine.calls[1].tools == ()
    assert memory_engine.ks.queries == ["факт"]
    assert outcome.done is not None


def test_web_search_disabled_is_not_offered(memory_engine, alice):
    """web_search выключен → не подан: в набор инструментов не входит."""
    memory_engine.settings(web_search_enabled=False)
    memory_engine.script(answer("ok"))

    memory_engine.turn(alice, "Привет")

    assert [t.name for t in memory_engine.calls[0].tools] == [SEARCH_KNOWLEDGE]
    assert tool_set(knowledge_empty=False, web_search_enabled=False)[0].name == SEARCH_KNOWLEDGE
    # A web_search call the model makes anyway is not executed.
    plan = plan_tool_round(
        [tool_call(WEB_SEARCH, query="x")], tool_set(knowledge_empty=False, web_search_enabled=False)
    )
    assert plan.web is None and not plan.is_grounding


def test_empty_base_search_tool_not_offered(memory_engine, alice):
    """пустая база → инструмент не подан: отвечает из общих знаний, поиска нет, trace не пишется."""
    memory_engine.ks.empty = True
    memory_engine.script(answer("Столица Франции — Париж."))

    outcome = memory_engine.turn(alice, "Какая столица Франции?")

    assert memory_engine.calls[0].tools == ()
    assert memory_engine.ks.searches == []
    assert memory_engine.store.traces == []
    assert outcome.text == "Столица Франции — Париж."


def test_first_chunk_makes_the_tool_appear(memory_engine, alice):
    """первый фрагмент → инструмент появляется: is_empty переключился → на следующем ходе search_knowledge в наборе."""
    memory_engine.ks.empty = True
    memory_engine.script(answer("Не знаю."), answer("ok"))
    memory_engine.turn(alice, "Что нового?")
    memory_engine.ks.empty = False  # KS accepted its first chunk

    memory_engine.turn(alice, "Что нового?")

    assert memory_engine.calls[0].tools == ()
    assert [t.name for t in memory_engine.calls[1].tools] == [SEARCH_KNOWLEDGE]
