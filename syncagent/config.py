"""Sync agent configuration: command-line options, else environment variables, else a JSON file."""

from __future__ import annotations

import argparse
import json
import os
from dataclasses import dataclass, fields
from pathlib import Path

ENV = {
    "hub_url": "ACHILLES_HUB_URL",
    "token": "ACHILLES_SYNC_TOKEN",
    "jira_url": "JIRA_URL",
    "jira_token": "JIRA_TOKEN",
    "state_dir": "ACHILLES_SYNC_STATE_DIR",
    "max_commands": "ACHILLES_SYNC_MAX_COMMANDS",
    "max_429_attempts": "ACHILLES_SYNC_MAX_429_ATTEMPTS",
    "http_timeout": "ACHILLES_SYNC_HTTP_TIMEOUT",
    "verify_ssl": "ACHILLES_SYNC_VERIFY_SSL",
}
# Set by the launcher (run.py) for the child it starts; absent when the agent runs alone.
LAUNCHER_VERSION_ENV = "ACHILLES_SYNC_LAUNCHER_VERSION"
LAUNCHER_DIR_ENV = "ACHILLES_SYNC_LAUNCHER_DIR"
# The launcher's pid: the child stops once its parent is no longer this one (lifeline.watch_parent).
LAUNCHER_PID_ENV = "ACHILLES_SYNC_LAUNCHER_PID"
# The lock files (lifeline.hold_lock): the agent's in its state directory, the launcher's in its own.
AGENT_LOCK = "agent.lock"
LAUNCHER_LOCK = "launcher.lock"


@dataclass
class Config:
    hub_url: str
    token: str
    jira_url: str
    jira_token: str
    state_dir: Path
    max_commands: int = 20
    max_429_attempts: int = 8
    http_timeout: float = 30.0
    verify_ssl: bool = True


def build_parser(prog: str = "python -m syncagent") -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=prog, description="Achilles hub sync agent (Jira Server/Data Center).")
    p.add_argument("--config", help="JSON file with any of the options below (keys with underscores)")
    p.add_argument("--hub", dest="hub_url", help=f"hub base URL, e.g. https://achilles.example.com (${ENV['hub_url']})")
    p.add_argument("--token", help=f"the sync agent's hub token achsync_… (${ENV['token']})")
    p.add_argument("--jira", dest="jira_url", help=f"Jira base URL (${ENV['jira_url']})")
    p.add_argument("--jira-token", dest="jira_token", help=f"Jira personal access token (${ENV['jira_token']})")
    p.add_argument(
        "--state-dir", dest="state_dir", help=f"local state directory (${ENV['state_dir']}, default ./syncagent-state)"
    )
    p.add_argument("--max-commands", dest="max_commands", type=int)
    p.add_argument("--max-429-attempts", dest="max_429_attempts", type=int)
    p.add_argument("--http-timeout", dest="http_timeout", type=float)
    p.add_argument("--no-verify-ssl", dest="verify_ssl", action="store_const", const=False)
    return p


def load_config(args: argparse.Namespace) -> Config:
    file_values: dict = {}
    if getattr(args, "config", None):
        file_values = json.loads(Path(args.config).read_text())
    values: dict = {}
    for f in fields(Config):
        v = getattr(args, f.name, None)
        if v is None and f.name in ENV:
            v = os.environ.get(ENV[f.name]) or None
        if v is None:
            v = file_values.get(f.name)
        if v is not None:
            values[f.name] = v
    values.setdefault("state_dir", "syncagent-state")
    missing = [n for n in ("hub_url", "token", "jira_url", "jira_token") if not values.get(n)]
    if missing:
        raise SystemExit(
            "sync agent: missing configuration: "
            + ", ".join(f"{n} (--{n.replace('_url', '').replace('_', '-')} or ${ENV[n]})" for n in missing)
        )
    values["state_dir"] = Path(values["state_dir"])
    for name in ("max_commands", "max_429_attempts"):
        if name in values:
            values[name] = int(values[name])
    if "http_timeout" in values:
        values["http_timeout"] = float(values["http_timeout"])
    if isinstance(values.get("verify_ssl"), str):
        values["verify_ssl"] = values["verify_ssl"].lower() not in ("0", "false", "no")
    return Config(**values)
