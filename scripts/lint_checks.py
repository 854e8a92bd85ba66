"""The project's own lint checks (``make lint``): conventions ruff and import-linter cannot express.

In the manner of Zulip's ``tools/lint`` and Sentry's flake8 plugins: each check is a function over
one parsed module (``Module``) yielding violations, and ``CHECKS`` says which files each one reads.
A check that keeps a convention lists its accepted exceptions explicitly, with the reason, beside
it; anything else it finds fails the lint.

    python scripts/lint_checks.py            # every check over the repository; exit 1 on a violation
    python scripts/lint_checks.py FILE...    # only these files (each check still picks its own)

Checks:
  ROW001  positional read of a result row (``row[4]``, ``r[6]``, ``fetchone()[0]``, ``row[1:]``) in
          the search orchestration and the sync-agent protocol: name the columns next to the
          statement (a class of ``Final`` ints: ``row[Detail.TITLE]``) or unpack the row. A
          subscript that is not a result row says so on its line: ``# lint: positional-ok (why)``.
  ORM001  an ORM call (``Model.objects``) in an API module or a view: they parse, call a service
          or selector, and render (``docs/architecture.md``, STYLE.md). Existing ones are listed
          in ``ORM_ALLOWED`` by module and function.
  PRIV001 a library's private attribute (``queryset._result_cache``, ``getattr(pool, "_x")``) used
          outside ``achilles/compat.py``, the one module for such uses (each with a test that the
          name still exists and behaves as relied on). A private name the module defines itself is
          its own; the uses still elsewhere are listed in ``PRIVATE_ALLOWED``.
  CC001   a function of the search orchestration or the sync-agent protocol whose cyclomatic
          complexity (radon's) reaches ``CC_MAX``: split it (plan / read / assemble). Those above it
          already are listed in ``CC_ALLOWED`` with their figure, which they may not exceed.
"""

from __future__ import annotations

import ast
import fnmatch
import re
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from radon.complexity import cc_visit

ROOT = Path(__file__).resolve().parent.parent
SKIP_DIRS = {".venv", "var", "node_modules", ".git", ".mypy_cache", "migrations", "tests"}


@dataclass(frozen=True)
class Module:
    """A parsed source file: its path relative to the root (POSIX), lines and tree."""

    path: str
    lines: list[str]
    tree: ast.Module

    @classmethod
    def parse(cls, path: str, source: str) -> Module:
        return cls(path, source.splitlines(), ast.parse(source, filename=path))


@dataclass(frozen=True)
class Violation:
    path: str
    line: int
    code: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.code} {self.message}"


# ---------------------------------------------------------------- ROW001: positional row reads

ROW_FILES = ("knowledge/search/*.py", "hub/protocol.py")
POSITIONAL_OK = re.compile(r"#\s*lint:\s*positional-ok\s*\(\s*\S[^)]*\)")


def _int_literal(node: ast.expr | None) -> bool:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        node = node.operand
    return isinstance(node, ast.Constant) and type(node.value) is int


def _positional(index: ast.expr) -> bool:
    """An index by a number (``[3]``, ``[-1]``) or a slice from one (``[1:]``, ``[2:5]``); a
    truncation (``[:500]``) is not a read by position."""
    if isinstance(index, ast.Slice):
        return _int_literal(index.lower)
    return _int_literal(index)


def _allowed_on(module: Module, node: ast.AST, pattern: re.Pattern[str]) -> bool:
    first = getattr(node, "lineno", 1)
    last = getattr(node, "end_lineno", first) or first
    return any(pattern.search(module.lines[n - 1]) for n in range(first, last + 1) if n <= len(module.lines))


def positional_row_reads(module: Module) -> Iterator[Violation]:
    """ROW001: ``x[<number>]`` or ``x[<number>:]`` in the modules that read result rows."""
    for node in ast.walk(module.tree):
        if isinstance(node, ast.Subscript) and _positional(node.slice):
            if _allowed_on(module, node, POSITIONAL_OK):
                continue
            yield Violation(
                module.path,
                node.lineno,
                "ROW001",
                f"positional read `{ast.unparse(node)}`: name the columns next to the statement "
                "(row[Cols.NAME]) or unpack the row; not a row: `# lint: positional-ok (why)`",
            )


# ---------------------------------------------------------------- ORM001: no ORM in APIs and views

