#!/usr/bin/env bash
# `make run`: migrate, collectstatic, demo data once, then daphne + Celery workers + Celery Beat (and a
# guard of the embedded PostgreSQL/Redis) under supervisord, which restarts any of them that dies.
# Ctrl-C stops them all and the embedded PostgreSQL/Redis (when those are in use).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=.venv/bin
export ACHILLES_HOST="${HOST:-127.0.0.1}" ACHILLES_PORT="${PORT:-8000}"
mkdir -p var/supervisor

stop_embedded() { "$BIN/python" -m achilles.embedded stop || true; }
trap stop_embedded EXIT

"$BIN/python" manage.py migrate --noinput
# hashed, compressed static files for WhiteNoise (the admin, /api/docs, the pages)
"$BIN/python" manage.py collectstatic --noinput -v0
# Demo accounts and content only in development: production refuses to start with them.
if [ "${ACHILLES_ENV:-dev}" != "production" ]; then
  "$BIN/python" manage.py demo_data
fi
echo
echo "Achilles is starting on http://${ACHILLES_HOST}:${ACHILLES_PORT}/  (admin: /admin/, API: /api/docs)"
echo "Processes: $BIN/supervisorctl -c supervisord.conf status"
echo
"$BIN/supervisord" -c supervisord.conf
