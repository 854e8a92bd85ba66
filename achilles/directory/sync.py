"""The directory sync job: every ``ldap``-sourced account re-read from the directory.

Run by Beat (``achilles.tasks.directory_sync_task``, every ``LDAP_SYNC_INTERVAL_MINUTES``, declared
only when ``LDAP_SERVER_URI`` is set) and by ``manage.py directory_sync`` (with a progress bar).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import ldap
from django.db import connection, transaction

from achilles import audit
from achilles.directory.backends import DirectoryBackend
from achilles.directory.config import DirectoryConfig
from achilles.directory.ldapconf import connection_options, directory_disabled, user_search
from achilles.directory.services import SYNC_ACTOR, configured, directory_user_apply, directory_user_deactivate
from achilles.errors import Conflict, ServiceUnavailable
from achilles.models import User

logger = logging.getLogger(__name__)


@dataclass
class DirectorySyncReport:
    """What one run of the sync did."""

    checked: int = 0
    groups_changed: int = 0
    deactivated: int = 0
    reactivated: int = 0
    failed: int = 0


def _bound_connection(config: DirectoryConfig) -> Any:
    try:
        conn = ldap.initialize(config.server_uri, bytes_mode=False)
        for option, value in connection_options(config).items():
            conn.set_option(option, value)
        if config.start_tls:
            conn.start_tls_s()
        conn.simple_bind_s(config.bind_dn, config.bind_password)
    except ldap.LDAPError as exc:
        raise ServiceUnavailable(
            f"the directory does not answer ({type(exc).__name__})", code="directory_unavailable"
        ) from exc
    return conn


def directory_sync(
    *, progress: Callable[[int], None] | None = None, total: Callable[[int], None] | None = None
) -> DirectorySyncReport:
    """Re-read every ``ldap``-sourced account from the directory: groups (authoritative for the
    mirror filter), attributes, and the active state — an account disabled in the directory
    (AD's ``userAccountControl`` ACCOUNTDISABLE bit) or no longer found by ``LDAP_USER_FILTER``
    under ``LDAP_USER_SEARCH_BASE`` is deactivated; one found enabled again is reactivated.

    A directory that fails mid-run stops the run (``ServiceUnavailable``) rather than deactivating
    anyone on a search that did not answer; each account is committed on its own."""
    config = configured()
    with _single_run():
        return _directory_sync(config, progress=progress, total=total)


# One run at a time (Beat's next run while a slow one goes on, a command beside Beat): a session-level
# advisory lock on this process's connection, released at the end or when the connection goes.
_LOCK = (0x6463, 1)  # "dc": the directory


@contextlib.contextmanager
def _single_run() -> Iterator[None]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_lock(%s, %s)", _LOCK)
        if not cursor.fetchone()[0]:
            raise Conflict("a directory sync is already running", code="directory_sync_running")
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_unlock(%s, %s)", _LOCK)


def _directory_sync(
    config: DirectoryConfig, *, progress: Callable[[int], None] | None, total: Callable[[int], None] | None
) -> DirectorySyncReport:
    conn = _bound_connection(config)
    search = user_search(config)
    backend = DirectoryBackend()
    report = DirectorySyncReport()
    # Read up front: each account is then written in a transaction of its own on the same connection.
    accounts = list(User.objects.filter(source=User.Source.LDAP).order_by("pk"))
    if total is not None:
        total(len(accounts))
    try:
        for user in accounts:
            report.checked += 1
            try:
                results = search.execute(conn, {"user": user.get_username()})
            except ldap.LDAPError as exc:
                raise ServiceUnavailable(
                    f"the directory failed during the sync ({type(exc).__name__})", code="directory_unavailable"
                ) from exc
            if not results:
                report.deactivated += directory_user_deactivate(user=user, reason="not_found", via="sync")
            elif len(results) > 1:
                logger.warning("directory sync: %d entries match %s; left as it is", len(results), user.username)
                report.failed += 1
            elif directory_disabled(results[0][1]):
                report.deactivated += directory_user_deactivate(user=user, reason="disabled", via="sync")
            else:
                _sync_one(backend, user, report)
            if progress is not None:
                progress(1)
    finally:
        conn.unbind_s()
    audit.audit_record(
        actor=SYNC_ACTOR,
        action=audit.DIRECTORY_SYNC_FINISHED,
        target="directory",
        details={
            "checked": report.checked,
            "groups_changed": report.groups_changed,
            "deactivated": report.deactivated,
            "reactivated": report.reactivated,
            "failed": report.failed,
        },
    )
    return report


def _sync_one(backend: DirectoryBackend, user: User, report: DirectorySyncReport) -> None:
    was_active = user.is_active
    with transaction.atomic():
        # The library re-reads the entry and updates the mapped attributes (its own connection).
        populated = backend.populate_user(user.get_username())
        if populated is None:
            report.failed += 1
            return
        ldap_user = populated.ldap_user
        try:
            group_names = list(ldap_user.group_names)
        except ldap.LDAPError as exc:
            raise ServiceUnavailable(
                f"the directory failed during the sync ({type(exc).__name__})", code="directory_unavailable"
            ) from exc
        before = set(populated.groups.values_list("name", flat=True))
        directory_user_apply(user=populated, attrs=ldap_user.attrs, group_names=group_names, via="sync")
        after = set(populated.groups.values_list("name", flat=True))
    report.groups_changed += before != after
    report.reactivated += populated.is_active and not was_active
