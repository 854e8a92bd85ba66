"""What the planner's statistics say about a search's shape, asked once in a while.

The verdicts of ``vector.nearest_exact`` and ``lexical.lexical_one_pass`` come from ``EXPLAIN`` and
``pg_stats``: they move only with the table's statistics (ANALYZE), and asking costs a round trip,
so each is kept for ``seconds`` per key. Bounded: a full memo starts afresh.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

T = TypeVar("T")

STATISTICS_SECONDS = 60.0
STATISTICS_KEYS = 4096


class StatisticsMemo(Generic[T]):
    """Values per key, each asked again after ``seconds``. Plain dict operations: safe under the GIL
    for the search threads (two asking at once both ask; the later answer stays)."""

    def __init__(self, seconds: float = STATISTICS_SECONDS, size: int = STATISTICS_KEYS) -> None:
        self.seconds = seconds
        self.size = size
        self._values: dict[Hashable, tuple[T, float]] = {}

    def get(self, key: Hashable, ask: Callable[[], T]) -> T:
        now = time.monotonic()
        kept = self._values.get(key)
        if kept is not None:
            kept_value, asked_at = kept
            if now - asked_at < self.seconds:
                return kept_value
        value = ask()
        if len(self._values) >= self.size:
            self._values.clear()
        self._values[key] = (value, now)
        return value

    def peek(self, key: Hashable) -> T | None:
        """The value kept for ``key``, fresh or not (tests)."""
        kept_value, _ = self._values.get(key, (None, 0.0))
        return kept_value

    def clear(self) -> None:
        self._values.clear()
