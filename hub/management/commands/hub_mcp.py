"""``manage.py hub_mcp``: the hub's MCP server over stdio, for a chat client that starts it itself.

The personal API token comes from the environment (``ACHILLES_TOKEN`` unless ``--token-env`` names
another variable), never from the command line where ``ps`` would show it. stdout carries the
protocol and nothing else: every log line goes to stderr.
"""

from __future__ import annotations

import logging
import os
import sys

import anyio
from django.core.management.base import BaseCommand, CommandError
from django.db import close_old_connections

from achilles.services import api_token_authenticate
from hub.mcp.server import Caller, build_server, current_caller


class Command(BaseCommand):
    help = "Serve the hub's MCP tools over stdio as the owner of the personal token in $ACHILLES_TOKEN."
    # A server started by a chat client, like daphne and the workers: no system checks at start-up
    # (they import the URLconf, ~1.4 s of CPU the client waits for; `manage.py check` runs them).
    requires_system_checks: list[str] = []

    def add_arguments(self, parser):
        parser.add_argument(
            "--token-env",
            default="ACHILLES_TOKEN",
            help="the environment variable holding the personal API token (ach_…)",
        )

    def handle(self, *args, token_env: str, **options):
        _log_to_stderr_only()
        raw = os.environ.get(token_env, "").strip()
        if not raw:
            raise CommandError(f"set {token_env} to a personal API token (ach_…): the tools act as its owner")
        if not _token_valid(raw):
            raise CommandError(f"the token in {token_env} is not a valid personal API token (revoked or unknown)")
        current_caller.set(Caller(token=raw))
        anyio.run(build_server().run_stdio_async)


def _log_to_stderr_only() -> None:
    """A handler that writes to stdout would corrupt the protocol: point every stream handler at stderr."""
    for logger in [logging.getLogger(), *[logging.getLogger(n) for n in logging.root.manager.loggerDict]]:
        for handler in getattr(logger, "handlers", ()):
            if isinstance(handler, logging.StreamHandler) and getattr(handler, "stream", None) is sys.stdout:
                handler.setStream(sys.stderr)


def _token_valid(raw: str) -> bool:
    try:
        return api_token_authenticate(raw) is not None
    finally:
        close_old_connections()
