"""The settings static analysis reads (``[tool.django-stubs]`` in pyproject.toml names this module):
the platform's settings in a process that starts nothing. mypy's Django plugin sets Django up to read
the models; the apps' task modules import the Celery app, whose import bootstraps — which would start
the embedded PostgreSQL and Redis and leave them running. Here the bootstrap is marked done first, so
``make lint`` starts no service and connects nowhere (``tests/achilles/unit/test_lint_inert.py``)."""

from achilles.bootstrap import bootstrap_skip

bootstrap_skip()

from achilles.settings import *  # noqa: E402,F403
