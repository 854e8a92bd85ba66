"""METRICS_ALLOW is read once at start-up: a value that is not a list of networks stops it, naming the
variable (never a 500 at the first scrape)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[3]
PROBE = "import achilles.settings as s; print(s.METRICS_ALLOW)"


def _settings(allow: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "METRICS_ALLOW": allow}
    return subprocess.run([sys.executable, "-c", PROBE], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)


def test_networks_are_read_and_a_bad_one_stops_start_up():
    good = _settings(" 10.0.0.0/8, ::1 ")
    assert good.returncode == 0, good.stderr
    assert good.stdout.strip() == "['10.0.0.0/8', '::1']"
    bad = _settings("10.0.0.0/8,intranet")
    assert bad.returncode == 2
    assert "configuration error: METRICS_ALLOW must list networks" in bad.stderr and "'intranet'" in bad.stderr
