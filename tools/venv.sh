#!/usr/bin/env bash
# The project's virtual environment (.venv), built from the hashed lock file for `make eval`,
# `make test`, `make lint` and `make docs`, and saying what it does: the first set-up takes
# minutes (llama-cpp-python builds from source), every later one returns at once.
#
#   PYTHON=python3.11 bash tools/venv.sh   the interpreter to build it with (default python3);
#                                          VENV=DIR another folder than .venv
#
# The stamp (.venv/.installed) holds a hash of what the venv was built from: this script, the lock
# file and pyproject.toml. A stamp that matches means no pip call at all. Hashes, not times, so that
# a checkout or a branch switch that touches a file without changing it costs nothing.
set -euo pipefail
cd "$(dirname "$0")/.."

python="${PYTHON:-python3}"
venv="${VENV:-.venv}"
stamp="$venv/.installed"
inputs=(requirements.lock pyproject.toml tools/venv.sh)

sha256() { if command -v sha256sum >/dev/null; then sha256sum; else shasum -a 256; fi; }
fingerprint=$(cat "${inputs[@]}" | sha256 | cut -d' ' -f1)
if [ -x "$venv/bin/python" ] && [ -f "$stamp" ]; then
  [ "$(cat "$stamp")" = "$fingerprint" ] && exit 0
  # An empty stamp is the Makefile's own from before this script (same build): trusted while it is
  # newer than the lock file and pyproject.toml, as make trusted it.
  if [ ! -s "$stamp" ] && [ "$stamp" -nt requirements.lock ] && [ "$stamp" -nt pyproject.toml ]; then
    echo "$fingerprint" >"$stamp"
    exit 0
  fi
fi

# llama-cpp-python builds from source; use both cores. llama.cpp's default build is native: on a
# CPU with AMX units (Intel Sapphire Rapids and later) it uses its AMX kernels, which crash in the
# first decode (ggml-org/llama.cpp#20824). Build the portable x86-64 kernels instead (ignored on
# other architectures), with a wheel cache of their own, so that a native wheel cached on this
# machine is never reused.
export CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-2}"
export CMAKE_ARGS="${CMAKE_ARGS:--DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON}"
export PIP_CACHE_DIR="${PIP_CACHE_DIR:-$HOME/.cache/pytest-llmbench/pip-portable}"

say() { echo "pytest-llmbench set-up: $*"; }

"$python" -c 'import sys; sys.exit(sys.version_info < (3, 10))' ||
  { echo "pytest-llmbench needs Python >= 3.10 (set PYTHON=...)" >&2; exit 1; }

started=$SECONDS
say "building $venv from requirements.lock: 8 to 13 minutes the first time on 2 cores (6 to 10 of" \
  "them building llama-cpp-python), 2 to 3 when pip's cache holds its wheel; later runs skip it"
if [ ! -x "$venv/bin/python" ]; then
  say "1/4 creating $venv ($python -m venv)"
  "$python" -m venv "$venv"
else
  say "1/4 updating $venv to requirements.lock, pyproject.toml and tools/venv.sh"
fi
pip() { "$venv/bin/python" -m pip install --quiet --no-deps "$@"; }
# The lock file's llama-cpp-python entry (its line and its hash lines), and the rest.
awk '/^llama-cpp-python==/{p=1;print;next} p&&/^ /{print;next} {p=0}' requirements.lock \
  >"$venv/llama.lock"
awk '/^llama-cpp-python==/{p=1;next} p&&/^ /{next} {p=0;print}' requirements.lock >"$venv/rest.lock"

say "2/4 installing the locked packages (hash-checked wheels; 2 to 3 minutes)"
pip --require-hashes -r "$venv/rest.lock"
say "3/4 building llama-cpp-python from source with llama.cpp's portable x86-64 kernels (6 to 10" \
  "minutes on 2 cores; seconds when $PIP_CACHE_DIR holds the wheel)"
# --force-reinstall: a venv made before the portable build holds a native one; replace it.
pip --require-hashes --force-reinstall -r "$venv/llama.lock"
say "4/4 installing pytest-llmbench from this checkout (editable)"
pip --no-build-isolation -e .

echo "$fingerprint" >"$stamp"
elapsed=$((SECONDS - started))
say "done in $((elapsed / 60)) min $((elapsed % 60)) s"
