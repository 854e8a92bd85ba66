"""Conventions of the search orchestration and the sync-agent protocol the linters do not know,
checked on the syntax tree (``make lint``), in the manner of ``scripts/check_conventions.py`` (one
function per check yielding findings; a merge may fold these functions into it).

- ``positional-row``: no result row read by position (``row[4]``, ``r[6]``, ``fetchone()[0]``,
  ``row[1:]``) in ``knowledge/search/`` and ``hub/protocol.py``: name the columns next to the
  statement (a class of ``Final`` ints: ``row[Detail.TITLE]``) or unpack the row. A subscript that
  is not a result row says so on its line: ``# lint: positional-ok (why)``. A truncation
  (``text[:500]``) is not a read by position.
- ``complexity``: no function there at cyclomatic complexity ``CC_MAX`` or more (radon's count);
  the ones above it when the check came are listed in ``CC_ALLOWED`` with their figure, which they
  may not exceed.

``python scripts/check_orchestration.py`` prints one line per finding (``path:line: check: message``)
and exits 1 when there is any; ``tests/achilles/unit/test_check_orchestration.py`` plants a violation
of each check.
"""

from __future__ import annotations

import ast
import fnmatch
import re
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from radon.complexity import cc_visit

ROOT = Path(__file__).resolve().parent.parent
ORCHESTRATION = ("knowledge/search/*.py", "hub/protocol.py")


@dataclass(frozen=True)
class Finding:
    path: str
    line: int
    check: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.check}: {self.message}"


def _in_orchestration(path: str) -> bool:
    return any(fnmatch.fnmatchcase(path, pattern) for pattern in ORCHESTRATION)


# ---------------------------------------------------------------- positional-row

POSITIONAL_OK = re.compile(r"#\s*lint:\s*positional-ok\s*\(\s*\S[^)]*\)")


def _int_literal(node: ast.expr | None) -> bool:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        node = node.operand
    return isinstance(node, ast.Constant) and type(node.value) is int


def _positional(index: ast.expr) -> bool:
    """An index by a number (``[3]``, ``[-1]``) or a slice from one (``[1:]``, ``[2:5]``)."""
    if isinstance(index, ast.Slice):
        return _int_literal(index.lower)
    return _int_literal(index)


def positional_row_findings(path: str, tree: ast.AST, source_lines: list[str]) -> Iterator[Finding]:
    """``x[<number>]`` or ``x[<number>:]`` in the orchestration, unless its line says why it is no row."""
    if not _in_orchestration(path):
        return
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Subscript) and _positional(node.slice)):
            continue
        lines = range(node.lineno, (node.end_lineno or node.lineno) + 1)
        if any(POSITIONAL_OK.search(source_lines[n - 1]) for n in lines if n <= len(source_lines)):
            continue
        yield Finding(
            path,
            node.lineno,
            "positional-row",
            f"`{ast.unparse(node)}` reads by position: name the columns next to the statement "
            "(row[Cols.NAME]) or unpack the row; not a row: `# lint: positional-ok (why)`",
        )


# ---------------------------------------------------------------- complexity

CC_MAX = 15
# (path, function) → the complexity it had when the check came, which it may not exceed.
CC_ALLOWED: dict[tuple[str, str], int] = {
    ("knowledge/search/lexical.py", "lower_levels_statement"): 20,
    ("knowledge/search/withheld.py", "query_topic"): 15,
    ("hub/protocol.py", "sync_agent_claim"): 24,
    ("hub/protocol.py", "sync_agent_report"): 30,  # +1: a created key replaces its `$N` in the batch
    ("hub/protocol.py", "mirror_upload"): 29,  # the upload row built apart (_upload_row)
}


def complexity_findings(path: str, source: str) -> Iterator[Finding]:
    """Functions (and methods) of the orchestration at ``CC_MAX`` or above their ``CC_ALLOWED`` figure."""
    if not _in_orchestration(path):
        return
    for block in cc_visit(source):
        limit = CC_ALLOWED.get((path, block.name), CC_MAX - 1)
        if block.complexity > limit:
            yield Finding(
                path,
                block.lineno,
                "complexity",
                f"{block.name} has cyclomatic complexity {block.complexity} (at most {limit}): split it",
            )


# ---------------------------------------------------------------- running


def check_source(path: str, source: str) -> list[Finding]:
    """Every finding of the checks for one file (``path`` relative to the repository, with ``/``)."""
    if not _in_orchestration(path):
        return []
    tree = ast.parse(source, filename=path)
    lines = source.splitlines()
    return [*positional_row_findings(path, tree, lines), *complexity_findings(path, source)]


def product_files(root: Path = ROOT) -> Iterable[Path]:
    for pattern in ORCHESTRATION:
        yield from sorted(root.glob(pattern))


def check_tree(root: Path = ROOT) -> list[Finding]:
    findings: list[Finding] = []
    for file in product_files(root):
        findings.extend(check_source(file.relative_to(root).as_posix(), file.read_text(encoding="utf-8")))
    return findings


def main() -> int:
    findings = check_tree()
    for finding in findings:
        print(finding)
    if findings:
        print(f"{len(findings)} finding(s) (scripts/check_orchestration.py)")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
