"""The window budget (QE-8): system + history + current message + context + answer reserve.

The reserve is taken first and never eaten. The current message is always whole (too long for
the window → 422). History is dropped oldest-first by tokens. Context fills what is left, most
relevant first; a source that does not fit ends the packing (cut sources are not citable).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from achilles.errors import ValidationFailed
from achilles.llm import ContextSource, Message, estimate_input_tokens, estimate_tokens, format_context

# Framing of the round-2 transcript around the context: the assistant's tool-call message
# and the tool message's own preamble.
TOOL_ROUND_OVERHEAD_TOKENS = 64


def message_tokens(message: Message) -> int:
    return estimate_input_tokens([message])


@dataclass(frozen=True)
class HistoryFit:
    kept: tuple[Message, ...]
    dropped: int
    remaining: int  # tokens left for context after system, kept history, current and reserve


def fit_history(
    *,
    window: int,
    reserve: int,
    system: Message,
    history: Sequence[Message],
    current: Message,
    tool_specs_tokens: int = 0,
) -> HistoryFit:
    reserve = min(reserve, window)
    fixed = reserve + message_tokens(system) + message_tokens(current) + tool_specs_tokens
    if fixed > window:
        raise ValidationFailed(
            f"the message is too long for the model's window ({window} tokens with {reserve} reserved for the answer)",
            code="message_too_long",
        )
    available = window - fixed
    kept: list[Message] = []
    used = 0
    for message in reversed(history):  # newest first: the oldest go first when space runs out
        cost = message_tokens(message)
        if used + cost > available:
            break
        kept.append(message)
        used += cost
    kept.reverse()
    return HistoryFit(kept=tuple(kept), dropped=len(history) - len(kept), remaining=available - used)


@dataclass(frozen=True)
class PackedSource:
    """A source that went into the context, numbered ``marker`` for the model's ``[N]`` citations."""

    marker: int
    record_id: int | None
    chunk_id: int | None
    title: str
    url: str
    source_system: str
    text: str
    rank: int
    score: float = 0.0

    def context_source(self) -> ContextSource:
        return ContextSource(marker=self.marker, title=self.title, text=self.text)


def source_tokens(source: PackedSource) -> int:
    return estimate_tokens(format_context([source.context_source()])) + 1


def pack_context(sources: Sequence[PackedSource], available: int) -> tuple[list[PackedSource], list[PackedSource]]:
    """(packed, cut) under ``available`` tokens, keeping the given (relevance) order; markers renumbered 1..n."""
    budget = available - TOOL_ROUND_OVERHEAD_TOKENS
    packed: list[PackedSource] = []
    used = 0
    for index, source in enumerate(sources):
        cost = source_tokens(source)
        if used + cost > budget:
            return _renumber(packed), list(sources[index:])
        packed.append(source)
        used += cost
    return _renumber(packed), []


def _renumber(sources: list[PackedSource]) -> list[PackedSource]:
    return [replace(source, marker=n) for n, source in enumerate(sources, start=1)]