ORM_FILES = ("*/api.py", "*/views.py", "*/views/*.py")
# (module, function) → why it stays for now. Each is a read a selector should own; listed so that no
# new one lands unnoticed (remove an entry when its call moves into a selector).
ORM_ALLOWED: dict[tuple[str, str], str] = {
    ("agents/api.py", "_model_name"): "the chat model's name for an agent's input (an AllowedModel lookup)",
    ("conversations/api.py", "conversations_list"): "the model names of the listed conversations",
    ("knowledge/api.py", "knowledge_search"): "the staff-only `as_user_id` target user",
    ("knowledge/api.py", "knowledge_status"): "the store's record and chunk counts",
    ("achilles/views.py", "tokens_page"): "the signed-in user's API tokens",
}


def _functions(tree: ast.AST) -> Iterator[tuple[str, ast.AST]]:
    """(enclosing function name or "<module>", node) for every node of ``tree``."""
    stack: list[tuple[str, ast.AST]] = [("<module>", tree)]
    while stack:
        name, node = stack.pop()
        for child in ast.iter_child_nodes(node):
            inner = child.name if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) else name
            yield inner, child
            stack.append((inner, child))


def orm_in_api(module: Module) -> Iterator[Violation]:
    """ORM001: ``<Model>.objects`` in an API module or a view, outside ``ORM_ALLOWED``."""
    for function, node in _functions(module.tree):
        if isinstance(node, ast.Attribute) and node.attr == "objects":
            if (module.path, function) in ORM_ALLOWED:
                continue
            yield Violation(
                module.path,
                node.lineno,
                "ORM001",
                f"ORM call `{ast.unparse(node)}` in {function}: move it into a selector or a service",
            )


# ---------------------------------------------------------------- CC001: complexity of the hot orchestration

CC_FILES = ROW_FILES
CC_MAX = 15
# (module, function) → the complexity it has and may not exceed (written down when the check came).
CC_ALLOWED: dict[tuple[str, str], int] = {
    ("knowledge/search/lexical.py", "lower_levels_statement"): 20,
    ("knowledge/search/withheld.py", "query_topic"): 15,
    ("hub/protocol.py", "sync_agent_claim"): 24,
    ("hub/protocol.py", "sync_agent_report"): 29,
    ("hub/protocol.py", "mirror_upload"): 34,
}


def complexity(module: Module) -> Iterator[Violation]:
    """CC001: functions (and methods) at or above ``CC_MAX``, or above their ``CC_ALLOWED`` figure."""
    for block in cc_visit("\n".join(module.lines)):
        limit = CC_ALLOWED.get((module.path, block.name), CC_MAX - 1)
        if block.complexity > limit:
            yield Violation(
                module.path,
                block.lineno,
                "CC001",
                f"{block.name} has cyclomatic complexity {block.complexity} (at most {limit}): split it",
            )


# ---------------------------------------------------------------- PRIV001: private library names in one place

PRIVATE_FILES = tuple(f"{app}/*.py" for app in ("achilles", "agents", "conversations", "knowledge", "hub", "usage"))
PRIVATE_HOME = "achilles/compat.py"
# Underscored names that are public API: Django's model options and instance state (documented:
# ``Model._meta``, ``Model._state``), namedtuple's methods, os._exit.
PRIVATE_PUBLIC = {
    "_meta",
    "_state",
    "_default_manager",
    "_base_manager",
    "_replace",
    "_asdict",
    "_fields",
    "_make",
    "_exit",
}
# (module, name) → what it is; each is to move into achilles/compat.py (or go).
PRIVATE_ALLOWED: dict[tuple[str, str], str] = {
    ("achilles/services.py", "_result_cache"): "Django's prefetch cache, filled by hand for the token's user",
    ("achilles/services.py", "_prefetch_done"): "Django's prefetch cache, filled by hand",
    ("achilles/services.py", "_prefetched_objects_cache"): "Django's prefetch cache, filled by hand",
    ("achilles/identity.py", "_prefetched_objects_cache"): "reads the prefetch cache filled above",
    ("achilles/inline_middleware.py", "_messages"): "django.contrib.messages' storage on the request",
    ("achilles/auth.py", "_get_key"): "an override of the parent class's hook",
    ("achilles/broker.py", "_get_pool"): "an override of kombu's Redis transport hook",
    ("achilles/embedded.py", "_lock"): "the embedded server object's lock",
    ("knowledge/search/vector.py", "_getconn_unchecked"): "psycopg_pool's connection without its check",
    ("knowledge/parsers/office.py", "_tc"): "python-docx's cell element (merged cells share one)",
    ("knowledge/management/commands/ingest.py", "_out"): "Django's OutputWrapper's stream, for tqdm",
    ("knowledge/management/commands/reembed.py", "_out"): "Django's OutputWrapper's stream, for tqdm",
    ("hub/mcp/server.py", "_input_params"): "the MCP SDK's request context's raw arguments",
}


