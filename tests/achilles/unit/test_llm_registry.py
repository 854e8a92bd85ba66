"""Choosing a provider for an allow-list row (PLAT-6)."""

from __future__ import annotations

import pytest

from achilles.errors import ValidationFailed
from achilles.llm import (
    BuiltinChatProvider,
    ChatProvider,
    EmbeddingProvider,
    HashEmbeddingProvider,
    ModelSpec,
    available_providers,
    get_chat_provider,
    get_embedding_provider,
    register_provider,
    unregister_provider,
)
from tests.llm_fake import ScriptedChatProvider, answer

pytestmark = [pytest.mark.unit]


def test_builtin_chat_with_options():
    provider = get_chat_provider(ModelSpec("demo", "builtin", options={"chunk_words": 3, "delay": 0.01}))
    assert isinstance(provider, BuiltinChatProvider)
    assert (provider.chunk_words, provider.delay) == (3, 0.01)
    assert isinstance(provider, ChatProvider)


def test_openai_chat_is_built_without_network():
    from achilles.llm import OpenAIChatProvider

    provider = get_chat_provider(
        ModelSpec(
            "gpt",
            "openai",
            options={"base_url": "http://127.0.0.1:9/v1", "model": "gpt-x"},
        )
    )
    assert isinstance(provider, OpenAIChatProvider)
    assert provider.model == "gpt-x"


@pytest.mark.parametrize("provider", ["hash", "builtin"])
def test_hash_embeddings(provider):
    embedder = get_embedding_provider(ModelSpec("emb", provider, kind="embedding", options={"dim": 32}))
    assert isinstance(embedder, HashEmbeddingProvider) and embedder.dim == 32
    assert isinstance(embedder, EmbeddingProvider)


def test_unknown_provider_is_a_validation_error():
    with pytest.raises(ValidationFailed) as caught:
        get_chat_provider(ModelSpec("x", "nope"))
    assert caught.value.code == "unknown_provider"
    assert caught.value.status == 422
    with pytest.raises(ValidationFailed, match="unknown"):
        get_chat_provider(ModelSpec("x", "hash"))


def test_a_model_of_the_other_kind_is_refused():
    with pytest.raises(ValidationFailed) as caught:
        get_chat_provider(ModelSpec("emb", "openai", kind="embedding"))
    assert caught.value.code == "wrong_model_kind"
    with pytest.raises(ValidationFailed):
        get_embedding_provider(ModelSpec("chat", "hash"))


def test_a_registered_provider_is_used_and_can_be_removed():
    fake = ScriptedChatProvider([answer("hi")])
    register_provider("scripted", lambda spec: fake)
    try:
        assert "scripted" in available_providers()
        assert get_chat_provider(ModelSpec("m", "scripted")) is fake
    finally:
        unregister_provider("scripted")
    assert "scripted" not in available_providers()


def test_the_package_imports_neither_django_nor_the_sdk(tmp_path):
    import subprocess
    import sys

    code = "import sys, achilles.llm; print('django' in sys.modules, 'openai' in sys.modules)"
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        cwd=str(_root()),
    )
    assert out.stdout.split() == ["False", "False"]


def _root():
    from pathlib import Path

    return Path(__file__).resolve().parents[3]
