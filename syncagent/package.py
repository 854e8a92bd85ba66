"""Build a sync-agent publication artifact: a ``.tar.gz`` whose root holds ``syncagent/``.

``python -m syncagent.package --version 7 --out syncagent-v7.tar.gz`` packs this very package
with ``version.py`` set to 7; publish the file with ``manage.py hub_publish`` or the Django admin.
"""

from __future__ import annotations

import argparse
import io
import tarfile
import time
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent


def _add_bytes(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mtime = int(time.time())
    info.mode = 0o644
    tar.addfile(info, io.BytesIO(data))


def build_artifact(version: int, *, source: Path = PACKAGE_DIR, replace: dict[str, str] | None = None) -> bytes:
    """The package at ``source`` as version ``version``; ``replace`` overrides files (relative paths → text)."""
    replace = dict(replace or {})
    replace["version.py"] = (
        f'"""The sync agent\'s version (set by the publication build)."""\n\nVERSION = {int(version)}\n'
    )
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for path in sorted(source.rglob("*")):
            rel = path.relative_to(source).as_posix()
            if "__pycache__" in rel or path.is_dir() or path.suffix in (".pyc", ".tmp"):
                continue
            if rel in replace:
                continue
            _add_bytes(tar, f"syncagent/{rel}", path.read_bytes())
        for rel, text in replace.items():
            _add_bytes(tar, f"syncagent/{rel}", text.encode())
    return buf.getvalue()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m syncagent.package")
    p.add_argument("--version", type=int, required=True)
    p.add_argument("--out", required=True)
    args = p.parse_args(argv)
    Path(args.out).write_bytes(build_artifact(args.version))
    print(args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
