"""The test database, copied from a migrated template instead of migrated anew by every test run.

Migrating a fresh database (60 migrations, PostgreSQL's DDL) was the first test's setup in every
test process: 21.6 s on the shared machine at load 10, and ``make test``'s two xdist workers did it
at once, each for its own database. Now the first test run to need it migrates a template database
once (under a file lock in ``var/``, so the other worker waits for it instead of migrating too) and
every test run — each xdist worker, a later run on the same services — gets its own database as a
copy, ``CREATE DATABASE … TEMPLATE …`` (a file copy inside PostgreSQL): the first test's setup is
then 3.8 s at the same load. Django then takes the copy as a kept database through its syncdb
path (``TEST["MIGRATE"] = False`` for the setup: ``tests/conftest.py``): every table exists, so it
creates none, and its ``post_migrate`` handlers run (content types, permissions, the declared
periodic jobs), so rows derived from the code rather than from migrations are current — 0.3 s of
CPU, where ``migrate`` with nothing to apply loaded and rendered the migration graph, 3.6 s.

The template's name carries a digest of every installed app's migration files (and Django's
version): a changed or added migration makes a new template, and the old ones are dropped.
"""

from __future__ import annotations

import fcntl
import hashlib
from contextlib import contextmanager
from pathlib import Path

TEMPLATE_PREFIX = "achilles_test_template_"


def migrations_digest() -> str:
    """A digest of the migration files of every installed app, and of Django's version."""
    import django
    from django.apps import apps

    digest = hashlib.sha256(django.get_version().encode())
    for app in sorted(apps.get_app_configs(), key=lambda app: app.label):
        folder = Path(app.path) / "migrations"
        for path in sorted(folder.glob("*.py")) if folder.is_dir() else ():
            digest.update(f"{app.label}/{path.name}\0".encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def template_name() -> str:
    return TEMPLATE_PREFIX + migrations_digest()


@contextmanager
def _locked(lock_path: Path):
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_path, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _end_sessions(cursor, name: str) -> None:
    cursor.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s", [name])


def _exists(cursor, name: str) -> bool:
    cursor.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name])
    return cursor.fetchone() is not None


def _build_template(connection, name: str) -> None:
    """Migrate a new database and publish it under ``name`` (a rename: a half-built one never has
    the template's name). Runs with the lock held."""
    from django.conf import settings

    building = name + "_building"
    original_test = dict(connection.settings_dict.get("TEST") or {})
    original_name = connection.settings_dict["NAME"]
    connection.settings_dict["TEST"] = {**original_test, "NAME": building}
    try:
        # Django's own creation: CREATE DATABASE (replacing a half-built one), migrate, post_migrate
        connection.creation.create_test_db(verbosity=0, autoclobber=True, keepdb=False, serialize=False)
    finally:
        connection.close()
        connection.close_pool()
        connection.settings_dict["NAME"] = original_name
        settings.DATABASES[connection.alias]["NAME"] = original_name
        connection.settings_dict["TEST"] = original_test
    with connection.creation._nodb_cursor() as cursor:
        _end_sessions(cursor, building)
        cursor.execute(f'ALTER DATABASE "{building}" RENAME TO "{name}"')
        # templates of older migrations: no run will ask for them again
        cursor.execute(
            "SELECT datname FROM pg_database WHERE datname LIKE %s AND datname <> %s",
            [TEMPLATE_PREFIX + "%", name],
        )
        for (stale,) in cursor.fetchall():
            _end_sessions(cursor, stale)
            cursor.execute(f'DROP DATABASE IF EXISTS "{stale}"')


def copy_test_database(connection, lock_path: Path) -> str:
    """Create this run's test database (``connection``'s test name) as a copy of the migrated
    template, building the template first when there is none; return the test database's name.
    Whatever database of that name a crashed run left behind is replaced."""
    test_name = connection.creation._get_test_db_name()
    name = template_name()
    with _locked(lock_path):
        with connection.creation._nodb_cursor() as cursor:
            ready = _exists(cursor, name)
        if not ready:
            _build_template(connection, name)
        with connection.creation._nodb_cursor() as cursor:
            # a database of that name in use (another run on it) is not taken from it: the DROP fails
            cursor.execute(f'DROP DATABASE IF EXISTS "{test_name}"')
            cursor.execute(f'CREATE DATABASE "{test_name}" TEMPLATE "{name}"')
    return test_name
