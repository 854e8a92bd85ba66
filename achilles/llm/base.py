"""The provider interface, its error, timeouts and the local token estimate (PLAT-6).

Stream contract of ``ChatProvider.stream``: zero or more ``TextDelta``, at most one ``ToolCalls``
(every call of the round, arguments parsed), then exactly one ``Usage`` as the last event.
Failures surface as ``LLMError`` only, with ``code`` one of ``LLM_TIMEOUT``, ``LLM_UNAVAILABLE``,
``LLM_BAD_RESPONSE``.
"""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar, runtime_checkable

from achilles.errors import ServiceUnavailable
from achilles.llm.types import (
    ChatResult,
    Message,
    ModelSpec,
    StreamEvent,
    TextDelta,
    ToolCall,
    ToolCalls,
    ToolSpec,
    Usage,
)

LLM_TIMEOUT = "llm_timeout"
LLM_UNAVAILABLE = "llm_unavailable"
LLM_BAD_RESPONSE = "llm_bad_response"

DEFAULT_TOTAL_TIMEOUT = 60.0
DEFAULT_IDLE_TIMEOUT = 30.0


class LLMError(ServiceUnavailable):
    """A model provider failed: timed out, unreachable / refused, or answered garbage (503)."""

    code = LLM_UNAVAILABLE


@runtime_checkable
class ChatProvider(Protocol):
    """A chat model. ``stream`` is an async generator honouring the stream contract above."""

    def stream(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec] = (),
        max_tokens: int | None = None,
    ) -> AsyncIterator[StreamEvent]: ...


@runtime_checkable
class EmbeddingProvider(Protocol):
    """An embedding model, called from sync code (the Knowledge Store). ``dim`` may be None
    when only the provider knows it."""

    @property
    def dim(self) -> int | None: ...

    def embed(self, texts: Sequence[str]) -> list[list[float]]: ...


# --- token estimate ---------------------------------------------------------------------------

# Per-message framing overhead (role, separators), as in OpenAI's own counting recipe.
MESSAGE_OVERHEAD_TOKENS = 4


def estimate_tokens(text: str) -> int:
    """Local token estimate used whenever a provider reports no usage: ``ceil(utf8_bytes / 4)``.

    English BPE averages ~4 characters per token, and ASCII is 1 byte per character. Cyrillic is
    2 bytes per character in UTF-8, so Russian comes out at ~2 characters per token, slightly
    above what current tokenizers produce (~2.5-3.5 characters per Russian token). Erring high is
    deliberate: the estimate feeds window budgets and the weekly token budget, where
    under-counting is the costly mistake. Deterministic, no tokenizer download.
    """
    if not text:
        return 0
    return math.ceil(len(text.encode("utf-8")) / 4)


def estimate_input_tokens(messages: Sequence[Message], tools: Sequence[ToolSpec] = ()) -> int:
    """Estimate of a request's prompt: every message, its tool calls and the tool schemas."""
    total = 0
    for message in messages:
        total += MESSAGE_OVERHEAD_TOKENS + estimate_tokens(message.content)
        for call in message.tool_calls:
            total += estimate_tokens(call.name) + estimate_tokens(_dump(call.arguments))
    for tool in tools:
        total += estimate_tokens(tool.name) + estimate_tokens(tool.description)
        total += estimate_tokens(_dump(tool.parameters))
    return total


def estimate_output_tokens(text: str, calls: Sequence[ToolCall] = ()) -> int:
    """Estimate of a round's output: its text plus the serialized tool calls."""
    return estimate_tokens(text) + sum(estimate_tokens(c.name) + estimate_tokens(_dump(c.arguments)) for c in calls)


