"""The memo behind the search's planner verdicts (``knowledge.search.memo``)."""

from __future__ import annotations

import pytest

from knowledge.search import memo
from knowledge.search.memo import StatisticsMemo


def test_a_value_is_asked_once_per_key_until_it_expires(monkeypatch):
    now = [100.0]
    monkeypatch.setattr(memo.time, "monotonic", lambda: now[0])
    asked: list[str] = []
    kept: StatisticsMemo[int] = StatisticsMemo(seconds=60.0)

    def ask(key: str, value: int):
        def run() -> int:
            asked.append(key)
            return value

        return run

    assert kept.get("a", ask("a", 1)) == 1
    assert kept.get("a", ask("a", 2)) == 1  # kept
    assert kept.get("b", ask("b", 3)) == 3  # another key asks for itself
    now[0] += 59.9
    assert kept.get("a", ask("a", 4)) == 1
    now[0] += 0.1  # a minute old: asked again, the new answer kept
    assert kept.get("a", ask("a", 5)) == 5
    assert asked == ["a", "b", "a"]
    assert kept.peek("a") == 5 and kept.peek("c") is None


def test_a_full_memo_starts_afresh():
    kept: StatisticsMemo[int] = StatisticsMemo(size=2)
    kept.get(1, lambda: 1)
    kept.get(2, lambda: 2)
    kept.get(3, lambda: 3)
    assert kept.peek(1) is None and kept.peek(2) is None and kept.peek(3) == 3
    kept.clear()
    assert kept.peek(3) is None


def test_a_failed_question_keeps_nothing():
    kept: StatisticsMemo[int] = StatisticsMemo()

    def fail() -> int:
        raise RuntimeError("the database is away")

    with pytest.raises(RuntimeError):
        kept.get("a", fail)
    assert kept.peek("a") is None
    assert kept.get("a", lambda: 7) == 7
