"""`make bench` → `python -m bench [NAME ...]`: run every benchmark (or the named ones).

Each benchmark measures our figure and its peer's side by side in the same run and prints both.
Run together, each benchmark runs in a child process of its own: one leaves a process's Django
connection and pool pointed at its scratch database, which the next must not inherit.
"""

from __future__ import annotations

import importlib
import os
import pkgutil
import subprocess
import sys
import time
from pathlib import Path


def discover() -> list[str]:
    here = Path(__file__).parent
    return sorted(m.name for m in pkgutil.iter_modules([str(here)]) if not m.name.startswith("_"))


def main(argv: list[str]) -> int:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "achilles.settings")
    from achilles.bootstrap import bootstrap

    bootstrap()
    names = argv or discover()
    unknown = set(names) - set(discover())
    if unknown:
        print(f"unknown benchmark(s): {', '.join(sorted(unknown))}; have: {', '.join(discover())}")
        return 2
    if len(names) > 1:
        failed = [
            name
            for name in names
            if subprocess.run([sys.executable, "-m", "bench", name], cwd=Path(__file__).parent.parent).returncode
        ]
        if failed:
            print(f"\nfailed: {', '.join(failed)}")
        return 1 if failed else 0
    [name] = names
    print(f"\n=== bench/{name} ===", flush=True)
    started = time.monotonic()
    try:
        importlib.import_module(f"bench.{name}").main()
    except Exception as exc:
        print(f"bench/{name} failed: {exc!r}")
        return 1
    finally:
        print(f"--- bench/{name}: {time.monotonic() - started:.1f}s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
