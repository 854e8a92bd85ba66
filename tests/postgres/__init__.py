"""The platform's PostgreSQL backend with the test suite's flush (``ENGINE = "tests.postgres"``,
set by ``achilles/test_settings.py``): see ``base.py``."""
