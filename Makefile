# The newcomer's commands: `make run` (the app on http://127.0.0.1:8000/) and `make test`.
# Everything lives in .venv and .data; nothing is installed system-wide.

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PYTEST_ARGS ?=

.DEFAULT_GOAL := help
.PHONY: help venv assets browser run status restart test chaos bench lint docs clean-data

help:
	@echo "make run         start Switchyard (embedded PostgreSQL + Valkey, web, scheduler, workers)"
	@echo "make status      the state of each process \`make run\` supervises"
	@echo "make restart     restart them one at a time, as a deploy does (workers drain, no web gap)"
	@echo "make test        run the tests (PYTEST_ARGS=... to pass options)"
	@echo "make chaos       1,000 runs of every node kind while every process and both stores are killed"
	@echo "                 (ROLLING=1: every process restarted one at a time instead; RUNS=300: shorter)"
	@echo "make bench       run the benchmarks"
	@echo "make assets      install the npm packages (npm ci) and bundle the editor and dashboard (npm run build)"
	@echo "make lint        ruff check and format check, mypy --strict on every package"
	@echo "make docs        build the manual (docs/, MkDocs) into site/; a broken link fails"
	@echo "make clean-data  stop the embedded servers and delete .data"

venv: $(VENV)/.installed

$(VENV)/.installed: requirements.txt requirements-dev.txt requirements-otel.txt
	@$(PYTHON) -c 'import ensurepip' 2>/dev/null || { \
		echo "$(PYTHON) cannot create virtualenvs: install python3-venv (apt-get install -y python3-venv)."; \
		exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -q --upgrade pip
	$(VENV)/bin/pip install -q -r requirements-dev.txt
	touch $@

# Front-end assets: the ES modules of the editor, the dashboard and its charts, bundled with
# esbuild (npm registry, lockfile) into static/*/dist (not in git).
# `npm ci` runs again only when the lockfile changes (--ignore-scripts: no package runs code at
# install; esbuild needs none, its binary is the @esbuild/<platform> package); the bundle is
# rebuilt every time (~0.1 s).
assets: node_modules/.installed
	npm run build

node_modules/.installed: package.json package-lock.json
	npm ci --ignore-scripts --no-audit --no-fund
	touch $@

run: venv assets
	$(PY) scripts/run.py

status:
	@$(PY) scripts/run.py status

# Restart every process `make run` supervises, one at a time (workers drain; no web gap).
restart:
	@$(PY) scripts/run.py restart

# The browser tests drive Debian's Chromium through Playwright (never `playwright install`).
browser:
	@command -v chromium >/dev/null 2>&1 || (apt-get update && apt-get install -y chromium)

# Two pytest-xdist workers, a test file each at a time, the longest files first (the list in
# tests/conftest.py; xdist's own reorder, most tests first, handed them out last). Each worker
# has its own PostgreSQL and Redis databases (tests/conftest.py); TEST_WORKERS=0 runs
# everything but the browser tests in one process.
# The browser tests run at the same time, beside that session, in one process of their own
# (SWITCHYARD_TEST_SESSION=browser: PostgreSQL database test_switchyard_browser, Redis
# database 15, so they share no data with the xdist workers): Playwright's sync API keeps an
# event loop running in its process until the session ends, which breaks async_to_sync in any
# test after it, and xdist does not keep a file order; one process, as their live servers and
# broadcasters were not proven apart under xdist. Side by side, its minutes overlap the other
# session's instead of following them. Its report goes to test-artifacts/browser-tests.log
# and is printed after the other's, whole; its pytest cache (--lf) is .pytest_cache_browser.
# PYTEST_ARGS (options such as -k or -x) go to both sessions; exit code 5 (nothing
# collected, say under -k) is not a failure.
TEST_WORKERS ?= 2
PYTEST_RUN = $(VENV)/bin/pytest -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder
BROWSER_LOG = test-artifacts/browser-tests.log
test: venv assets browser
	@mkdir -p $(dir $(BROWSER_LOG)); \
	SWITCHYARD_TEST_SESSION=browser $(VENV)/bin/pytest -o cache_dir=.pytest_cache_browser tests/browser $(PYTEST_ARGS) >$(BROWSER_LOG) 2>&1 & pages_pid=$$!; \
	echo "make test: the browser tests run beside these, their report follows at the end ($(BROWSER_LOG))"; \
	$(PYTEST_RUN) --ignore=tests/browser $(PYTEST_ARGS); rest=$$?; \
	wait $$pages_pid; pages=$$?; \
	echo; echo "==================== tests/browser (ran beside the above) ===================="; \
	cat $(BROWSER_LOG); \
	for code in $$rest $$pages; do [ $$code -eq 0 ] || [ $$code -eq 5 ] || exit 1; done

# RUNS=300 for a shorter one (CI runs a short one: tests/integration/test_chaos.py).
chaos: venv
	$(PY) scripts/chaos.py --runs $(or $(RUNS),1000) $(if $(ROLLING),--rolling)

bench: venv
	$(PY) bench/run.py

# mypy reads its files and strictness from [tool.mypy] in pyproject.toml.
lint: venv
	$(VENV)/bin/ruff check . && $(VENV)/bin/ruff format --check . && $(VENV)/bin/mypy

# The reference pages (node kinds, settings, API) are generated from the code first, then
# mkdocs builds strictly: a broken link or a page missing from the nav fails.
docs: venv
	$(PY) docs/gen_reference.py
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

clean-data:
	@if [ -x $(PY) ]; then \
		for dir in .data/*/; do \
			if [ -f "$$dir/services.json" ]; then $(PY) scripts/services.py clean --dir "$$dir" || exit 1; fi; \
		done; \
	fi
	rm -rf .data
