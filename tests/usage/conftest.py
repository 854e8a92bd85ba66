"""«Расходы AI» fixtures: the Query Engine's scripted chat turns (``engine``) reused as they are."""

from tests.conversations.conftest import chat_model, engine, fake_cache, stub_ks  # noqa: F401
