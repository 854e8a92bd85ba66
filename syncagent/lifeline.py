"""One sync agent per state directory, and no agent outliving its launcher.

- :func:`hold_lock`: an exclusive ``flock`` on a file in the state directory, held for the process's
  life. The kernel drops it when the process dies, ``kill -9`` included, so there is no stale lock to
  clean up; a second agent (or launcher) on the same directory is refused with the holder's pid.
- :func:`die_with_parent`: the launcher's ``preexec_fn``. On Linux the child asks the kernel for
  SIGTERM when the launcher dies (``PR_SET_PDEATHSIG``): a ``kill -9`` of the launcher would otherwise
  leave its child polling the hub, re-parented to pid 1, next to the one a restarted launcher starts.
  A process group alone does not help: nobody signals the group of a leader killed with ``-9``.
- :func:`watch_parent`: the child's own check, for systems without prctl and for a launcher that
  set nothing: once its parent is no longer the launcher, the agent stops (and exits if it hangs).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO

try:
    import fcntl
except ImportError:  # not a POSIX system: no lock, the rest works
    fcntl = None  # type: ignore[assignment]

log = logging.getLogger("syncagent")

PR_SET_PDEATHSIG = 1
# A child whose launcher died and that has not stopped within this is ended at once (its state is
# written through: a hard exit loses nothing the hub will not re-issue).
STOP_GRACE_SECONDS = 10.0


def hold_lock(path: Path, *, what: str, wait: float = 0.0) -> IO[str] | None:
    """Lock ``path`` for this process's life (keep the returned file open); refuse if it is held.

    ``wait``: how long to keep trying first (a launcher's new child waits for the one its killed
    predecessor started to finish stopping).
    """
    if fcntl is None:
        return None
    path.parent.mkdir(parents=True, exist_ok=True)
    handle = open(path, "a+")  # noqa: SIM115 - held open for the process's life
    deadline = time.monotonic() + wait
    while True:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            if time.monotonic() >= deadline:
                handle.seek(0)
                holder = handle.read().strip() or "?"
                handle.close()
                raise SystemExit(
                    f"{what}: another one (pid {holder}) is already running on {path.parent} "
                    f"(it holds {path}); refusing to start a second"
                ) from None
            time.sleep(0.2)
    handle.seek(0)
    handle.truncate()
    handle.write(f"{os.getpid()}\n")
    handle.flush()
    return handle


def _prctl() -> Callable[..., int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


def die_with_parent(signum: int = signal.SIGTERM) -> Callable[[], None] | None:
    """A ``preexec_fn`` that makes the child get ``signum`` when the calling process dies (Linux).

    libc is looked up here, before the fork, so the child only makes the call. The kernel sends the
    signal when the *thread* that forked the child ends: start children from the main thread.
    """
    prctl = _prctl()
    if prctl is None:
        return None
    parent = os.getpid()

    def preexec() -> None:
        prctl(PR_SET_PDEATHSIG, signum, 0, 0, 0)
        if os.getppid() != parent:  # the parent died between the fork and the prctl
            os.kill(os.getpid(), signum)

    return preexec


def watch_parent(
    parent: int,
    stop: threading.Event,
    *,
    every: float = 0.5,
    grace: float = STOP_GRACE_SECONDS,
    exit: Callable[[int], object] = os._exit,
) -> threading.Thread:
    """Set ``stop`` once this process's parent is no longer ``parent``; exit if that does not end it."""

    def watch() -> None:
        while not stop.wait(every):
            if os.getppid() != parent:
                log.warning("the launcher (pid %s) is gone; stopping", parent)
                stop.set()
                time.sleep(grace)
                log.error("still running %g s after the launcher died; exiting", grace)
                exit(1)

    thread = threading.Thread(target=watch, name="launcher-watch", daemon=True)
    thread.start()
    return thread
