"""A Confluence DC emulator on loopback for tests (``emulators.confluence``), one per use.

``with running_confluence(store) as server:`` serves `store` on a free port (``server.url`` is the
base URL with the context path, ``server.store`` the state); ``confluence_fixture(build)`` makes a
pytest fixture of it::

    confluence = confluence_fixture(lambda: my_store(), scope="module")
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

import pytest

from emulators.confluence import ConfluenceServer, ConfluenceStore, serve


@contextlib.contextmanager
def running_confluence(store: ConfluenceStore | None = None) -> Iterator[ConfluenceServer]:
    server = serve(store if store is not None else ConfluenceStore(), host="127.0.0.1", port=0)
    try:
        yield server
    finally:
        server.stop()


def confluence_fixture(build: Callable[[], ConfluenceStore], *, scope: str = "function") -> Callable[..., object]:
    @pytest.fixture(scope=scope)  # type: ignore[call-overload]
    def _fixture() -> Iterator[ConfluenceServer]:
        with running_confluence(build()) as server:
            yield server

    return _fixture
