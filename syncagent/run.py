"""The launcher: runs a sync-agent version, switches to a newer publication, rolls back one that fails.

``python -m syncagent.run [agent options] [--state-dir DIR] [--start-timeout 120]`` or
``python syncagent/run.py …`` (the agent options are those of ``python -m syncagent``).

Layout under ``DIR``::

    versions/v6/syncagent/…   each version side by side (the one shipped with the launcher first)
    launcher.lock                  held (flock) by the running launcher: a second one is refused
    agent/agent.lock               held by the running sync agent (the launcher's child)
    launcher/launcher.json         {"current": 6, "previous": null, "bad": {"7": "<sha256>"}}
    launcher/update.json           the last update attempt, sent by the agent on every claim
    launcher/claimed.json          written by the agent after each claim {"version", "pid", "at"}
    launcher/publication.json      written by the agent: the newest publication the hub announced
    agent/state.json               the agent's own state (shared by every version)

On a publication newer than the running version (and not already found bad): download it with the
agent's hub token, check its sha256 against the one the hub announced (mismatch → ``failed``, not
started), unpack, stop the running child, start the new one, and wait until it completes a claim
(``claimed.json`` carries its pid). If it exits first or the timeout passes: stop it, start the
previous version again and record ``rolled_back`` with the reason (the hub then shows «обновление:
rolled_back v6 → v7» and «откат с v7 на v6: …»). The child learns the launcher's version and this
directory from ``ACHILLES_SYNC_LAUNCHER_VERSION`` / ``ACHILLES_SYNC_LAUNCHER_DIR``.
"""

from __future__ import annotations

import collections
import hashlib
import io
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import threading
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # `python syncagent/run.py`: make `syncagent` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx  # noqa: E402

from syncagent import lifeline  # noqa: E402
from syncagent.config import (  # noqa: E402
    LAUNCHER_DIR_ENV,
    LAUNCHER_LOCK,
    LAUNCHER_PID_ENV,
    LAUNCHER_VERSION_ENV,
    build_parser,
)

LAUNCHER_VERSION = 1
DOWNLOAD_RETRY_SECONDS = 300
PACKAGE_DIR = Path(__file__).resolve().parent
log = logging.getLogger("syncagent.launcher")


def _read(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _write(path: Path, value: Any) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(value, ensure_ascii=False))
    os.replace(tmp, path)


def package_version(package_dir: Path) -> int:
    namespace: dict[str, Any] = {}
    exec((package_dir / "version.py").read_text(), namespace)  # noqa: S102 - our own one-line file
    return int(namespace["VERSION"])


class Child:
    """One running sync-agent version; its stderr is passed through and its tail kept for the reason."""

    def __init__(self, version: int, root: Path, argv: list[str], env: dict[str, str]):
        self.version = version
        self.started = time.time()
        self.tail: collections.deque[str] = collections.deque(maxlen=20)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "syncagent", *argv],
            cwd=root,
            env=env,
            stdin=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            errors="replace",
            # The child gets SIGTERM when the launcher dies, kill -9 included (Linux); it also
            # watches its parent pid itself (ACHILLES_SYNC_LAUNCHER_PID), for every other system.
            preexec_fn=lifeline.die_with_parent(),
        )
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.tail.append(line.rstrip())
            sys.stderr.write(f"[v{self.version}] {line}")
            sys.stderr.flush()

    def last_line(self) -> str:
        for line in reversed(self.tail):
            if line.strip():
                return line.strip()[-300:]
        return ""

    def stop(self, timeout: float = 15) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


