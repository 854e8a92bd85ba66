"""Settings without side effects (issue 11, item 2): importing ``achilles.settings`` used to start
the embedded PostgreSQL and Redis and connect to both. Now it only reads the environment; the
entry points call ``achilles.bootstrap.bootstrap()``. Failed before the change (the empty var
directory got ``pgdata/``, ``redis/`` and lock files, and two servers were left running)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.unit]

ROOT = Path(__file__).resolve().parents[3]

PROBE = r"""
import socket, subprocess, sys
def refuse(*args, **kwargs):
    raise AssertionError(f"import opened a connection or started a process: {args[:2]!r}")
socket.socket.connect = refuse
socket.socket.connect_ex = refuse
subprocess.Popen.__init__ = refuse
import achilles.settings as s
print(s.DATABASES["default"]["HOST"], s.REDIS_URL, s.TESTING)
"""


def _clean_env(var_dir: Path, **extra) -> dict:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in {"DATABASE_URL", "REDIS_URL", "ACHILLES_TESTING", "DJANGO_SETTINGS_MODULE"}
    }
    return {**env, "ACHILLES_VAR_DIR": str(var_dir), **extra}


def _processes_mentioning(text: str) -> list[str]:
    import psutil

    found = []
    for proc in psutil.process_iter(["cmdline"]):
        cmdline = " ".join(proc.info.get("cmdline") or ())
        if text in cmdline:
            found.append(cmdline)
    return found


def test_importing_settings_starts_nothing_and_connects_nowhere(tmp_path):
    var_dir = tmp_path / "var"
    var_dir.mkdir()
    result = subprocess.run(
        [sys.executable, "-c", PROBE], cwd=ROOT, env=_clean_env(var_dir), capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    host, redis_url, testing = result.stdout.split()
    # it names where the embedded services would be, and nothing more
    assert host == str(var_dir / "pgdata") and redis_url == f"unix://{var_dir}/redis/redis.sock"
    assert testing == "False"
    assert list(var_dir.iterdir()) == []
    assert _processes_mentioning(str(var_dir)) == []


def test_the_test_settings_switch_testing_on_explicitly(tmp_path):
    probe = "import achilles.test_settings as s; print(s.TESTING, s.CELERY_TASK_DEFAULT_QUEUE, s.CACHES['default']['KEY_PREFIX'])"
    env = _clean_env(tmp_path, TEST_DATABASE_NAME="test_probe")
    result = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["True", "celery-test_probe", "achilles-test_probe"]
    production = subprocess.run(
        [sys.executable, "-c", probe.replace("test_settings", "settings")],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert production.stdout.split() == ["False", "celery", "achilles"]  # pytest being importable changes nothing


LINT_PROBE = r"""
import socket, subprocess, tomllib
def refuse(*args, **kwargs):
    raise AssertionError(f"setting Django up for mypy opened a connection or started a process: {args[:2]!r}")
socket.socket.connect = refuse
socket.socket.connect_ex = refuse
subprocess.Popen.__init__ = refuse
from mypy_django_plugin.django.context import initialize_django
with open("pyproject.toml", "rb") as f:
    module = tomllib.load(f)["tool"]["django-stubs"]["django_settings_module"]
apps, settings = initialize_django(module)  # what mypy's Django plugin does before it reads the models
import achilles.celery_app  # imported by the apps' task modules; elsewhere its import bootstraps
print(module, len(apps.get_models()) > 0)
"""


def test_make_lint_starts_nothing(tmp_path):
    """mypy's Django plugin sets Django up (``make lint``); it used to start the embedded PostgreSQL
    and Redis through the Celery app's import and leave them running."""
    var_dir = tmp_path / "var"
    var_dir.mkdir()
    result = subprocess.run(
        [sys.executable, "-c", LINT_PROBE],
        cwd=ROOT,
        env=_clean_env(var_dir),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["achilles.lint_settings", "True"]
    assert list(var_dir.iterdir()) == []
    assert _processes_mentioning(str(var_dir)) == []
