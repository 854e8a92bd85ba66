"""``python -m emulators.jira --port 8089 --data demo [--token sync-pat]``: serve until interrupted."""

from __future__ import annotations

import argparse
import os
import sys

from emulators.jira.demo import build_store
from emulators.jira.server import serve


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m emulators.jira", description="Jira Server/DC REST emulator (loopback).")
    p.add_argument("--host", default=os.environ.get("JIRA_EMULATOR_HOST", "127.0.0.1"))
    p.add_argument("--port", type=int, default=int(os.environ.get("JIRA_EMULATOR_PORT", "8089")))
    p.add_argument("--data", choices=["demo", "bench", "empty"], default="demo")
    p.add_argument("--count", type=int, default=0, help="issues for --data bench")
    p.add_argument(
        "--token",
        default=os.environ.get("JIRA_EMULATOR_TOKEN", "sync-pat"),
        help="the personal access token of the sync agent's Jira user (achilles-sync)",
    )
    args = p.parse_args(argv)
    store = build_store(data=args.data, sync_token=args.token, count=args.count)
    server = serve(store, host=args.host, port=args.port)
    print(f"Jira emulator on {server.url} ({len(store.issues)} issues, data={args.data})", file=sys.stderr, flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
