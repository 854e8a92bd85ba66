"""House conventions the linters do not know, checked on the syntax tree (`make lint`).

- ``private-attribute``: no ``obj._name`` on anything but ``self``, ``cls`` or ``super()`` outside
  ``achilles/compat.py`` — a library's private names live there, each with a test that it still
  exists in the pinned version. The names libraries document as public in spite of the underscore
  (``PUBLIC_UNDERSCORE_NAMES``) and the uses listed in ``PRIVATE_ALLOWED`` (each with its reason)
  pass.
- ``orm-in-view``: no ``Model.objects`` in the HTTP layer (``api.py``, ``views.py``, ``pages.py``):
  reads go through ``selectors``, writes through ``services`` (STYLE.md). ``ORM_IN_VIEW_ALLOWED``
  lists the exceptions (none today).

``python scripts/check_conventions.py`` prints one line per finding (``path:line: check: message``)
and exits 1 when there is any; ``tests/achilles/unit/test_check_conventions.py`` plants a violation
of each check.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# The product's packages (tests, benchmarks and scripts reach into our own modules on purpose).
PACKAGES = ("achilles", "agents", "conversations", "knowledge", "hub", "usage", "syncagent", "emulators")
COMPAT_MODULE = "achilles/compat.py"

# Underscore names their libraries document as public API.
PUBLIC_UNDERSCORE_NAMES = {
    "_meta": "Django's Model _meta API (docs: ref/models/meta)",
    "_state": "Django's documented ModelState (docs: ref/models/instances, adding/db)",
    "_exit": "os._exit (documented)",
    "_asdict": "namedtuple's documented method",
    "_replace": "namedtuple's documented method",
    "_fields": "namedtuple's documented attribute",
    "_make": "namedtuple's documented classmethod",
}

# (path, or a folder ending in "/"; attribute) → why it stays where it is.
PRIVATE_ALLOWED: dict[tuple[str, str], str] = {
    ("conversations/support.py", "_has_stem"): "the class's own method, called on another instance of it",
    # the emulators import nothing of the platform (import contract), achilles.compat included
    ("emulators/", "_body"): "each emulator's own Handler method, called from its route functions",
    ("knowledge/admin.py", "_chunks"): "the admin's own queryset annotation",
}


def _private_allowed(path: str, name: str) -> bool:
    return any(
        name == allowed and (path == where or (where.endswith("/") and path.startswith(where)))
        for where, allowed in PRIVATE_ALLOWED
    )


# HTTP-layer files allowed a ``.objects`` call: (path, line's stripped source) → why.
ORM_IN_VIEW_ALLOWED: dict[tuple[str, str], str] = {}

HTTP_LAYER_NAMES = ("api.py", "views.py", "pages.py")


@dataclass(frozen=True)
class Finding:
    path: str
    line: int
    check: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.check}: {self.message}"


def _is_dunder(name: str) -> bool:
    return name.startswith("__") and name.endswith("__")


def _is_own(node: ast.expr) -> bool:
    if isinstance(node, ast.Name):
        return node.id in ("self", "cls")
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "super"


def private_attribute_findings(path: str, tree: ast.AST) -> Iterator[Finding]:
    """``obj._name`` on another object than ``self``/``cls``/``super()``, outside the compat module."""
    if path == COMPAT_MODULE:
        return
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute):
            continue
        name = node.attr
        if not name.startswith("_") or _is_dunder(name) or _is_own(node.value):
            continue
        if name in PUBLIC_UNDERSCORE_NAMES or _private_allowed(path, name):
            continue
        yield _private_finding(path, node.lineno, name)
    for node in ast.walk(tree):  # getattr(obj, "_name"), setattr(…), hasattr(…), delattr(…)
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)):
            continue
        if node.func.id not in ("getattr", "setattr", "hasattr", "delattr") or len(node.args) < 2:
            continue
        target, attribute = node.args[0], node.args[1]
        if not (isinstance(attribute, ast.Constant) and isinstance(attribute.value, str)):
            continue
        name = attribute.value
        if not name.startswith("_") or _is_dunder(name) or _is_own(target):
            continue
        if name in PUBLIC_UNDERSCORE_NAMES or _private_allowed(path, name):
            continue
        yield _private_finding(path, node.lineno, name)


def _private_finding(path: str, line: int, name: str) -> Finding:
    return Finding(
        path,
        line,
        "private-attribute",
        f"`.{name}` is private to another object: go through {COMPAT_MODULE} (with a test) or the public API",
    )


def _is_http_layer(path: str) -> bool:
    parts = Path(path).parts
    return parts[-1] in HTTP_LAYER_NAMES or any(p in ("api", "views", "pages") for p in parts[:-1])


def orm_in_view_findings(path: str, tree: ast.AST, source_lines: list[str]) -> Iterator[Finding]:
    """``<something>.objects`` in an ``api.py``/``views.py``/``pages.py``."""
    if not _is_http_layer(path):
        return
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr == "objects":
            line = source_lines[node.lineno - 1].strip() if node.lineno <= len(source_lines) else ""
            if (path, line) in ORM_IN_VIEW_ALLOWED:
                continue
            yield Finding(
                path,
                node.lineno,
                "orm-in-view",
                "an ORM call in the HTTP layer: read through a selector, write through a service",
            )


def check_source(path: str, source: str) -> list[Finding]:
    """Every finding of the checks for one file (``path`` relative to the repository, with ``/``)."""
    tree = ast.parse(source, filename=path)
    lines = source.splitlines()
    return [*private_attribute_findings(path, tree), *orm_in_view_findings(path, tree, lines)]


def product_files(root: Path = ROOT) -> Iterable[Path]:
    for package in PACKAGES:
        for file in sorted((root / package).rglob("*.py")):
            if "migrations" not in file.parts:
                yield file


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
        print(f"{len(findings)} convention finding(s) (scripts/check_conventions.py)")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
