"""Every error code the product raises is registered in ``achilles.error_codes.ErrorCode`` and
documented in the table of ``docs/api.md``; every registered code is raised somewhere.

The codes are read from the source: each ``code=`` / ``error_code=`` keyword given a string (or a
module-level string constant), each class's own ``code = …``, and the status → code tables of the
HTTP layer (``*_ERROR_CODES`` / ``*_ERRORS`` dicts)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from achilles.error_codes import ErrorCode

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[3]
PACKAGES = ("achilles", "agents", "conversations", "knowledge", "hub", "usage")
REGISTRY = ROOT / "achilles" / "error_codes.py"


def _files() -> list[Path]:
    return [
        f
        for package in PACKAGES
        for f in sorted((ROOT / package).rglob("*.py"))
        if "migrations" not in f.parts and f != REGISTRY
    ]


def _string_constants(trees: dict[Path, ast.Module]) -> dict[str, set[str]]:
    """Module-level ``NAME = "text"`` across the product: name → its values."""
    constants: dict[str, set[str]] = {}
    for tree in trees.values():
        for node in tree.body:
            if (
                isinstance(node, ast.Assign)
                and isinstance(node.value, ast.Constant)
                and isinstance(node.value.value, str)
            ):
                for target in node.targets:
                    if isinstance(target, ast.Name):
                        constants.setdefault(target.id, set()).add(node.value.value)
    return constants


def _values(node: ast.expr, constants: dict[str, set[str]]) -> set[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return {node.value} if node.value else set()  # "" clears a stored code
    if isinstance(node, ast.Name) and node.id.isupper():
        return constants.get(node.id, set())
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get":
        return set().union(*(_values(arg, constants) for arg in node.args[1:]))  # a table's default
    return set()


def codes_in_source(sources: dict[Path, str]) -> dict[str, set[str]]:
    """code → the files that pass it."""
    trees = {path: ast.parse(text) for path, text in sources.items()}
    constants = _string_constants(trees)
    found: dict[str, set[str]] = {}

    def add(values: set[str], path: Path) -> None:
        for value in values:
            found.setdefault(value, set()).add(path.name)

    for path, tree in trees.items():
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                for keyword in node.keywords:
                    if keyword.arg in ("code", "error_code"):
                        add(_values(keyword.value, constants), path)
            elif isinstance(node, ast.ClassDef):
                for statement in node.body:
                    if isinstance(statement, ast.Assign) and any(
                        isinstance(t, ast.Name) and t.id == "code" for t in statement.targets
                    ):
                        add(_values(statement.value, constants), path)
            elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Dict):
                names = [t.id for t in node.targets if isinstance(t, ast.Name)]
                if any(n.endswith(("ERROR_CODES", "_ERRORS")) for n in names):
                    for value in node.value.values:
                        add(_values(value, constants), path)
            elif isinstance(node, ast.Dict):
                for key, value in zip(node.keys, node.values, strict=True):
                    if isinstance(key, ast.Constant) and key.value == "code":
                        add(_values(value, constants), path)
    return found


def documented_codes() -> set[str]:
    text = (ROOT / "docs" / "api.md").read_text(encoding="utf-8")
    table = text.split("## Error codes", 1)[1]
    return set(re.findall(r"^\| `([a-z0-9_]+)` \|", table, flags=re.MULTILINE))


@pytest.fixture(scope="module")
def raised() -> dict[str, set[str]]:
    return codes_in_source({f: f.read_text(encoding="utf-8") for f in _files()})


def test_every_code_raised_is_registered(raised):
    missing = {code: sorted(files) for code, files in raised.items() if code not in set(ErrorCode)}
    assert missing == {}, "register these in achilles/error_codes.py (and docs/api.md's table)"


def test_every_registered_code_is_raised_somewhere(raised):
    unused = sorted(set(ErrorCode) - set(raised))
    assert unused == [], "no code raises these: remove them from the registry and the table"


def test_the_registry_and_the_api_docs_table_list_the_same_codes():
    documented = documented_codes()
    assert sorted(set(ErrorCode) - documented) == [], "document these in docs/api.md § Error codes"
    assert sorted(documented - set(ErrorCode)) == [], "documented but not registered"


def test_a_member_is_its_code():
    assert ErrorCode.TURN_IN_PROGRESS == "turn_in_progress"
    assert all(member.value == member.name.lower() for member in ErrorCode)


def test_the_reader_finds_each_form_of_code():
    source = (
        'LLM_X = "llm_x"\n'
        "class E(Exception):\n"
        '    code = "class_code"\n'
        'raise Conflict("m", code="kw_code")\n'
        "raise LLMError('m', code=LLM_X)\n"
        'done(error_code="doc_code")\n'
        '_HTTP_ERROR_CODES = {400: "table_code"}\n'
        'body = {"detail": "d", "code": "dict_code"}\n'
        "close(code=4401)\n"
        'clear(error_code="")\n'
        'raise ApplicationError("m", code=_STATUS.get(status, "fallback_code"))\n'
    )
    found = codes_in_source({Path("m.py"): source})
    assert set(found) == {"llm_x", "class_code", "kw_code", "doc_code", "table_code", "dict_code", "fallback_code"}
