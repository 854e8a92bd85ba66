"""The sync agent ships alone as a publication artifact: it must not import Django (nor the hub's
Django modules), and neither must the emulator."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
MODULES = [
    "syncagent",
    "syncagent.__main__",
    "syncagent.agent",
    "syncagent.run",
    "syncagent.package",
    "syncagent.commands",
    "syncagent.sync",
    "emulators.jira",
    "emulators.jira.__main__",
]


def test_importing_with_django_blocked_works():
    code = (
        "import sys; sys.modules['django'] = None\n"  # any `import django…` now raises ImportError
        + "".join(f"import {m}\n" for m in MODULES)
        + "assert not any(name == 'django' or name.startswith('django.') for name in sys.modules if sys.modules[name] is not None)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO,
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO)},
    )
    assert done.returncode == 0, done.stderr


def test_no_source_file_imports_django_or_the_hub_app():
    offenders = []
    for folder in ("syncagent", "emulators/jira"):
        for path in (REPO / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                names = (
                    [a.name for a in node.names]
                    if isinstance(node, ast.Import)
                    else ([node.module or ""] if isinstance(node, ast.ImportFrom) else [])
                )
                for name in names:
                    allowed = name.startswith(("syncagent", "emulators.jira"))
                    if name.split(".")[0] == "django" or (
                        name.split(".")[0] in ("hub", "achilles", "agents", "conversations", "knowledge", "usage")
                        and not allowed
                    ):
                        offenders.append(f"{path.relative_to(REPO)}: {name}")
    assert offenders == []
