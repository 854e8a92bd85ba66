"""`celery -A achilles.celery_app …` as supervisord starts it under `make run`: the environment names
no settings module, so the Celery app module must name it before anything reads Django's settings
(an import of achilles.metrics at the top read ``settings.METRICS_DIR`` first and every worker and
beat of `make run` died with ImproperlyConfigured)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[3]


def test_the_celery_app_loads_without_a_settings_module_in_the_environment():
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    done = subprocess.run(
        [sys.executable, "-c", "import achilles.celery_app as m; print(m.app.main)"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().endswith("achilles")
