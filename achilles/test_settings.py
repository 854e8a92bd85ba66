"""The test suite's settings (pytest.ini names this module): the platform's settings with
``ACHILLES_TESTING`` on, so a test run keeps its cache keys and Celery queues apart from a running
``make run`` (and the workers and daphne a test starts inherit the switch through the environment).

Under pytest-xdist (`make test` runs two workers) each worker is a test run of its own: its own
namespace (cache keys, heartbeats, Celery queues: ``test_gw0``, ``test_gw1``) and its own database
(pytest-django names it ``test_achilles_gw0``), so the workers and servers one worker's tests start
never take another worker's tasks or read its rows.
"""

import os

os.environ["ACHILLES_TESTING"] = "1"

_XDIST_WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")
_WORKER_NAMESPACE = bool(_XDIST_WORKER) and not os.environ.get("TEST_DATABASE_NAME")
if _WORKER_NAMESPACE:
    os.environ["TEST_DATABASE_NAME"] = f"test_{_XDIST_WORKER}"

# The metrics directory is set by the settings below and inherited by the servers and workers a test
# run starts (they count together). An xdist worker inherits its controller's: it counts in its own
# namespace's instead, or one worker's chat turn moves another worker's scrape between two reads.
if _WORKER_NAMESPACE:
    os.environ.pop("PROMETHEUS_MULTIPROC_DIR", None)
_METRICS_DIR_INHERITED = "PROMETHEUS_MULTIPROC_DIR" in os.environ

from achilles.settings import *  # noqa: E402,F403

if not _METRICS_DIR_INHERITED:
    # A test run's /metrics counters start at zero: the files of earlier runs' processes go.
    for _stale in METRICS_DIR.glob("*.db"):  # noqa: F405
        _stale.unlink(missing_ok=True)

if _WORKER_NAMESPACE:
    # The namespace only: pytest-django gives each worker's database its own suffix (_gw0, _gw1).
    DATABASES["default"].pop("TEST", None)  # noqa: F405

# `demo_data` seeds no local embedding model in tests unless the environment asks for one (the
# suite's conftest exports the same default to the processes it starts).
LOCAL_EMBEDDING = os.environ.get("LOCAL_EMBEDDING", "none")

# The platform's backend with a flush that deletes rows instead of truncating every table
# (tests/postgres/base.py): a transactional test's end, 0.6 s → 0.05 s on the quiet machine.
DATABASES["default"]["ENGINE"] = "tests.postgres"  # noqa: F405

# Passwords hash with MD5 in tests (Django's advice for test suites): the default PBKDF2 costs 0.19 s
# of CPU a hash — a third of the API tests' CPU went to the passwords their users are made with. A
# hash made by the default (PBKDF2) still verifies: the platform's hashers follow.
from django.conf import global_settings  # noqa: E402

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher", *global_settings.PASSWORD_HASHERS]
