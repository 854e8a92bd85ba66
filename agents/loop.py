"""The agent loop (AE-LOOP): think → tool → observe, on the ``achilles.llm`` interface.

Each iteration is one model round. A round with tool calls runs each call by name and appends
the observations; a round without tool calls is the final report. The loop stops at the
iteration cap (``failed``, ``reason=iteration_cap``) rather than calling the model forever.
Tokens are summed from each round's ``Usage``, also when the run fails, since they were spent.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from achilles.llm import ChatProvider, Message, ToolCall, ToolSpec, collect, estimate_input_tokens

MAX_OUTPUT_TOKENS = 2048


class IterationCapReached(Exception):
    """The model still asked for tools after ``cap`` rounds."""

    def __init__(self, cap: int, tokens_used: int, input_tokens: int | None = None):
        super().__init__(f"stopped after {cap} iterations without a final answer")
        self.cap = cap
        self.tokens_used = tokens_used
        self.input_tokens = input_tokens


class TokenCapReached(Exception):
    """The run spent (or its next round would spend) more than its per-run token cap."""

    def __init__(self, cap: int, tokens_used: int, input_tokens: int | None = None):
        super().__init__(f"stopped at the per-run token cap ({tokens_used} of {cap} tokens)")
        self.cap = cap
        self.tokens_used = tokens_used
        self.input_tokens = input_tokens


class LoopFailed(Exception):
    """The model provider failed mid-run; carries the tokens spent so far."""

    def __init__(self, cause: BaseException, tokens_used: int, input_tokens: int | None = None):
        super().__init__(str(cause))
        self.cause = cause
        self.tokens_used = tokens_used
        self.input_tokens = input_tokens


@dataclass
class LoopResult:
    output: str
    tokens_used: int
    iterations: int
    tool_calls: list[ToolCall] = field(default_factory=list)
    messages: list[Message] = field(default_factory=list)
    input_tokens: int | None = None  # of tokens_used, as the rounds' Usage reported (the rest is output)


def run_loop(
    *,
    provider: ChatProvider,
    messages: Sequence[Message],
    tools: Sequence[ToolSpec],
    call_tool: Callable[[ToolCall], str],
    cap: int,
    token_cap: int | None = None,
    heartbeat: Callable[[int, int], None] = lambda iteration, tokens: None,
) -> LoopResult:
    """Run the loop to a final answer. ``call_tool`` returns an observation (errors included);
    ``heartbeat(iteration, tokens_so_far)`` is called after every iteration.

    ``token_cap`` bounds the run's spend: a round starts only if its input (estimated) leaves room
    for output, its output is limited to that room, and a run at the cap stops (TokenCapReached)."""
    history = list(messages)
    tokens = 0
    inputs = 0  # of which input, per the rounds' Usage
    made: list[ToolCall] = []
    # One event loop for the whole run: providers may keep connections bound to it.
    with asyncio.Runner() as runner:
        for iteration in range(1, cap + 1):
            max_output = MAX_OUTPUT_TOKENS
            if token_cap is not None:
                max_output = min(max_output, token_cap - tokens - estimate_input_tokens(history, tools))
                if max_output <= 0:
                    raise TokenCapReached(token_cap, tokens, inputs)
            try:
                round_ = runner.run(collect(provider.stream(history, tools, max_output)))
            except Exception as exc:
                raise LoopFailed(exc, tokens, inputs) from exc
            tokens += round_.usage.total_tokens
            inputs += round_.usage.input_tokens
            if token_cap is not None and tokens >= token_cap and round_.tool_calls:
                raise TokenCapReached(token_cap, tokens, inputs)
            if not round_.tool_calls:
                heartbeat(iteration, tokens)
                return LoopResult(
                    output=round_.text.strip(),
                    tokens_used=tokens,
                    iterations=iteration,
                    tool_calls=made,
                    messages=history,
                    input_tokens=inputs,
                )
            history.append(Message(role="assistant", content=round_.text, tool_calls=round_.tool_calls))
            for call in round_.tool_calls:
                made.append(call)
                history.append(Message(role="tool", content=call_tool(call), tool_call_id=call.id))
            heartbeat(iteration, tokens)
    raise IterationCapReached(cap, tokens, inputs)
