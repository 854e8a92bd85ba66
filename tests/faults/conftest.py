"""The fault suite (marker ``faults``): Redis and PostgreSQL stopped and started again, worker
processes killed, with live agent runs and chat streams. Only the embedded services can be
restarted from here; with configured REDIS_URL/DATABASE_URL the suite is skipped."""

from __future__ import annotations

import pytest

from tests.processes import embedded_services, redis_start


def pytest_collection_modifyitems(config, items):
    for item in items:
        if "/faults/" in str(item.path):
            item.add_marker(pytest.mark.faults)
            if not embedded_services():
                item.add_marker(pytest.mark.skip(reason="needs the embedded PostgreSQL and Redis to restart them"))


@pytest.fixture(autouse=True)
def _redis_back_after_the_test():
    """Whatever a test stopped comes back, so the next test (and the suite's teardown) finds Redis."""
    yield
    redis_start()


# The chat engine's fixtures (a scripted model, a stub knowledge store), for the chat fault tests.
from tests.conversations.conftest import chat_model, engine, fake_cache, stub_ks  # noqa: E402, F401
