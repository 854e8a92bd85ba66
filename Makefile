# Achilles — the two commands: `make run` and `make test`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
HOST   ?= 127.0.0.1
PORT   ?= 8000

# Python writes bytecode for the project's own modules even where the environment says not to
# (PYTHONDONTWRITEBYTECODE): otherwise every process compiles them again, and every pytest process
# rewrites the assertions of all 300 test modules again: 6 s of CPU of the 12 s that collecting the
# suite takes, in each of the suite's four pytest processes. __pycache__ is ignored by git and Docker.
unexport PYTHONDONTWRITEBYTECODE

.PHONY: install run test coverage bench eval lint fuzz services-stop clean browser-deps ldap-deps ocr-deps pdf-deps screenshots deploy-lint deploy-test deploy-deps mcp-conformance-deps messages gettext-deps axe-deps

$(BIN)/.installed: requirements.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r requirements.txt
	touch $@

install: $(BIN)/.installed

run: install
	HOST=$(HOST) PORT=$(PORT) bash scripts/run.sh

# Two parts at once: everything but the fault suite on TEST_WORKERS pytest-xdist workers (each with
# its own test database and namespace; the browser tests in two units, each on one worker with one
# daphne and one Chromium; three workers on two cores: the third runs while others wait on the
# processes and servers their tests start), and beside them the fault suite in one process on embedded PostgreSQL
# and Redis of its own (ACHILLES_VAR_DIR=var/faults: it stops and restarts its servers, never the
# ones the workers use; stopped when it ends). The fault suite waits on restarts and kills most of
# its 2-3 min, so it costs the run little CPU; its output is printed after the parallel part's.
# Each part prints its 20 slowest tests. Exit code 5 (nothing selected, e.g. PYTEST_ARGS=tests/browser)
# is not a failure.
TEST_WORKERS ?= 3
FAULTS_VAR_DIR := $(CURDIR)/var/faults
test: install
	mkdir -p $(FAULTS_VAR_DIR)
	started=$$(date +%s); \
	ACHILLES_VAR_DIR=$(FAULTS_VAR_DIR) $(BIN)/python -m pytest -m faults --durations=20 $(or $(PYTEST_ARGS),tests/faults) \
		>$(FAULTS_VAR_DIR)/pytest.log 2>&1 & faults_pid=$$!; \
	$(BIN)/python -m pytest -n $(TEST_WORKERS) -m "not faults and not deploy" --durations=20 $(PYTEST_ARGS); parallel=$$?; \
	[ $$parallel -eq 5 ] && parallel=0; \
	wait $$faults_pid; faults=$$?; \
	[ $$faults -eq 5 ] && faults=0; \
	echo "=== the fault suite (tests/faults, its own PostgreSQL and Redis under var/faults) ==="; \
	cat $(FAULTS_VAR_DIR)/pytest.log; \
	took=$$(( $$(date +%s) - started )); echo "=== make test: both parts done in $$((took / 60)) min $$((took % 60)) s ==="; \
	ACHILLES_VAR_DIR=$(FAULTS_VAR_DIR) $(BIN)/python -m achilles.embedded stop; \
	[ $$parallel -eq 0 ] && [ $$faults -eq 0 ]

# Coverage of the hot path (the modules in pyproject.toml's [tool.coverage.run] include: search, the
# facade, grounding, the support check, the pipeline, errors, the hub's services and protocol, the
# agents' services), measured over those modules' own unit and integration tests on TEST_WORKERS
# workers with coverage's C tracer; prints the term-missing report and fails under the floor
# ([tool.coverage.report] fail_under). A step of its own (.ci/run runs it after `make test`): under
# the whole suite the tracer costs +30-45 % of the test processes' CPU (docs/tests.md § Coverage).
COVERAGE_TESTS := tests/knowledge/unit tests/conversations/unit tests/hub/unit tests/agents/unit \
	tests/achilles/unit/test_errors.py tests/achilles/unit/test_openapi_errors.py \
	tests/knowledge/integration/test_search.py tests/knowledge/integration/test_search_pinned.py \
	tests/knowledge/integration/test_withheld_oracle.py tests/knowledge/integration/test_facade_writes.py \
	tests/conversations/integration/test_grounding.py tests/conversations/integration/test_error_contract.py \
	tests/conversations/integration/test_turn_queries.py \
	tests/hub/integration/test_lifecycle.py tests/hub/integration/test_lease_job.py \
	tests/agents/integration/test_budget.py
coverage: install
	COVERAGE_CORE=ctrace $(BIN)/python -m pytest -n $(TEST_WORKERS) -m "not faults and not browser" --cov \
		--cov-report=term-missing $(COVERAGE_TESTS)

# schemathesis against /api/openapi.json as an admin and a user, with a delete racer; 60 s a fuzzer
# (FUZZ_SECONDS=120 for longer). .ci/run runs it after `make test`.
fuzz: install
	$(BIN)/python scripts/fuzz.py

