"""A benchmark's measurement in a child process bound to a scratch database of its own, created
before and dropped after, so a run never touches the development data."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run_in_scratch_database(*, module: str, database: str) -> None:
    import django  # noqa: PLC0415 — Django is set up only in the parent process, on call

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "achilles.settings")
    django.setup()
    from django.db import connection  # noqa: PLC0415

    def admin_sql(sql: str) -> None:
        with connection.cursor() as cursor:
            cursor.execute(sql)

    admin_sql(f"DROP DATABASE IF EXISTS {database} WITH (FORCE)")
    admin_sql(f"CREATE DATABASE {database}")
    try:
        env = {**os.environ, "ACHILLES_DB_NAME": database, "DJANGO_SETTINGS_MODULE": "achilles.settings"}
        result = subprocess.run([sys.executable, "-m", module], cwd=ROOT, env=env)
        if result.returncode:
            raise RuntimeError(f"{module} child failed with {result.returncode}")
    finally:
        admin_sql(f"DROP DATABASE IF EXISTS {database} WITH (FORCE)")
