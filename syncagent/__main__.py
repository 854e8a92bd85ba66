"""``python -m syncagent --hub URL --token … --jira URL --jira-token …`` (or env vars / --config)."""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading

from syncagent import lifeline
from syncagent.agent import SyncAgent
from syncagent.config import AGENT_LOCK, LAUNCHER_PID_ENV, build_parser, load_config

# Under a launcher, a new child may start while the one of a killed launcher is still stopping.
LAUNCHED_LOCK_WAIT_SECONDS = 30.0


def main(argv: list[str] | None = None) -> int:
    config = load_config(build_parser().parse_args(argv))
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per hub request is noise; ours say what happened
    launcher = os.environ.get(LAUNCHER_PID_ENV)
    # One agent per state directory: two would claim and write the same state file.
    lock = lifeline.hold_lock(
        config.state_dir / AGENT_LOCK, what="sync agent", wait=LAUNCHED_LOCK_WAIT_SECONDS if launcher else 0.0
    )
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    if launcher:
        lifeline.watch_parent(int(launcher), stop)
    try:
        SyncAgent(config, stop=stop).run()
    finally:
        if lock is not None:
            lock.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
