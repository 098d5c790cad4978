#!/usr/bin/env bash
# The Debian packages that runs of this project use, installed where they are missing: the one
# list, for the Makefile's set-up (`make eval`, `make test`) and .ci/run alike.
#
#   tools/debian-packages.sh eval   bubblewrap: agent evals under evals/ run commands, confined
#                                   by bwrap (pytest_llmbench/agent/sandbox.py)
#   tools/debian-packages.sh test   bubblewrap (tests/test_agent_sandbox.py, tests/test_agent.py)
#                                   and chromium (tests/test_report_standalone.py,
#                                   tests/test_view.py render pages in it)
#
# A package whose program is on PATH costs nothing. Missing ones are installed with apt-get when
# this runs as root, or with sudo when sudo needs no password. Otherwise nothing is installed:
# the script says which command to type and exits 1, before the run.
set -euo pipefail

usage() {
  echo "usage: $0 eval|test" >&2
  exit 2
}

[ $# -eq 1 ] || usage
# program:package pairs; each set is what `make <set>` needs
case "$1" in
  eval) wanted="bwrap:bubblewrap" ;;
  test) wanted="bwrap:bubblewrap chromium:chromium" ;;
  *) usage ;;
esac

missing=""
for pair in $wanted; do
  command -v "${pair%%:*}" >/dev/null 2>&1 || missing="$missing ${pair#*:}"
done
missing="${missing# }"
[ -n "$missing" ] || exit 0

target="$1"
case "$missing" in
  *" "*) named="Debian's packages ${missing// / and }" them="them" ;;
  *) named="Debian's package $missing" them="it" ;;
esac

stop() {  # why nothing was installed; the command that installs what is missing
  {
    echo "pytest-llmbench: \`make $target\` needs $named, missing on this machine; $1."
    echo "Install $them, then run \`make $target\` again:"
    echo
    echo "    sudo apt-get install -y $missing"
    echo
  } >&2
  exit 1
}

if ! command -v apt-get >/dev/null 2>&1; then
  stop "there is no apt-get here to install $them with (elsewhere, use the system's package manager)"
fi
if [ "$(id -u)" = 0 ]; then
  apt() { DEBIAN_FRONTEND=noninteractive apt-get "$@"; }
elif command -v sudo >/dev/null 2>&1 && sudo -n true >/dev/null 2>&1; then
  apt() { sudo -n DEBIAN_FRONTEND=noninteractive apt-get "$@"; }
else
  stop "this user cannot install $them (not root, and sudo is missing or asks for a password)"
fi

echo "installing $named (for make $target)"
apt update -qq >/dev/null
# shellcheck disable=SC2086  # one word per package
apt install -y -qq --no-install-recommends $missing >/dev/null
for pair in $wanted; do
  if ! command -v "${pair%%:*}" >/dev/null 2>&1; then
    echo "pytest-llmbench: apt-get installed ${pair#*:}, yet ${pair%%:*} is not on PATH ($PATH)" >&2
    exit 1
  fi
done
