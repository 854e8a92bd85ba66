"""think → tool → observe on a scripted model and fake tools: no database, no network."""

from __future__ import annotations

import pytest

from achilles.llm.types import ToolCall, Usage
from agents.loop import IterationCapReached, LoopFailed, run_loop
from agents.prompt import compose_messages, tool_specs
from tests.llm_fake import ScriptedChatProvider, answer, call_tool, call_tools, fail, tool_call

pytestmark = [pytest.mark.unit]


def _loop(model, *, cap=5, tools=None, heartbeat=None):
    seen: list[ToolCall] = []

    def call_tool_(call):
        seen.append(call)
        return (tools or {}).get(call.name, lambda c: f"[1] {call.name} result\nтекст")(call)

    result = run_loop(
        provider=model,
        messages=compose_messages(platform_prompt="", agent_instructions="Сводка по отпускам"),
        tools=tool_specs(),
        call_tool=call_tool_,
        cap=cap,
        heartbeat=heartbeat or (lambda i, t: None),
    )
    return result, seen


@pytest.mark.p0
def test_iteration_cap_reached_fails_with_reason_iteration_cap_not_an_endless_model_call():
    # given a model that asks for a tool forever
    model = ScriptedChatProvider([call_tool("search", query="отпуск")] * 10)
    # when the loop runs with a cap of 3
    with pytest.raises(IterationCapReached) as caught:
        _loop(model, cap=3)
    # then it stopped after exactly 3 model calls (started and stopped, not refused before start)
    assert len(model.calls) == 3
    assert caught.value.cap == 3
    assert caught.value.tokens_used > 0


@pytest.mark.p1
def test_think_tool_observe_feeds_the_observation_back_to_the_model():
    model = ScriptedChatProvider([call_tool("search", call_id="c1", query="отпуск"), answer("28 дней [1]")])
    result, seen = _loop(model, tools={"search": lambda c: "[1] Отпуск\nПоложено 28 дней."})
    assert result.output == "28 дней [1]"
    assert result.iterations == 2
    assert [c.name for c in seen] == ["search"]
    second = model.calls[1].messages
    assert second[-2].role == "assistant" and second[-2].tool_calls[0].id == "c1"
    assert second[-1].role == "tool" and second[-1].tool_call_id == "c1"
    assert "Положено 28 дней." in second[-1].content


@pytest.mark.p1
def test_a_round_without_tool_calls_is_the_final_report():
    model = ScriptedChatProvider([answer("Данных нет.")])
    result, seen = _loop(model)
    assert result.output == "Данных нет." and seen == [] and result.iterations == 1


@pytest.mark.p1
def test_several_tool_calls_of_one_round_each_get_an_observation():
    model = ScriptedChatProvider(
        [call_tools(tool_call("search", "a", query="x"), tool_call("sql", "b", query="select 1")), answer("ok")]
    )
    _, seen = _loop(model)
    assert [c.id for c in seen] == ["a", "b"]
    tool_messages = [m for m in model.calls[1].messages if m.role == "tool"]
    assert [m.tool_call_id for m in tool_messages] == ["a", "b"]


@pytest.mark.p0
def test_tokens_are_summed_from_the_usage_of_every_round():
    model = ScriptedChatProvider(
        [call_tool("search", query="x") + [Usage(100, 10)], answer("ok", usage=Usage(200, 20))]
    )
    result, _ = _loop(model)
    assert result.tokens_used == 330


@pytest.mark.p1
def test_heartbeat_is_called_after_every_iteration_with_tokens_so_far():
    beats = []
    model = ScriptedChatProvider([call_tool("search", query="x") + [Usage(10, 1)], answer("ok", usage=Usage(20, 2))])
    _loop(model, heartbeat=lambda i, t: beats.append((i, t)))
    assert beats == [(1, 11), (2, 33)]


@pytest.mark.p1
def test_a_model_failure_stops_the_loop_keeping_the_tokens_spent():
    model = ScriptedChatProvider([call_tool("search", query="x") + [Usage(10, 1)], [fail(detail="upstream down")]])
    with pytest.raises(LoopFailed) as caught:
        _loop(model)
    assert caught.value.tokens_used == 11
    assert "upstream down" in str(caught.value.cause)
