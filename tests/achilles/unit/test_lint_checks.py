"""The project's own lint checks (``scripts/lint_checks.py``, run by ``make lint``) catch what they
are for — a violation planted into the real modules — and pass the repository as it is."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
_spec = importlib.util.spec_from_file_location("lint_checks", ROOT / "scripts" / "lint_checks.py")
assert _spec is not None and _spec.loader is not None
lint_checks = importlib.util.module_from_spec(_spec)
sys.modules["lint_checks"] = lint_checks  # dataclasses look their module up
_spec.loader.exec_module(lint_checks)


def _codes(path: str, source: str) -> list[tuple[str, int]]:
    return [(v.code, v.line) for v in lint_checks.check_source(path, source)]


def _planted(path: str, function: str) -> tuple[str, int]:
    """The real module at ``path`` with ``function`` appended; the line of its last statement."""
    source = (ROOT / path).read_text(encoding="utf-8") + "\n\n" + function
    return source, len(source.splitlines())


@pytest.mark.parametrize(
    "read",
    ["row[3]", "r[6]", "cursor.fetchone()[0]", "rows[-1]", "row[4:]", "row[1:3]", "(row or ())[2]"],
)
def test_a_positional_row_read_planted_in_the_search_is_caught(read):
    # given the real hybrid.py (no violation) with a function reading a row by position
    source, line = _planted("knowledge/search/hybrid.py", f"def planted(row, r, rows, cursor):\n    return {read}\n")
    # when / then
    assert _codes("knowledge/search/hybrid.py", source) == [("ROW001", line)]


def test_a_positional_row_read_planted_in_the_protocol_is_caught():
    source, line = _planted("hub/protocol.py", "def planted(rows):\n    return [r[1] for r in rows]\n")
    assert _codes("hub/protocol.py", source) == [("ROW001", line)]


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
    assert _codes("knowledge/search/vector.py", source) == []


def test_unpacking_passes():
    source = (
        "def ok(cursor):\n    (plan,) = cursor.fetchone()\n    a, b, *_ = cursor.fetchone()\n    return plan, a, b\n"
    )
    assert _codes("knowledge/search/lexical.py", source) == []


def test_an_explicit_allowance_needs_a_reason():
    allowed = "def ok(levels):\n    return levels[1:]  # lint: positional-ok (the levels, not a row)\n"
    bare = "def bad(levels):\n    return levels[1:]  # lint: positional-ok\n"
    assert _codes("knowledge/search/lexical.py", allowed) == []
    assert _codes("knowledge/search/lexical.py", bare) == [("ROW001", 2)]


def test_modules_outside_the_search_and_the_protocol_are_not_read_for_rows():
    assert _codes("knowledge/services.py", "def f(row):\n    return row[3]\n") == []


def test_an_orm_call_planted_in_an_api_module_is_caught():
    # given the real hub/api.py (no ORM) with a route reading a model itself
    source, line = _planted("hub/api.py", "def planted(request):\n    return Command.objects.filter(pk=1).first()\n")
    assert _codes("hub/api.py", source) == [("ORM001", line)]
    # and a view
    view = "def page(request):\n    return render(request, 'x.html', {'n': Agent.objects.count()})\n"
    assert _codes("agents/views.py", view) == [("ORM001", 2)]


def test_listed_orm_exceptions_pass_only_in_their_function():
    listed = "def knowledge_status(request):\n    return Record.objects.count()\n"
    other = "def knowledge_other(request):\n    return Record.objects.count()\n"
    assert _codes("knowledge/api.py", listed) == []
    assert _codes("knowledge/api.py", other) == [("ORM001", 2)]


def test_a_complex_function_planted_in_the_search_is_caught():
    branches = "".join(f"    if x == {n}:\n        return {n}\n" for n in range(15))
    source, _ = _planted("knowledge/search/vector.py", f"def planted(x):\n{branches}    return -1\n")
    assert [code for code, _ in _codes("knowledge/search/vector.py", source)] == ["CC001"]


def test_the_repository_passes(capsys):
    assert lint_checks.main([]) == 0, capsys.readouterr().out


def test_a_library_private_name_planted_outside_the_compat_module_is_caught():
    # given the real knowledge/services.py with a use of Django's prefetch cache
    source, line = _planted("knowledge/services.py", "def planted(queryset):\n    return queryset._result_cache\n")
    assert _codes("knowledge/services.py", source) == [("PRIV001", line)]
    # and by name through getattr
    source, line = _planted("hub/services.py", 'def planted(pool):\n    return getattr(pool, "_getconn_unchecked")\n')
    assert _codes("hub/services.py", source) == [("PRIV001", line)]


def test_private_names_pass_in_the_compat_module_and_for_the_module_own():
    use = "def f(queryset):\n    return queryset._result_cache\n"
    own = "class A:\n    def _helper(self):\n        return 1\n\ndef f(a: A):\n    return a._helper()\n"
    documented = "def f(obj):\n    return obj._meta.label, obj._state.adding\n"
    assert _codes("achilles/compat.py", use) == []
    assert _codes("knowledge/services.py", own) == []
    assert _codes("knowledge/services.py", documented) == []
