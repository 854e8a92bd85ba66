"""The per-run token cap (issue 10, finding 6): a run stops at its cap instead of spending on."""

from __future__ import annotations

import pytest

from achilles.llm.types import Usage
from agents.loop import TokenCapReached, run_loop
from agents.prompt import compose_messages, tool_specs
from tests.llm_fake import ScriptedChatProvider, answer, call_tool

pytestmark = [pytest.mark.unit]


def _run(model, *, token_cap):
    return run_loop(
        provider=model,
        messages=compose_messages(platform_prompt="", agent_instructions="Сводка"),
        tools=tool_specs(),
        call_tool=lambda call: "[1] результат",
        cap=8,
        token_cap=token_cap,
    )


def test_a_run_that_keeps_calling_tools_stops_at_its_token_cap():
    """Failed before the fix: there was no per-run cap; the run spent until the iteration cap."""
    model = ScriptedChatProvider([[*call_tool("search", query="x"), Usage(1000, 500)]] * 8)

    with pytest.raises(TokenCapReached) as caught:
        _run(model, token_cap=3000)

    assert len(model.calls) == 2 and caught.value.tokens_used == 3000


def test_a_round_whose_input_alone_would_pass_the_cap_is_not_started():
    model = ScriptedChatProvider([answer("не будет")])

    with pytest.raises(TokenCapReached) as caught:
        _run(model, token_cap=10)

    assert model.calls == [] and caught.value.tokens_used == 0


def test_the_output_of_a_round_is_limited_to_the_room_left_under_the_cap():
    model = ScriptedChatProvider([answer("Итог.", usage=Usage(100, 10))])

    result = _run(model, token_cap=1500)

    assert result.output == "Итог."
    assert 0 < model.calls[0].max_tokens < 1500