def _dump(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


# --- timeouts ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Timeouts:
    """Deadlines of one call: ``total`` wall time, ``idle`` between two chunks and ``first``
    until the first chunk (a large prompt may take longer to start than to continue)."""

    total: float = DEFAULT_TOTAL_TIMEOUT
    idle: float = DEFAULT_IDLE_TIMEOUT
    first: float = DEFAULT_IDLE_TIMEOUT

    @classmethod
    def from_spec(cls, spec: ModelSpec) -> Timeouts:
        options = spec.options
        total = float(options.get("timeout", DEFAULT_TOTAL_TIMEOUT))
        idle = float(options.get("idle_timeout", min(DEFAULT_IDLE_TIMEOUT, total)))
        first = float(options.get("first_token_timeout", idle))
        return cls(total=total, idle=idle, first=first)


T = TypeVar("T")

# Yielded by a provider's inner stream for a raw chunk that carries no event (a role header,
# reasoning tokens): it proves the upstream alive, so it resets the idle timer, and is dropped.
KEEPALIVE: Any = object()


async def guard_stream(events: AsyncIterator[T], timeouts: Timeouts, *, model: str = "model") -> AsyncIterator[T]:
    """Re-yield ``events``, raising ``LLMError(llm_timeout)`` when a deadline passes.

    The wrapped iterator is closed on every exit, so a stalled HTTP stream is released.
    """
    # One timer per stream, not one per chunk: a chunk only notes when the next wait began, and
    # the timer, when it fires, either finds the wait still within its budget (and is set again
    # for the wait's real end) or cancels the waiting task — as ``asyncio.timeout`` would, whose
    # per-chunk timer handles cost more CPU than reading the chunk itself. Only the waits count:
    # the time the caller spends between two chunks is not the upstream's.
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeouts.total
    budget = timeouts.first
    started = False
    waiting_since: float | None = None
    expired: tuple[str, float] | None = None
    timer: asyncio.TimerHandle | None = None
    task: asyncio.Task | None = None

    def check() -> None:
        nonlocal timer, expired
        timer = None
        if waiting_since is None or task is None:
            return  # not waiting: the next wait sets the timer again
        end = min(waiting_since + budget, deadline)
        if loop.time() < end:
            timer = loop.call_at(end, check)
            return
        expired = ("total", timeouts.total) if end >= deadline else ("idle" if started else "first", budget)
        task.cancel()

    try:
        while True:
            now = loop.time()
            if now >= deadline:
                raise _timeout(model, "total", timeouts.total)
            task = asyncio.current_task()
            cancelling = task.cancelling() if task is not None else 0
            waiting_since = now
            if timer is None:
                timer = loop.call_at(min(now + budget, deadline), check)
            try:
                item = await anext(events)
            except StopAsyncIteration:
                return
            except asyncio.CancelledError:
                if expired is not None and task is not None and task.uncancel() <= cancelling:
                    raise _timeout(model, *expired) from None
                raise
            finally:
                waiting_since = None
            if expired is not None:  # the cancel came as the chunk did, and the stream swallowed it
                if task is not None:
                    task.uncancel()
                raise _timeout(model, *expired)
            if not started:
                started = True
                budget = timeouts.idle
                if timer is not None:  # set for the first chunk's budget; the idle one may be shorter
                    timer.cancel()
                    timer = None
            if item is not KEEPALIVE:
                yield item
    finally:
        if timer is not None:
            timer.cancel()
        aclose = getattr(events, "aclose", None)
        if aclose is not None:
            await aclose()


def _timeout(model: str, which: str, seconds: float) -> LLMError:
    what = {
        "total": "did not finish",
        "first": "sent nothing",
        "idle": "stalled between chunks",
    }[which]
    return LLMError(
        f"model {model!r} {what} within {seconds:g}s",
        code=LLM_TIMEOUT,
        extra={"timeout": which, "seconds": seconds},
    )


# --- consumers ---------------------------------------------------------------------------------


async def collect(events: AsyncIterator[StreamEvent]) -> ChatResult:
    """Drain a stream into one ``ChatResult`` (text joined, calls and usage kept)."""
    parts: list[str] = []
    calls: tuple[ToolCall, ...] = ()
    usage = Usage(0, 0, estimated=True)
    async for event in events:
        if isinstance(event, TextDelta):
            parts.append(event.text)
        elif isinstance(event, ToolCalls):
            calls = event.calls
        elif isinstance(event, Usage):
            usage = event
    return ChatResult(text="".join(parts), tool_calls=calls, usage=usage)
