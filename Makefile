# Two commands from a fresh clone: `make eval` and `make test`.
# Both build .venv from the hashed lock file when it is missing or stale (tools/venv.sh, which says
# what it does and how long it takes), and install the Debian packages they use
# (tools/debian-packages.sh).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
export LITELLM_LOCAL_MODEL_COST_MAP ?= True
PYTEST_ARGS ?=

.PHONY: venv eval eval-all test test-fast lint lock clean plotly-bundle debian-eval debian-test

# Returns at once when .venv matches the lock file, pyproject.toml and the script (a hash in
# .venv/.installed); the first set-up takes 8 to 13 minutes on 2 cores.
venv:
	@PYTHON=$(PYTHON) VENV=$(VENV) bash tools/venv.sh

# The Debian packages a run uses (eval: bubblewrap; test: bubblewrap and chromium), installed
# when missing as root or with sudo without a password; otherwise a stop with the command to
# type. Before the venv, so that a machine without them learns it before the build's minutes.
debian-eval debian-test:
	@bash tools/debian-packages.sh $(@:debian-%=%)

# The tour: one or two cases of each feature of evals/ (the `tour` mark, evals/conftest.py), under
# three minutes on the embedded model; `make eval-all` runs every example: about eight minutes,
# plus about an hour for evals/retail/ (ten agent tasks with a simulated user; one took 7 min 18 s
# on 2 cores).
eval: debian-eval venv
	$(BIN)/python -m pytest evals/ -m tour $(PYTEST_ARGS)

eval-all: debian-eval venv
	$(BIN)/python -m pytest evals/ $(PYTEST_ARGS)

test: debian-test venv
	$(BIN)/python -m pytest tests/ $(PYTEST_ARGS)

# Everything but the tests marked slow (xdist runs, the embedded model, chromium, real
# subprocess servers): the quick loop while editing; `make test` runs them all.
test-fast: debian-test venv
	$(BIN)/python -m pytest tests/ -m "not slow" $(PYTEST_ARGS)

lint: venv
	$(BIN)/python -m ruff check pytest_llmbench tests evals benchmarks
	$(BIN)/python -m ruff format --check pytest_llmbench tests evals benchmarks
	$(BIN)/python -m mypy pytest_llmbench

# Re-resolve the lock file (needs uv on PATH); review the diff before committing.
lock:
	uv pip compile pyproject.toml --extra local --extra datasets --extra html --extra view --extra otel --extra dev --extra docs --generate-hashes --python-version 3.11 \
		--no-header -o requirements.lock

# Rebuild report.html's partial plotly.js bundle (needs node and npm; versions locked with hashes
# in tools/plotly-bundle/package-lock.json). The built file is committed.
plotly-bundle:
	cd tools/plotly-bundle && npm ci --no-audit --no-fund && node build.js

clean:
	rm -rf $(VENV) llmbench-results .pytest_cache

# The documentation site (mkdocs.yml, docs/) built into site/; --strict fails on a broken link or
# anchor and on a page left out of the navigation (tests/test_docs.py runs the same build).
# NO_MKDOCS_2_WARNING silences mkdocs-material's notice about MkDocs 2.0 on every build.
.PHONY: docs
docs: venv
	NO_MKDOCS_2_WARNING=1 $(BIN)/python -m mkdocs build --strict
