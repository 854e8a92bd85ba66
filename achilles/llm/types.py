"""Frozen contracts of the LLM provider layer (PLAT-6).

Everything that crosses the boundary between the platform and a model provider is one of these
dataclasses: what goes in (``Message``, ``ToolSpec``, ``ModelSpec``) and what streams out
(``TextDelta | ToolCalls | Usage``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

Role: TypeAlias = Literal["system", "user", "assistant", "tool"]


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """A tool offered to the model; ``parameters`` is a JSON schema of its arguments."""

    name: str
    description: str
    parameters: dict[str, Any] = field(default_factory=lambda: {"type": "object", "properties": {}})


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One tool invocation requested by the model, arguments already parsed from JSON."""

    id: str
    name: str
    arguments: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Message:
    """One chat message; assistant messages may carry tool calls, tool messages answer one."""

    role: Role
    content: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None


@dataclass(frozen=True, slots=True)
class TextDelta:
    """A piece of the answer text, in generation order."""

    text: str


@dataclass(frozen=True, slots=True)
class ToolCalls:
    """All tool calls of one round, emitted once, after the round's text."""

    calls: tuple[ToolCall, ...]


@dataclass(frozen=True, slots=True)
class Usage:
    """Token usage of one call; ``estimated`` when the provider reported none."""

    input_tokens: int
    output_tokens: int
    estimated: bool = False

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens


StreamEvent: TypeAlias = TextDelta | ToolCalls | Usage


@dataclass(frozen=True, slots=True)
class ModelSpec:
    """A row of the model allow-list (``agent_models``) as handed to the provider layer.

    ``options`` are provider specific, e.g. for ``openai``: ``base_url``, ``api_key_env`` (name of
    the environment variable holding the key) or ``api_key``, ``model`` (the provider's model id,
    defaults to ``name``), ``timeout`` (total seconds, default 60), ``idle_timeout`` (seconds
    between chunks, default 30), ``first_token_timeout`` (defaults to ``idle_timeout``); for
    ``builtin``: ``chunk_words``, ``delay``, ``max_sentences``; for ``hash``: ``dim``.
    """

    name: str
    provider: str
    kind: Literal["chat", "embedding"] = "chat"
    context_window: int = 8192
    options: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ChatResult:
    """A whole round collected from a stream (for callers that do not stream, e.g. agents)."""

    text: str
    tool_calls: tuple[ToolCall, ...]
    usage: Usage
