# Two commands from a fresh clone: `make eval` and `make test`.
# Both build .venv from the hashed lock file when it is missing or stale, and install the Debian
# packages they use (tools/debian-packages.sh).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# llama-cpp-python builds from source; use both cores.
export CMAKE_BUILD_PARALLEL_LEVEL ?= 2
# llama.cpp's default build is native: on a CPU with AMX units (Intel Sapphire Rapids and
# later) it uses its AMX kernels, which crash in the first decode (ggml-org/llama.cpp#20824).
# Build the portable x86-64 kernels instead (ignored on other architectures), with a wheel cache
# of their own, so that a native wheel cached on this machine is never reused.
export CMAKE_ARGS ?= -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON
export PIP_CACHE_DIR ?= $(HOME)/.cache/pytest-llmbench/pip-portable
export LITELLM_LOCAL_MODEL_COST_MAP ?= True
PYTEST_ARGS ?=

.PHONY: venv eval test test-fast lint lock clean plotly-bundle debian-eval debian-test

venv: $(STAMP)

$(STAMP): requirements.lock pyproject.toml Makefile
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 10))' || \
		{ echo "pytest-llmbench needs Python >= 3.10 (set PYTHON=...)"; exit 1; }
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --require-hashes --no-deps -r requirements.lock
	@# A venv made before the portable build holds a native one: replace it (hash-checked).
	awk '/^llama-cpp-python==/{p=1;print;next} p&&/^ /{print;next} {p=0}' requirements.lock \
		> $(VENV)/llama.lock
	$(BIN)/python -m pip install --quiet --require-hashes --no-deps --force-reinstall \
		-r $(VENV)/llama.lock
	$(BIN)/python -m pip install --quiet --no-deps --no-build-isolation -e .
	touch $(STAMP)

# The Debian packages a run uses (eval: bubblewrap; test: bubblewrap and chromium), installed
# when missing as root or with sudo without a password; otherwise a stop with the command to
# type. Before the venv, so that a machine without them learns it before the build's minutes.
debian-eval debian-test:
	@bash tools/debian-packages.sh $(@:debian-%=%)

eval: debian-eval $(STAMP)
	$(BIN)/python -m pytest evals/ $(PYTEST_ARGS)

test: debian-test $(STAMP)
	$(BIN)/python -m pytest tests/ $(PYTEST_ARGS)

# Everything but the tests marked slow (xdist runs, the embedded model, chromium, real
# subprocess servers): the quick loop while editing; `make test` runs them all.
test-fast: debian-test $(STAMP)
	$(BIN)/python -m pytest tests/ -m "not slow" $(PYTEST_ARGS)

lint: $(STAMP)
	$(BIN)/python -m ruff check pytest_llmbench tests evals benchmarks
	$(BIN)/python -m ruff format --check pytest_llmbench tests evals benchmarks
	$(BIN)/python -m mypy pytest_llmbench

# Re-resolve the lock file (needs uv on PATH); review the diff before committing.
lock:
	uv pip compile pyproject.toml --extra local --extra datasets --extra html --extra view --extra dev --extra docs --generate-hashes --python-version 3.11 \
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
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/python -m mkdocs build --strict