def _own_names(tree: ast.AST) -> set[str]:
    """Names the module defines: functions, classes, assigned names and attributes, keywords."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            names.add(node.attr)
        elif isinstance(node, ast.arg) or isinstance(node, ast.keyword) and node.arg:
            names.add(node.arg)
        elif isinstance(node, ast.alias):
            names.add((node.asname or node.name).split(".")[0])
    return names


def _private_uses(tree: ast.AST) -> Iterator[tuple[int, str]]:
    """(line, name) of ``x._name`` (not on self or cls) and of ``getattr/setattr/hasattr(x, "_name")``."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            owner = node.value
            if isinstance(owner, ast.Name) and owner.id in ("self", "cls"):
                continue
            yield node.lineno, node.attr
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("getattr", "setattr", "hasattr", "delattr")
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str)
        ):
            yield node.lineno, node.args[1].value


def private_names(module: Module) -> Iterator[Violation]:
    """PRIV001: a private name of another module's object used outside ``PRIVATE_HOME``."""
    if module.path == PRIVATE_HOME:
        return
    own = None
    for line, name in _private_uses(module.tree):
        if not name.startswith("_") or name.startswith("__") or name in PRIVATE_PUBLIC:
            continue
        if (module.path, name) in PRIVATE_ALLOWED:
            continue
        own = _own_names(module.tree) if own is None else own
        if name in own:
            continue
        yield Violation(
            module.path, line, "PRIV001", f"private name `{name}` of a library: use it in {PRIVATE_HOME}, with a test"
        )


# ---------------------------------------------------------------- running

Check = Callable[[Module], Iterator[Violation]]
CHECKS: list[tuple[tuple[str, ...], Check]] = [
    (ROW_FILES, positional_row_reads),
    (ORM_FILES, orm_in_api),
    (CC_FILES, complexity),
    (PRIVATE_FILES, private_names),
]


def _matches(path: str, patterns: tuple[str, ...]) -> bool:
    return any(fnmatch.fnmatchcase(path, pattern) for pattern in patterns)


def check_source(path: str, source: str) -> list[Violation]:
    """Every check that reads ``path`` (relative, POSIX), run over ``source``."""
    checks = [check for patterns, check in CHECKS if _matches(path, patterns)]
    if not checks:
        return []
    module = Module.parse(path, source)
    return [violation for check in checks for violation in check(module)]


def repository_files(root: Path = ROOT) -> Iterator[Path]:
    for path in sorted(root.rglob("*.py")):
        if not SKIP_DIRS.intersection(path.relative_to(root).parts):
            yield path


def stale_allowances(files: list[str]) -> list[str]:
    """ORM_ALLOWED entries whose module no longer has that function calling the ORM."""
    used = set()
    for path in files:
        if _matches(path, ORM_FILES):
            module = Module.parse(path, (ROOT / path).read_text(encoding="utf-8"))
            used |= {
                (path, function)
                for function, node in _functions(module.tree)
                if isinstance(node, ast.Attribute) and node.attr == "objects"
            }
    return [f"{path}:{function}" for path, function in ORM_ALLOWED if (path, function) not in used]


def main(argv: list[str]) -> int:
    paths = [Path(arg).resolve() for arg in argv] or list(repository_files())
    files = [path.relative_to(ROOT).as_posix() for path in paths]
    violations = [v for path in files for v in check_source(path, (ROOT / path).read_text(encoding="utf-8"))]
    for violation in violations:
        print(violation)
    stale = stale_allowances(files) if not argv else []
    for entry in stale:
        print(f"{entry}: ORM_ALLOWED lists it, but it no longer calls the ORM: remove the entry")
    return 1 if violations or stale else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
