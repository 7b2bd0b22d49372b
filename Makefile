# One command runs the service locally, one runs every check. Both set up .venv first.
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: install run test test-containers lint typecheck unit clean system-packages benchmark-documents docs docs-serve

# Debian packages the tests drive: a headless browser and its driver (the console's tests),
# promtool (the alert rules are checked with it) and tmux (the CLI's progress display).
SYSTEM_PACKAGES := chromium chromium-driver prometheus tmux
# The real manuals the quality benchmark's Debian sets are built from (benchmarks/eval/).
BENCHMARK_PACKAGES := debian-policy debian-reference-en python3.11-doc bash-doc git-doc sqlite3-doc
SUDO := $(shell [ "$$(id -u)" -eq 0 ] || echo sudo)

$(STAMP): pyproject.toml cli/pyproject.toml client/pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check --upgrade pip
	# The CPU build of torch lies on this machine's disk; pin it before anything pulls torch in.
	$(PY) -m pip install --quiet --disable-pip-version-check torch==2.13.0
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[local,dev]'
	# The client library and the CLI built on it, distributions of their own, after the server's
	# (an older server install owned the script).
	$(PY) -m pip install --quiet --disable-pip-version-check -e './client[langchain,llama-index]' -e ./cli
	touch $(STAMP)

install: $(STAMP)

system-packages: PACKAGES = $(SYSTEM_PACKAGES)
benchmark-documents: PACKAGES = $(BENCHMARK_PACKAGES)
system-packages benchmark-documents:
	@missing=$$(for p in $(PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
	if [ -n "$$missing" ]; then \
		echo "installing Debian packages:" $$missing; \
		$(SUDO) apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends $$missing >/dev/null; \
	fi

run: $(STAMP)
	$(PY) -m devstack run $(RUN_ARGS)

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports

typecheck: $(STAMP)
	$(VENV)/bin/mypy

# The MCP clients written outside this project that tests/e2e/test_mcp_clients.py drives (the
# TypeScript SDK, mcp-remote): npm, exactly as the lock file pins them, again only when it changes.
MCP_CLIENTS_STAMP := tests/mcp_clients/.installed
$(MCP_CLIENTS_STAMP): tests/mcp_clients/package-lock.json
	@command -v node >/dev/null && command -v npm >/dev/null || { \
		echo "node and npm are not on PATH: the MCP client tests need Node.js 20.18 or newer with npm" \
			"(Debian 12's nodejs is 18, too old; see docs/mcp-clients.md)" >&2; \
		exit 1; }
	cd tests/mcp_clients && npm ci --engine-strict --no-audit --no-fund --loglevel=error
	touch $@

# The suite runs on three pytest-xdist workers (on two cores: much of it waits), whole modules
# each (a module shares one stack; the modules on the packaged model's stack go together), handed
# out in collection order, which puts the longest modules first (tests/conftest.py,
# tests/shared_stacks.py).
PYTEST_ARGS ?= -n 3 --dist loadfile --no-loadscope-reorder
test: system-packages lint typecheck docs $(MCP_CLIENTS_STAMP)
	$(VENV)/bin/pytest $(PYTEST_ARGS)

# The documentation site, built from docs/ into site/ (broken links and missing pages fail).
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

docs-serve: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs serve

# The integration and end-to-end suites against the real engines in containers (needs a Docker
# engine; says so and fails where there is none).
test-containers: $(STAMP)
	$(PY) -m devstack.containers
	RAGLINE_TEST_SERVERS=containers $(VENV)/bin/pytest tests/integration tests/e2e -m "not local_servers" $(PYTEST_ARGS)

clean:
	rm -rf $(VENV) .ragline .mypy_cache .ruff_cache .pytest_cache site
