"""``scripts/check_orchestration.py`` (``make lint``) catches what it is for — a violation planted
into the real modules — and passes the repository as it is."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
_spec = importlib.util.spec_from_file_location("check_orchestration", ROOT / "scripts" / "check_orchestration.py")
assert _spec is not None and _spec.loader is not None
check_orchestration = importlib.util.module_from_spec(_spec)
sys.modules["check_orchestration"] = check_orchestration  # dataclasses look their module up
_spec.loader.exec_module(check_orchestration)


def _found(path: str, source: str) -> list[tuple[str, int]]:
    return [(f.check, f.line) for f in check_orchestration.check_source(path, source)]


def _planted(path: str, function: str) -> tuple[str, int]:
    """The real module at ``path`` with ``function`` appended; the line of its last statement."""
    source = (ROOT / path).read_text(encoding="utf-8") + "\n\n" + function
    return source, len(source.splitlines())


@pytest.mark.parametrize(
    "read",
    ["row[3]", "r[6]", "cursor.fetchone()[0]", "rows[-1]", "row[4:]", "row[1:3]", "(row or ())[2]"],
)
def test_a_positional_row_read_planted_in_the_search_is_caught(read):
    # given the real hybrid.py (no finding) with a function reading a row by position
    source, line = _planted("knowledge/search/hybrid.py", f"def planted(row, r, rows, cursor):\n    return {read}\n")
    # when / then
    assert _found("knowledge/search/hybrid.py", source) == [("positional-row", line)]


def test_a_positional_row_read_planted_in_the_protocol_is_caught():
    source, line = _planted("hub/protocol.py", "def planted(rows):\n    return [r[1] for r in rows]\n")
    assert _found("hub/protocol.py", source) == [("positional-row", line)]


@pytest.mark.parametrize(
    "read",
    [
        "row[Detail.TITLE]",  # a named column
        "row[LevelRow.CHUNK_ID :]",  # the details from a named column on
        "text[:500]",  # a truncation
        "row[index]",
        "payload['keys']",
    ],
)
def test_named_reads_pass(read):
    source = f"def ok(row, text, index, payload):\n    return {read}\n"
    assert _found("knowledge/search/vector.py", source) == []


def test_unpacking_passes():
    source = (
        "def ok(cursor):\n    (plan,) = cursor.fetchone()\n    a, b, *_ = cursor.fetchone()\n    return plan, a, b\n"
    )
    assert _found("knowledge/search/lexical.py", source) == []


def test_an_explicit_allowance_needs_a_reason():
    allowed = "def ok(levels):\n    return levels[1:]  # lint: positional-ok (the levels, not a row)\n"
    bare = "def bad(levels):\n    return levels[1:]  # lint: positional-ok\n"
    assert _found("knowledge/search/lexical.py", allowed) == []
    assert _found("knowledge/search/lexical.py", bare) == [("positional-row", 2)]


def test_modules_outside_the_orchestration_are_not_read():
    assert _found("knowledge/services.py", "def f(row):\n    return row[3]\n") == []


def test_a_complex_function_planted_in_the_search_is_caught():
    branches = "".join(f"    if x == {n}:\n        return {n}\n" for n in range(15))
    source, _ = _planted("knowledge/search/vector.py", f"def planted(x):\n{branches}    return -1\n")
    assert [check for check, _ in _found("knowledge/search/vector.py", source)] == ["complexity"]


def test_a_listed_function_may_not_grow():
    # given mirror_upload at its listed figure, one more branch
    source = (ROOT / "hub/protocol.py").read_text(encoding="utf-8")
    grown = source.replace(
        "    seen: dict[str, dict] = {}\n", "    seen: dict[str, dict] = {}\n    if not issues:\n        pass\n", 1
    )
    assert grown != source
    assert _found("hub/protocol.py", source) == []
    assert [check for check, _ in _found("hub/protocol.py", grown)] == ["complexity"]


def test_the_repository_passes():
    assert check_orchestration.check_tree() == []
