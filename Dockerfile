# syntax=docker/dockerfile:1
# The Achilles image: one image for every process (web, workers, beat, the sync agent); the command
# chooses the process (deploy/compose/compose.yaml, deploy/kubernetes/). docs/deployment.md.
# Linted by hadolint in `make deploy-lint`; not built in CI (no daemon there).

# ---- wheels: everything requirements.txt pins, built once (python-ldap is an sdist) ----------
FROM python:3.11-slim-bookworm AS wheels
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends build-essential libldap2-dev libsasl2-dev \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /build
# only the pins: a code change does not rebuild this layer
COPY requirements.txt .
RUN --mount=type=cache,target=/root/.cache/pip \
    pip wheel --wheel-dir /wheels -r requirements.txt

# ---- the runtime image ------------------------------------------------------------------------
FROM python:3.11-slim-bookworm
# libldap/libsasl for python-ldap, Tesseract for scanned PDFs among uploads, DejaVu Sans for PDF exports
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends libldap-2.5-0 libsasl2-2 tesseract-ocr tesseract-ocr-rus tesseract-ocr-eng fonts-dejavu-core \
    && rm -rf /var/lib/apt/lists/* \
    && groupadd --system --gid 10001 achilles \
    && useradd --system --uid 10001 --gid achilles --home-dir /opt/achilles --shell /usr/sbin/nologin achilles

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    OMP_NUM_THREADS=1 \
    ACHILLES_ENV=production \
    ACHILLES_VAR_DIR=/var/lib/achilles \
    PATH=/opt/achilles/.venv/bin:$PATH

WORKDIR /opt/achilles
COPY requirements.txt .
RUN --mount=type=bind,from=wheels,source=/wheels,target=/wheels \
    python -m venv .venv \
    && .venv/bin/pip install --no-cache-dir --no-index --find-links /wheels -r requirements.txt

COPY --chown=root:root . .
# Static files at build time, into the image (nginx serves them from a copy; WhiteNoise as well).
# No database or Redis is reached: the URLs are placeholders and the start-up check is skipped.
RUN mkdir -p /var/lib/achilles \
    && DATABASE_URL=postgres://build@127.0.0.1:1/build REDIS_URL=redis://127.0.0.1:1/0 ACHILLES_SKIP_SERVICE_CHECK=1 \
       SECRET_KEY=build-only ACHILLES_SECRET_KEY_CONNECTORS=build-only \
       python manage.py collectstatic --noinput -v0 \
    && chown -R achilles:achilles /var/lib/achilles

USER 10001:10001
EXPOSE 8000
# /healthz is 200 when the database, Redis, a platform worker, an agents worker and beat all answer
# (docs/run.md); worker containers run another command and turn this check off (compose, kubernetes).
HEALTHCHECK --interval=15s --timeout=5s --start-period=30s --retries=3 \
    CMD ["python", "-c", "import sys, urllib.request as r; sys.exit(r.urlopen('http://127.0.0.1:8000/healthz', timeout=4).status != 200)"]
CMD ["daphne", "-b", "0.0.0.0", "-p", "8000", "--proxy-headers", "achilles.asgi:application"]
