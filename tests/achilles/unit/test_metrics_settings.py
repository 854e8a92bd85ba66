"""METRICS_ALLOW is read once at start-up: a value that is not a list of networks stops it, naming the
variable (never a 500 at the first scrape)."""

import os
import shutil
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


def _metrics_dir(**env: str) -> str:
    """METRICS_DIR as the suite's settings compute it in a process with this environment."""
    base = {k: v for k, v in os.environ.items() if k not in ("TEST_DATABASE_NAME", "PYTEST_XDIST_WORKER")}
    probe = "import achilles.test_settings as s; print(s.METRICS_DIR)"
    result = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, env={**base, **env}, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def test_each_xdist_worker_counts_in_its_own_metrics_dir(tmp_path):
    """The controller's directory, which a worker inherits, was every worker's: a chat turn on one
    worker moved another worker's scrape between its two reads (18 → 20 where 19 was asserted)."""
    controller = str(tmp_path / "metrics" / "test")
    name = f"gw-probe-{os.getpid()}"  # a worker name no run uses; its directory is removed after
    worker = _metrics_dir(PROMETHEUS_MULTIPROC_DIR=controller, PYTEST_XDIST_WORKER=name)
    try:
        assert Path(worker).name == f"test_{name}" and worker != controller
        # and the servers a worker starts (its namespace in the environment) count in the worker's
        served = _metrics_dir(
            PROMETHEUS_MULTIPROC_DIR=worker, PYTEST_XDIST_WORKER=name, TEST_DATABASE_NAME=f"test_{name}"
        )
        assert served == worker
    finally:
        if Path(worker).name == f"test_{name}":
            shutil.rmtree(worker, ignore_errors=True)
