"""`make bench` → `python -m bench [NAME ...]`: run every benchmark (or the named ones).

Each benchmark measures our figure and its peer's side by side in the same run and prints both.
"""

from __future__ import annotations

import importlib
import os
import pkgutil
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
    failed = []
    for name in names:
        print(f"\n=== bench/{name} ===", flush=True)
        started = time.monotonic()
        try:
            importlib.import_module(f"bench.{name}").main()
        except Exception as exc:  # one broken benchmark must not hide the others
            failed.append(name)
            print(f"bench/{name} failed: {exc!r}")
        print(f"--- bench/{name}: {time.monotonic() - started:.1f}s", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
