"""The test suite's settings (pytest.ini names this module): the platform's settings with
``ACHILLES_TESTING`` on, so a test run keeps its cache keys and Celery queues apart from a running
``make run`` (and the workers and daphne a test starts inherit the switch through the environment).
"""

import os

os.environ["ACHILLES_TESTING"] = "1"

from achilles.settings import *  # noqa: E402,F403
