# Achilles — the two commands: `make run` and `make test`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
HOST   ?= 127.0.0.1
PORT   ?= 8000

.PHONY: install run test bench lint fuzz services-stop clean browser-deps ldap-deps ocr-deps screenshots mcp-conformance-deps

$(BIN)/.installed: requirements.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r requirements.txt
	touch $@

install: $(BIN)/.installed

run: install
	HOST=$(HOST) PORT=$(PORT) bash scripts/run.sh

# Two parts: everything but the fault suite on TEST_WORKERS pytest-xdist workers (each with its own
# test database and namespace; the browser tests stay together on one worker, sharing one daphne and
# one Chromium), then the fault suite alone, since it stops and restarts the PostgreSQL and Redis
# every worker uses. Exit code 5 (nothing selected, e.g. PYTEST_ARGS=tests/browser) is not a failure.
TEST_WORKERS ?= 2
test: install
	$(BIN)/python -m pytest -n $(TEST_WORKERS) -m "not faults" --durations=20 $(PYTEST_ARGS); parallel=$$?; \
	[ $$parallel -eq 5 ] && parallel=0; \
	$(BIN)/python -m pytest -m faults $(or $(PYTEST_ARGS),tests/faults); faults=$$?; \
	[ $$faults -eq 5 ] && faults=0; \
	[ $$parallel -eq 0 ] && [ $$faults -eq 0 ]

# schemathesis against /api/openapi.json as an admin and a user, with a delete racer; 60 s a fuzzer
# (FUZZ_SECONDS=120 for longer). .ci/run runs it after `make test`.
fuzz: install
	$(BIN)/python scripts/fuzz.py

# bench/requirements.txt: the peers measured beside ours (markitdown), never part of `make install`.
bench: install
	$(BIN)/pip install -q -r bench/requirements.txt
	$(BIN)/python -m bench

# The chat, agents and tokens pages at 1366 and 375 px, light and dark, into var/screenshots/.
screenshots: install
	$(BIN)/python -m pytest tests/browser/screenshots.py -q -p no:cacheprovider

# ruff (rules and format in pyproject.toml), the import contracts (import-linter) and types (mypy,
# django-stubs).
lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports
	$(BIN)/mypy

services-stop:
	$(BIN)/python -m achilles.embedded stop

clean: services-stop
	rm -rf var

# Tesseract with Russian and English, for scanned PDFs among uploaded documents (without it they stay needs_ocr).
ocr-deps:
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq tesseract-ocr tesseract-ocr-rus tesseract-ocr-eng >/dev/null

# Debian's Chromium and driver for the browser tests (tests/browser); needs root and apt.
browser-deps:
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null

# OpenLDAP's slapd and tools for the directory tests (tests/achilles/directory_server.py), and what
# python-ldap (an sdist) builds against; needs root and apt.
ldap-deps:
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq slapd ldap-utils libldap2-dev libsasl2-dev build-essential python3-dev >/dev/null

# The official MCP conformance suite and a Node 22 to run it (both from npm; the cache serves a
# repeat offline in ~15 s), for tests/hub/mcp/conformance.
MCP_CONFORMANCE_DIR := var/mcp-conformance
mcp-conformance-deps:
	mkdir -p $(MCP_CONFORMANCE_DIR)
	npm install --prefer-offline --no-audit --no-fund --prefix $(MCP_CONFORMANCE_DIR) node@22.23.3 @modelcontextprotocol/conformance@0.1.16 >/dev/null
	$(MCP_CONFORMANCE_DIR)/node_modules/.bin/node --version
