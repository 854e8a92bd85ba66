# Achilles — the two commands: `make run` and `make test`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
HOST   ?= 127.0.0.1
PORT   ?= 8000

.PHONY: install run test bench lint fuzz services-stop clean browser-deps

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

lint: install
	$(BIN)/ruff check .

services-stop:
	$(BIN)/python -m achilles.embedded stop

clean: services-stop
	rm -rf var

# Debian's Chromium and driver for the browser tests (tests/browser); needs root and apt.
browser-deps:
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null
