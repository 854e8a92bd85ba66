"""``python -m emulators.confluence --port 8090 [--demo] [--token PAT] [--context /confluence]``."""

from __future__ import annotations

import argparse
import os
import sys

from emulators.confluence.demo import SYNC_TOKEN, build_demo
from emulators.confluence.generate import build_generated
from emulators.confluence.server import serve
from emulators.confluence.store import ConfluenceStore


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m emulators.confluence", description="Confluence DC REST emulator (loopback)."
    )
    p.add_argument("--host", default=os.environ.get("CONFLUENCE_EMULATOR_HOST", "127.0.0.1"))
    p.add_argument("--port", type=int, default=int(os.environ.get("CONFLUENCE_EMULATOR_PORT", "8090")))
    p.add_argument("--demo", action="store_true", help="the demo space KB with its users")
    p.add_argument(
        "--token", default=os.environ.get("CONFLUENCE_EMULATOR_TOKEN", SYNC_TOKEN), help="the connector's PAT (--demo)"
    )
    p.add_argument("--context", default="/confluence", help="the context path ('' for none)")
    p.add_argument(
        "--version", default="9.2.0", help="the Confluence version it claims (< 9.1: no REST space permissions)"
    )
    p.add_argument(
        "--generate", type=int, default=0, metavar="N", help="N generated pages in spaces ENG and OPS (benchmarks)"
    )
    p.add_argument("--seed", type=int, default=23, help="the seed of --generate")
    p.add_argument("--anonymous", action="store_true", help="allow anonymous access to the site")
    args = p.parse_args(argv)
    store = ConfluenceStore(context_path=args.context, version=args.version, anonymous_access=args.anonymous)
    if args.demo:
        build_demo(store, sync_token=args.token)
    if args.generate:
        build_generated(store, pages=args.generate, sync_token=args.token, seed=args.seed)
    server = serve(store, host=args.host, port=args.port, background=False)
    pages = sum(c["type"] == "page" for c in store.content.values())
    print(
        f"Confluence emulator on {server.url} ({len(store.spaces)} spaces, {pages} pages)", file=sys.stderr, flush=True
    )
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