class Launcher:
    def __init__(
        self,
        *,
        state_dir: Path,
        agent_argv: list[str],
        hub_url: str,
        token: str,
        start_timeout: float,
        restart_delay: float = 2.0,
        verify_ssl: bool = True,
    ):
        self.state_dir = state_dir
        self.versions = state_dir / "versions"
        self.dir = state_dir / "launcher"
        self.agent_argv = agent_argv + ["--state-dir", str(state_dir / "agent")]
        self.hub_url = hub_url.rstrip("/")
        self.token = token
        self.start_timeout = start_timeout
        self.restart_delay = restart_delay
        self.verify_ssl = verify_ssl
        self.stop_event = threading.Event()
        self.child: Child | None = None
        self.download_retry_at: dict[int, float] = {}
        for d in (self.versions, self.dir, state_dir / "agent"):
            d.mkdir(parents=True, exist_ok=True)
        self.meta = _read(self.dir / "launcher.json") or {"current": None, "previous": None, "bad": {}}

    # ---- versions on disk ---------------------------------------------------------------------------
    def version_root(self, version: int) -> Path:
        return self.versions / f"v{version}"

    def install_builtin(self) -> int:
        """The version shipped with this launcher, copied side by side with the downloaded ones."""
        version = package_version(PACKAGE_DIR)
        root = self.version_root(version)
        if not (root / "syncagent" / "__main__.py").exists():
            tmp = self.versions / f".v{version}.tmp"
            shutil.rmtree(tmp, ignore_errors=True)
            tmp.mkdir(parents=True)
            shutil.copytree(PACKAGE_DIR, tmp / "syncagent", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
            shutil.rmtree(root, ignore_errors=True)
            os.replace(tmp, root)
        return version

    def unpack(self, version: int, artifact: bytes) -> Path:
        root = self.version_root(version)
        tmp = self.versions / f".v{version}.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        with tarfile.open(fileobj=io.BytesIO(artifact), mode="r:gz") as tar:
            for member in tar.getmembers():
                name = Path(member.name)
                if name.is_absolute() or ".." in name.parts or not (member.isfile() or member.isdir()):
                    raise ValueError(f"unsafe member in the artifact: {member.name}")
            tar.extractall(tmp, filter="data")
        if not (tmp / "syncagent" / "__main__.py").exists():
            raise ValueError("the artifact has no syncagent/__main__.py")
        shutil.rmtree(root, ignore_errors=True)
        os.replace(tmp, root)
        return root

    def save_meta(self) -> None:
        _write(self.dir / "launcher.json", self.meta)

    def set_update(
        self, state: str, from_version: int | None, to_version: int | None, error: str | None = None
    ) -> None:
        _write(
            self.dir / "update.json",
            {"state": state, "from_version": from_version, "to_version": to_version, "error": error},
        )
        log.info("update %s v%s → v%s%s", state, from_version, to_version, f": {error}" if error else "")

    # ---- children -----------------------------------------------------------------------------------
    def start(self, version: int) -> Child:
        env = {
            **os.environ,
            LAUNCHER_VERSION_ENV: str(LAUNCHER_VERSION),
            LAUNCHER_DIR_ENV: str(self.dir),
            LAUNCHER_PID_ENV: str(os.getpid()),
            "PYTHONPATH": str(self.version_root(version)),
            "PYTHONUNBUFFERED": "1",
        }
        log.info("starting sync agent v%s", version)
        self.child = Child(version, self.version_root(version), self.agent_argv, env)
        return self.child

    def claimed_by(self, child: Child) -> bool:
        marker = _read(self.dir / "claimed.json")
        return bool(marker) and marker.get("pid") == child.proc.pid

    def wait_for_claim(self, child: Child) -> str | None:
        """None when the child completed a claim in time, else the reason it did not."""
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            if self.claimed_by(child):
                return None
            code = child.proc.poll()
            if code is not None:
                time.sleep(0.2)  # let the stderr pump catch the last line
                last = child.last_line()
                return f"v{child.version} exited with code {code} before its first claim" + (
                    f": {last}" if last else ""
                )
            if self.stop_event.wait(0.2):
                return "launcher stopping"
        return f"v{child.version} did not complete a claim within {self.start_timeout:g} s"

    # ---- updates ------------------------------------------------------------------------------------
    def maybe_update(self) -> None:
        publication = _read(self.dir / "publication.json")
        current = self.meta["current"]
        if not publication or not isinstance(publication.get("version"), int) or publication["version"] <= current:
            return
        new, sha = publication["version"], publication.get("sha256") or ""
        if self.meta["bad"].get(str(new)) == sha:
            return  # already tried and found wanting; a re-publication with another sha is tried again
        if time.time() < self.download_retry_at.get(new, 0):
            return
        self.set_update("downloading", current, new)
        try:
            with httpx.Client(
                base_url=self.hub_url,
                timeout=120,
                verify=self.verify_ssl,
                headers={"Authorization": f"Bearer {self.token}"},
            ) as client:
                resp = client.get(publication["download_url"])
                resp.raise_for_status()
                artifact = resp.content
        except httpx.HTTPError as exc:
            # The hub or the network, not the version: try again in a while.
            self.set_update("failed", current, new, f"download of v{new} failed: {exc}")
            self.download_retry_at[new] = time.time() + DOWNLOAD_RETRY_SECONDS
            return
        got = hashlib.sha256(artifact).hexdigest()
        if got != sha:
            self.set_update(
                "failed", current, new, f"v{new} sha256 mismatch: published {sha}, downloaded {got}; not started"
            )
            self.meta["bad"][str(new)] = sha
            self.save_meta()
            return
        try:
            self.unpack(new, artifact)
        except (ValueError, tarfile.TarError, OSError) as exc:
            self.set_update("failed", current, new, f"v{new} cannot be unpacked: {exc}")
            self.meta["bad"][str(new)] = sha
            self.save_meta()
            return
        self.set_update("starting", current, new)
        if self.child is not None:
            self.child.stop()
        child = self.start(new)
        reason = self.wait_for_claim(child)
        if reason is None:
            self.meta.update(current=new, previous=current)
            self.save_meta()
            self.set_update("done", current, new)
            return
        child.stop(timeout=5)
        self.meta["bad"][str(new)] = sha
        self.save_meta()
        self.set_update("rolled_back", current, new, reason)
        self.start(current)

    # ---- main loop ----------------------------------------------------------------------------------
    def run(self) -> int:
        builtin = self.install_builtin()
        current = self.meta.get("current")
        if not current or not (self.version_root(current) / "syncagent" / "__main__.py").exists():
            self.meta["current"] = builtin
            self.save_meta()
        log.info("launcher v%s: sync agent v%s under %s", LAUNCHER_VERSION, self.meta["current"], self.state_dir)
        self.start(self.meta["current"])
        crashes = 0
        while not self.stop_event.is_set():
            child = self.child
            code = child.proc.poll() if child else 0
            if code is not None:
                crashes += 1
                delay = min(60.0, self.restart_delay * 2 ** min(crashes - 1, 5))
                log.warning(
                    "sync agent v%s exited with code %s; restarting in %.0f s",
                    child.version if child else "?",
                    code,
                    delay,
                )
                if self.stop_event.wait(delay):
                    break
                self.start(self.meta["current"])
                continue
            if self.claimed_by(child):
                crashes = 0
            self.maybe_update()
            self.stop_event.wait(1.0)
        if self.child is not None:
            self.child.stop()
        return 0


def main(argv: list[str] | None = None) -> int:
    parser = build_parser(prog="python -m syncagent.run")
    parser.add_argument(
        "--start-timeout",
        dest="start_timeout",
        type=float,
        default=float(os.environ.get("ACHILLES_SYNC_START_TIMEOUT", "120")),
        help="seconds a new version has to complete its first claim before it is rolled back",
    )
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(levelname)s launcher: %(message)s")
    state_dir = Path(args.state_dir or os.environ.get("ACHILLES_SYNC_STATE_DIR") or "syncagent-state").resolve()
    file_values = json.loads(Path(args.config).read_text()) if args.config else {}
    hub_url = args.hub_url or os.environ.get("ACHILLES_HUB_URL") or file_values.get("hub_url")
    token = args.token or os.environ.get("ACHILLES_SYNC_TOKEN") or file_values.get("token")
    if not hub_url or not token:
        raise SystemExit("launcher: --hub and --token (or ACHILLES_HUB_URL / ACHILLES_SYNC_TOKEN) are required")
    # The child gets every agent option except those the launcher owns.
    child_argv: list[str] = []
    skip = False
    for i, a in enumerate(argv):
        if skip:
            skip = False
            continue
        if a in ("--state-dir", "--start-timeout"):
            skip = True
            continue
        if a.startswith(("--state-dir=", "--start-timeout=")):
            continue
        if a == "--config" and i + 1 < len(argv):
            child_argv += [a, str(Path(argv[i + 1]).resolve())]
            skip = True
            continue
        child_argv.append(a)
    # One launcher per state directory, held until this process dies (the kernel releases it).
    lock = lifeline.hold_lock(state_dir / LAUNCHER_LOCK, what="sync agent launcher")
    launcher = Launcher(
        state_dir=state_dir,
        agent_argv=child_argv,
        hub_url=hub_url,
        token=token,
        start_timeout=args.start_timeout,
        verify_ssl=args.verify_ssl is not False,
    )
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: launcher.stop_event.set())
    try:
        return launcher.run()
    finally:
        if lock is not None:
            lock.close()


if __name__ == "__main__":
    sys.exit(main())
