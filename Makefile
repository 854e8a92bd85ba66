# Achilles — the two commands: `make run` and `make test`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
HOST   ?= 127.0.0.1
PORT   ?= 8000

.PHONY: install run test bench lint fuzz services-stop clean browser-deps screenshots

$(BIN)/.installed: requirements.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r requirements.txt
	touch $@

install: $(BIN)/.installed

run: install
	HOST=$(HOST) PORT=$(PORT) bash scripts/run.sh

test: install
	$(BIN)/python -m pytest $(PYTEST_ARGS)

# schemathesis against /api/openapi.json as an admin and a user, with a delete racer (FUZZ_SECONDS=120)
fuzz: install
	$(BIN)/python scripts/fuzz.py

bench: install
	$(BIN)/python -m bench

# The chat, agents and tokens pages at 1366 and 375 px, light and dark, into var/screenshots/.
screenshots: install
	$(BIN)/python -m pytest tests/browser/screenshots.py -q -p no:cacheprovider

# ruff (rules in pyproject.toml), the import contracts (import-linter) and types (mypy, django-stubs).
# `ruff format --check` joins once the tree has had its one `ruff format` commit.
lint: install
	$(BIN)/ruff check .
	$(BIN)/lint-imports
	$(BIN)/mypy

services-stop:
	$(BIN)/python -m achilles.embedded stop

clean: services-stop
	rm -rf var

# Debian's Chromium and driver for the browser tests (tests/browser); needs root and apt.
browser-deps:
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null
