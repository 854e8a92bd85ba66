#!/usr/bin/env bash
# `make run`: migrate, collectstatic, demo data once, then daphne + Celery worker + Celery Beat under honcho.
# Ctrl-C stops all three and the embedded PostgreSQL/Redis (when those are in use).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=.venv/bin
export ACHILLES_HOST="${HOST:-127.0.0.1}" ACHILLES_PORT="${PORT:-8000}"

stop_embedded() { "$BIN/python" -m achilles.embedded stop || true; }
trap stop_embedded EXIT

"$BIN/python" manage.py migrate --noinput
# hashed, compressed static files for WhiteNoise (the admin, /api/docs, the pages)
"$BIN/python" manage.py collectstatic --noinput -v0
"$BIN/python" manage.py demo_data
echo
echo "Achilles is starting on http://${ACHILLES_HOST}:${ACHILLES_PORT}/  (admin: /admin/, API: /api/docs)"
echo
"$BIN/honcho" start -f Procfile