# The question set (evaluation/questions.yaml) through the chat engine as `demo`, per chat model of the
# allow-list (builtin; LLM_BASE_URL's model too when set), on a throwaway database; docs/eval.md.
eval: install
	OMP_NUM_THREADS=1 $(BIN)/python -m evaluation

# bench/requirements.txt: the peers measured beside ours (markitdown), never part of `make install`.
bench: install
	$(BIN)/pip install -q -r bench/requirements.txt
	$(BIN)/python -m bench

# The chat, agents and tokens pages at 1366 and 375 px, light and dark, into var/screenshots/.
screenshots: install
	$(BIN)/python -m pytest tests/browser/screenshots.py -q -p no:cacheprovider

# ruff (rules and format in pyproject.toml), the import contracts (import-linter), types (mypy,
# django-stubs), the orchestration's conventions (scripts/check_orchestration.py: named rows,
# complexity) and the house conventions (scripts/check_conventions.py: private names only in
# achilles/compat.py, no ORM in api/views/pages).
lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports
	$(BIN)/mypy
	$(BIN)/python scripts/check_orchestration.py
	$(BIN)/python scripts/check_conventions.py

# The deployment files (Dockerfile, deploy/compose, deploy/kubernetes, deploy/systemd) checked offline
# by linters pinned in deploy/requirements.txt (installed into the venv here, not by `make install`).
deploy-lint: install
	$(BIN)/python -m pip install --quiet -r deploy/requirements.txt
	bash scripts/deploy_lint.sh

# The production topology end to end (tests/deploy, marker `deploy`): nginx with TLS, two daphne,
# the workers and beat, PostgreSQL and Redis over TCP with passwords. Needs `make deploy-deps`.
deploy-test: install
	$(BIN)/python -m pytest -m deploy tests/deploy --durations=5 $(PYTEST_ARGS)

# The interface's English (docs/web-ui.md § Languages): locale/en/LC_MESSAGES/{django,djangojs}.po
# updated from the templates, the code and the pages' scripts (a new or changed text arrives with an
# empty msgstr: translate it in the .po), then compiled to the committed .mo. Needs GNU gettext (make gettext-deps).
# (templates/admin/ holds copies of Django's admin templates: their texts are Django's, in Django's catalogs)
MESSAGES_SCAN := --no-location --ignore='.venv/*' --ignore='var/*' --ignore='tests/*' --ignore='bench/*' \
	--ignore='evaluation/*' --ignore='deploy/*' --ignore='docs/*' --ignore='emulators/*' --ignore='scripts/*' \
	--ignore='syncagent/*' --ignore='knowledge/demo_corpus/*' --ignore='staticfiles/*' \
	--ignore='templates/admin/*'
messages: install
	$(BIN)/python manage.py makemessages -l en $(MESSAGES_SCAN)
	$(BIN)/python manage.py makemessages -d djangojs -l en $(MESSAGES_SCAN)
	# a guess by msgmerge (fuzzy) would be a wrong English text: the entry comes in empty instead
	for po in locale/en/LC_MESSAGES/*.po; do msgattrib --clear-fuzzy --empty --clear-previous -o $$po $$po; done
	$(BIN)/python manage.py compilemessages -l en

# GNU gettext (xgettext, msgmerge, msgfmt) for `make messages` (a developer's tool: the tests and
# the running platform read the committed .po/.mo without it); needs root and apt.
gettext-deps:
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq gettext >/dev/null

services-stop:
	$(BIN)/python -m achilles.embedded stop
	ACHILLES_VAR_DIR=$(FAULTS_VAR_DIR) $(BIN)/python -m achilles.embedded stop

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

# DejaVu Sans (Cyrillic) for the PDF export of a thread (conversations/export.py); needs root and apt.
pdf-deps:
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq fonts-dejavu-core >/dev/null

# Debian's nginx for the production-topology test (tests/deploy); needs root and apt.
deploy-deps:
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nginx >/dev/null

# The official MCP conformance suite and a Node 22 to run it (both from npm; the cache serves a
# repeat offline in ~15 s), for tests/hub/mcp/conformance.
MCP_CONFORMANCE_DIR := var/mcp-conformance
mcp-conformance-deps:
	mkdir -p $(MCP_CONFORMANCE_DIR)
	npm install --prefer-offline --no-audit --no-fund --prefix $(MCP_CONFORMANCE_DIR) node@22.23.3 @modelcontextprotocol/conformance@0.1.16 >/dev/null
	$(MCP_CONFORMANCE_DIR)/node_modules/.bin/node --version

# axe-core (npm, pinned) for the accessibility checks of the browser tests (tests/browser/pagecheck.py
# injects it into every page, light and dark); the npm cache serves a repeat offline.
AXE_DIR := var/axe-core
axe-deps:
	mkdir -p $(AXE_DIR)
	npm install --prefer-offline --no-audit --no-fund --prefix $(AXE_DIR) axe-core@4.14.1 >/dev/null
	test -f $(AXE_DIR)/node_modules/axe-core/axe.min.js
