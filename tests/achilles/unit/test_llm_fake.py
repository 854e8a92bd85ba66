"""The scripted fake chat model used by engine tests (PLAT-6)."""

from __future__ import annotations

import asyncio

import pytest

from achilles.llm import (
    LLM_TIMEOUT,
    LLMError,
    Message,
    TextDelta,
    Timeouts,
    ToolCalls,
    ToolSpec,
    Usage,
    collect,
)
from tests.llm_fake import (
    Delay,
    ScriptedChatProvider,
    answer,
    call_tool,
    call_tools,
    fail,
    tool_call,
)

pytestmark = [pytest.mark.unit]

SEARCH = ToolSpec("search_knowledge", "Search", {"type": "object"})


def drain(stream) -> list:
    async def go() -> list:
        return [event async for event in stream]

    return asyncio.run(go())


def test_rounds_play_in_order_and_every_call_is_recorded():
    # given
    model = ScriptedChatProvider([call_tool("search_knowledge", query="отпуск"), answer("28 дней [1]", chunk=3)])
    first = [Message("user", "Сколько дней отпуска?")]
    # when
    round_one = drain(model.stream(first, [SEARCH], max_tokens=100))
    round_two = drain(model.stream(first + [Message("tool", "[1] ...", tool_call_id="call_search_knowledge")]))
    # then
    assert round_one[0] == ToolCalls((tool_call("search_knowledge", query="отпуск"),))
    assert "".join(e.text for e in round_two if isinstance(e, TextDelta)) == "28 дней [1]"
    assert [len(e.text) for e in round_two if isinstance(e, TextDelta)] == [3, 3, 3, 2]
    assert len(model.calls) == 2
    assert model.calls[0].messages == tuple(first)
    assert model.calls[0].tools == (SEARCH,)
    assert model.calls[0].max_tokens == 100
    assert model.calls[1].tools == ()


def test_a_round_without_usage_gets_an_estimated_one_last():
    model = ScriptedChatProvider([answer("hello")])
    events = drain(model.stream([Message("user", "hi")]))
    assert isinstance(events[-1], Usage) and events[-1].estimated
    assert [e for e in events if isinstance(e, Usage)] == [events[-1]]


def test_scripted_usage_is_kept_as_is():
    model = ScriptedChatProvider([answer("hello", usage=Usage(10, 2))])
    assert asyncio.run(collect(model.stream([Message("user", "hi")]))).usage == Usage(10, 2)


def test_an_exception_in_the_script_is_raised_at_that_point():
    model = ScriptedChatProvider([[TextDelta("par"), fail(detail="boom")]])
    seen = []

    async def go() -> None:
        async for event in model.stream([Message("user", "hi")]):
            seen.append(event)

    with pytest.raises(LLMError, match="boom"):
        asyncio.run(go())
    assert seen == [TextDelta("par")]


def test_a_delay_with_timeouts_turns_into_llm_timeout():
    model = ScriptedChatProvider([[Delay(5), *answer("late")]], timeouts=Timeouts(total=1, idle=0.1, first=0.1))
    with pytest.raises(LLMError) as caught:
        drain(model.stream([Message("user", "hi")]))
    assert caught.value.code == LLM_TIMEOUT


def test_a_round_may_be_computed_from_the_call():
    model = ScriptedChatProvider([lambda call: answer(f"got {len(call.messages)} messages")])
    events = drain(model.stream([Message("system", "s"), Message("user", "u")]))
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "got 2 messages"


def test_several_tools_in_one_round():
    model = ScriptedChatProvider([call_tools(tool_call("search", query="a"), tool_call("graph", record=1))])
    (calls,) = [e for e in drain(model.stream([Message("user", "u")])) if isinstance(e, ToolCalls)]
    assert [c.name for c in calls.calls] == ["search", "graph"]


def test_running_past_the_script_fails_loudly():
    model = ScriptedChatProvider([answer("one")])
    drain(model.stream([Message("user", "u")]))
    with pytest.raises(AssertionError, match="only 1 rounds"):
        model.stream([Message("user", "again")])
