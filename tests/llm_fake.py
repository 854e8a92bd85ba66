"""``ScriptedChatProvider``: the scripted fake chat model of the tests (PLAT-6); not part of the
platform (``make run`` never uses it), so it lives with the tests.

Each call to ``stream`` plays the next round of the script and records what it was given::

    model = ScriptedChatProvider([call_tool("search_knowledge", query="отпуск"), answer("28 дней [1]")])
    ...
    assert model.calls[0].tools[0].name == "search_knowledge"

A round is a list of items: stream events, ``Delay(seconds)``, or an exception (instance or
class) raised at that point; or a callable taking the ``RecordedCall`` and returning such a list.
A round without ``Usage`` that finishes gets an estimated one appended.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

from achilles.llm import (
    LLM_UNAVAILABLE,
    LLMError,
    Message,
    StreamEvent,
    TextDelta,
    Timeouts,
    ToolCall,
    ToolCalls,
    ToolSpec,
    Usage,
    estimate_input_tokens,
    estimate_output_tokens,
    guard_stream,
)


@dataclass(frozen=True, slots=True)
class Delay:
    """Pause the stream for ``seconds`` (simulates time-to-first-token or a stall)."""

    seconds: float


@dataclass(frozen=True, slots=True)
class RecordedCall:
    """What one ``stream`` call received."""

    messages: tuple[Message, ...]
    tools: tuple[ToolSpec, ...]
    max_tokens: int | None


ScriptItem: TypeAlias = StreamEvent | Delay | BaseException | type[BaseException]
Round: TypeAlias = Sequence[ScriptItem] | Callable[[RecordedCall], Sequence[ScriptItem]]


class ScriptedChatProvider:
    """Plays scripted rounds in order, one per call; ``calls`` keeps every call's input.

    With ``timeouts`` the same total/idle deadlines as real providers apply, so a scripted
    ``Delay`` can exercise ``llm_timeout`` handling.
    """

    def __init__(self, rounds: Sequence[Round] = (), *, timeouts: Timeouts | None = None) -> None:
        self.rounds: list[Round] = list(rounds)
        self.calls: list[RecordedCall] = []
        self.timeouts = timeouts

    def add_round(self, round_: Round) -> None:
        self.rounds.append(round_)

    def stream(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec] = (),
        max_tokens: int | None = None,
    ) -> AsyncIterator[StreamEvent]:
        call = RecordedCall(tuple(messages), tuple(tools), max_tokens)
        index = len(self.calls)
        self.calls.append(call)
        if index >= len(self.rounds):
            raise AssertionError(f"ScriptedChatProvider: call #{index + 1} but only {len(self.rounds)} rounds scripted")
        events = self._play(call, self.rounds[index])
        return guard_stream(events, self.timeouts, model="fake") if self.timeouts else events

    async def _play(self, call: RecordedCall, round_: Round) -> AsyncIterator[StreamEvent]:
        items = round_(call) if callable(round_) else round_
        text: list[str] = []
        calls: tuple[ToolCall, ...] = ()
        saw_usage = False
        for item in items:
            if isinstance(item, Delay):
                await asyncio.sleep(item.seconds)
            elif isinstance(item, BaseException) or (isinstance(item, type) and issubclass(item, BaseException)):
                raise item
            else:
                if isinstance(item, TextDelta):
                    text.append(item.text)
                elif isinstance(item, ToolCalls):
                    calls = item.calls
                elif isinstance(item, Usage):
                    saw_usage = True
                await asyncio.sleep(0)
                yield item
        if not saw_usage:
            yield Usage(
                estimate_input_tokens(call.messages, call.tools),
                estimate_output_tokens("".join(text), calls),
                estimated=True,
            )


# --- script builders -----------------------------------------------------------------------------


def answer(text: str, chunk: int = 3, usage: Usage | None = None) -> list[ScriptItem]:
    """A text round streamed ``chunk`` characters per delta."""
    items: list[ScriptItem] = [TextDelta(text[i : i + chunk]) for i in range(0, len(text), chunk)]
    return items + ([usage] if usage else [])


def tool_call(name: str, call_id: str | None = None, **arguments: Any) -> ToolCall:
    return ToolCall(id=call_id or f"call_{name}", name=name, arguments=arguments)


def call_tool(name: str, call_id: str | None = None, **arguments: Any) -> list[ScriptItem]:
    """A round calling one tool: ``call_tool("search_knowledge", query="отпуск")``."""
    return [ToolCalls((tool_call(name, call_id, **arguments),))]


def call_tools(*calls: ToolCall) -> list[ScriptItem]:
    """A round calling several tools at once (they run in parallel in the engines)."""
    return [ToolCalls(tuple(calls))]


def fail(code: str = LLM_UNAVAILABLE, detail: str = "scripted failure") -> LLMError:
    """An ``LLMError`` to place in a round."""
    return LLMError(detail, code=code)
