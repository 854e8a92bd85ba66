"""The LLM provider layer (PLAT-6): one small async streaming interface and its providers.

Facade for the rest of the platform; import from here, not from the modules. The OpenAI
classes load the SDK lazily (``achilles.llm.OpenAIChatProvider`` imports it on first use).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from achilles.llm.base import (
    LLM_BAD_RESPONSE,
    LLM_TIMEOUT,
    LLM_UNAVAILABLE,
    ChatProvider,
    EmbeddingProvider,
    LLMError,
    Timeouts,
    collect,
    estimate_input_tokens,
    estimate_output_tokens,
    estimate_tokens,
    guard_stream,
)
from achilles.llm.builtin import (
    NOT_FOUND_TEXT,
    BuiltinChatProvider,
    HashEmbeddingProvider,
)
from achilles.llm.context import ContextSource, format_context, parse_context
from achilles.llm.registry import (
    available_providers,
    get_chat_provider,
    get_embedding_provider,
    register_provider,
    unregister_provider,
)
from achilles.llm.text import STOP_WORDS, split_sentences
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

if TYPE_CHECKING:
    from achilles.llm.openai_provider import OpenAIChatProvider, OpenAIEmbeddingProvider

__all__ = [
    "LLM_BAD_RESPONSE",
    "LLM_TIMEOUT",
    "LLM_UNAVAILABLE",
    "NOT_FOUND_TEXT",
    "STOP_WORDS",
    "BuiltinChatProvider",
    "ChatProvider",
    "ChatResult",
    "ContextSource",
    "EmbeddingProvider",
    "HashEmbeddingProvider",
    "LLMError",
    "Message",
    "ModelSpec",
    "OpenAIChatProvider",
    "OpenAIEmbeddingProvider",
    "StreamEvent",
    "TextDelta",
    "Timeouts",
    "ToolCall",
    "ToolCalls",
    "ToolSpec",
    "Usage",
    "available_providers",
    "collect",
    "estimate_input_tokens",
    "estimate_output_tokens",
    "estimate_tokens",
    "format_context",
    "get_chat_provider",
    "get_embedding_provider",
    "guard_stream",
    "parse_context",
    "register_provider",
    "STOP_WORDS",
    "split_sentences",
    "unregister_provider",
]


def __getattr__(name: str) -> Any:
    if name in ("OpenAIChatProvider", "OpenAIEmbeddingProvider"):
        from achilles.llm import openai_provider

        return getattr(openai_provider, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
