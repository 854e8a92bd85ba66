"""``python -m hub.syncagent --hub URL --token … --jira URL --jira-token …`` (or env vars / --config)."""

from __future__ import annotations

import logging
import signal
import sys
import threading

from hub.syncagent.agent import SyncAgent
from hub.syncagent.config import build_parser, load_config


def main(argv: list[str] | None = None) -> int:
    config = load_config(build_parser().parse_args(argv))
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per hub request is noise; ours say what happened
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    SyncAgent(config, stop=stop).run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
