"""The agent sandbox, with real bubblewrap and real processes: escapes fail, limits hold."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_llmbench.agent import bwrap, process
from pytest_llmbench.agent import sandbox as sandbox_module
from pytest_llmbench.agent.limits import SandboxLimits
from pytest_llmbench.agent.mcp_launch import server_process
from pytest_llmbench.agent.process import CommandResult, set_max_concurrent
from pytest_llmbench.agent.sandbox import (
    FALLBACK_NOTICE,
    Sandbox,
    SandboxUnavailable,
    fallback_notice,
)

QUICK = SandboxLimits(timeout_s=10.0)


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    wd = tmp_path / "work"
    wd.mkdir()
    return wd


@pytest.fixture
def confined(workdir: Path) -> Sandbox:
    """A bwrap sandbox; "required" makes a broken bwrap fail these tests instead of passing."""
    return Sandbox(workdir, QUICK, mode="required")


def host_task_count() -> int:
    return sum(1 for entry in os.listdir("/proc") if entry.isdigit())


def test_bwrap_works_here() -> None:
    # .ci/run installs bubblewrap: the escape tests below must run for real
    assert bwrap.bwrap_path() is not None


def test_writes_inside_the_workdir(confined: Sandbox, workdir: Path) -> None:
    result = confined.run("mkdir -p out && echo made > out/file.txt && pwd")
    assert (result.exit_code, result.stdout, result.sandboxed) == (0, f"{workdir}\n", True)
    assert (workdir / "out/file.txt").read_text() == "made\n"


def test_writes_outside_do_not_reach_the_host(confined: Sandbox, workdir: Path) -> None:
    mark = f"llmbench-escape-{uuid.uuid4().hex}"
    result = confined.run(f"touch /tmp/{mark} && ls /tmp/{mark}")
    assert result.exit_code == 0  # the private /tmp is writable...
    assert not (Path("/tmp") / mark).exists()  # ...and not the host's
    confined.run(f'touch "$HOME/../{mark}"')
    assert not (workdir.parent / mark).exists()
    for place in ("/usr", "/etc", "/", "/usr/lib"):
        result = confined.run(f"touch {place}/{mark}")
        assert result.exit_code != 0, place
        assert "Read-only file system" in result.stderr
        assert not (Path(place) / mark).exists()
    for place in ("/var/tmp", str(Path.home())):  # not even there: nothing to write into
        result = confined.run(f"touch {place}/{mark}")
        assert result.exit_code != 0, place
        assert not (Path(place) / mark).exists()


def test_cannot_remount_the_system_writable(confined: Sandbox) -> None:
    # as root, bwrap keeps capabilities unless dropped; CAP_SYS_ADMIN would allow this
    mark = f"llmbench-escape-{uuid.uuid4().hex}"
    escaped = Path("/usr") / mark
    try:
        result = confined.run(f"mount -o remount,rw,bind / ; touch {escaped}")
        assert "Read-only file system" in result.stderr
        assert not escaped.exists()
    finally:
        escaped.unlink(missing_ok=True)  # should this ever fail, leave the host clean


@pytest.fixture
def listener() -> Iterator[int]:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    yield server.getsockname()[1]
    server.close()


def test_no_network_under_bwrap(workdir: Path, confined: Sandbox, listener: int) -> None:
    connect = (
        f"python3 -c \"import socket; socket.create_connection(('127.0.0.1', {listener}), 2)\""
    )
    unconfined = Sandbox(workdir, QUICK, mode="off").run(connect)
    assert unconfined.exit_code == 0, unconfined.stderr  # the listener is reachable from the host
    result = confined.run(connect)
    assert result.exit_code != 0
    assert "Error" in result.stderr


@pytest.mark.parametrize("mode", ["required", "off"])
def test_environment_has_no_secrets(
    workdir: Path, mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_SECRET_API_KEY", "sk-fake-secret")
    result = Sandbox(workdir, QUICK, mode=mode).run("env")
    assert "FAKE_SECRET" not in result.stdout and "sk-fake-secret" not in result.stdout
    env = dict(line.split("=", 1) for line in result.stdout.splitlines())
    assert env["HOME"] == str(workdir) and env["LANG"] == "C.UTF-8"
    assert env["PATH"] == sandbox_module.CLEAN_PATH
    assert set(env) <= {"HOME", "LANG", "PATH", "PWD", "SHLVL", "_"}


@pytest.mark.slow
def test_timeout_kills_the_command(workdir: Path) -> None:
    seconds = f"100.{uuid.uuid4().int % 10**6:06d}"  # a command line no one else runs
    sandbox = Sandbox(workdir, SandboxLimits(timeout_s=1.0), mode="required")
    result = sandbox.run(f"sleep {seconds}")
    assert result.timed_out and result.exit_code is None
    assert result.duration_s >= 1.0, "it ran until the timeout"
    commands = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    assert f"sleep {seconds}" not in commands, "the command was killed, not left running"


@pytest.mark.parametrize("mode", ["required", "off"])
def test_background_jobs_die_with_the_command(workdir: Path, mode: str) -> None:
    seconds = f"77.{uuid.uuid4().int % 10**6:06d}"  # a command line no one else runs
    result = Sandbox(workdir, QUICK, mode=mode).run(f"sleep {seconds} & echo started")
    assert (result.exit_code, result.stdout) == (0, "started\n")
    time.sleep(0.2)
    commands = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    assert f"sleep {seconds}" not in commands


@pytest.mark.parametrize("mode", ["required", "off"])
def test_endless_output_is_truncated_and_killed(workdir: Path, mode: str) -> None:
    limits = SandboxLimits(timeout_s=20.0, max_output_bytes=1000)
    result = Sandbox(workdir, limits, mode=mode).run("yes")
    assert result.truncated and not result.timed_out  # killed at the cap, not at the timeout
    assert result.stdout.endswith("\n[... output truncated at 1000 bytes]")
    assert len(result.stdout) == 1000 + len("\n[... output truncated at 1000 bytes]")
    assert result.exit_code == 137  # killed


def test_output_under_the_cap_is_kept_whole(confined: Sandbox) -> None:
    result = confined.run("printf 'x%.0s' $(seq 500); echo; echo err >&2")
    assert result.stdout == "x" * 500 + "\n" and result.stderr == "err\n"
    assert not result.truncated


def test_process_cap_refuses_forks_past_it(workdir: Path) -> None:
    sandbox = Sandbox(workdir, SandboxLimits(timeout_s=10.0, max_processes=16), mode="required")
    result = sandbox.run("for i in $(seq 40); do sleep 1 & done; wait")
    assert "fork" in result.stderr.lower()  # dash: "Cannot fork"
    assert result.process_limit_hit or sandbox.process_limit == "rlimit"


@pytest.mark.slow
def test_fork_bomb_is_contained(workdir: Path) -> None:
    sandbox = Sandbox(workdir, SandboxLimits(timeout_s=2.0, max_processes=32), mode="required")
    # never let a bomb loose where nothing caps it (root without a pids cgroup)
    assert sandbox.process_limit in ("cgroup", "rlimit")
    before = host_task_count()
    # the busy loop (builtins only) keeps the shell, and so the bomb, alive until the timeout
    result = sandbox.run("bash -c ':(){ :|:& };:; while true; do true; done'")
    assert result.timed_out
    assert result.process_limit_hit or sandbox.process_limit == "rlimit"
    assert subprocess.run(["true"], check=False).returncode == 0  # the host can still fork
    deadline = time.monotonic() + 30.0  # a wait for the kernel to reap, not a speed bound
    while host_task_count() > before + 5 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert host_task_count() <= before + 5  # nothing of the bomb lingers


def test_memory_hog_fails_under_rlimit_as(workdir: Path) -> None:
    limits = SandboxLimits(timeout_s=10.0, memory_mb=512)
    result = Sandbox(workdir, limits, mode="required").run("python3 -c \"x=' '*2_000_000_000\"")
    assert result.exit_code == 1
    assert "MemoryError" in result.stderr


def test_file_size_limit(workdir: Path) -> None:
    limits = SandboxLimits(timeout_s=10.0, max_file_mb=1)
    result = Sandbox(workdir, limits, mode="required").run("head -c 3000000 /dev/zero > big.bin")
    assert result.exit_code != 0
    assert (workdir / "big.bin").stat().st_size <= 1024 * 1024


def test_missing_workdir_is_an_error_result(tmp_path: Path) -> None:
    result = Sandbox(tmp_path / "gone", QUICK, mode="off").run("true")
    assert result.error is not None and "is not a directory" in result.error
    assert result.exit_code is None


def _path_without_bwrap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, broken: bool) -> Path:
    """PATH is one empty folder (no bwrap), or one holding a bwrap that cannot run."""
    folder = tmp_path / "path"
    folder.mkdir()
    if broken:
        fake = folder / "bwrap"
        fake.write_text(
            "#!/bin/sh\necho 'bwrap: setting up uid map: Permission denied' >&2\nexit 1\n"
        )
        fake.chmod(0o755)
    monkeypatch.setenv("PATH", str(folder))
    return folder


def test_required_raises_without_bwrap(
    workdir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _path_without_bwrap(tmp_path, monkeypatch, broken=False)
    with pytest.raises(SandboxUnavailable, match="sandbox: required, but bubblewrap is not"):
        Sandbox(workdir, QUICK, mode="required")


def test_auto_refuses_without_bwrap(
    workdir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sandbox_module, "_NOTICE", sandbox_module._OnceNotice())
    _path_without_bwrap(tmp_path, monkeypatch, broken=False)
    sandbox = Sandbox(workdir, QUICK, mode="auto")
    assert sandbox.refusal is not None and not sandbox.sandboxed
    assert sandbox.refusal.startswith("bubblewrap is not installed (no bwrap on PATH)")
    result = sandbox.run(f"touch {workdir}/ran")
    assert result.error == sandbox.refusal and result.exit_code is None
    assert not (workdir / "ran").exists()
    assert fallback_notice() is None  # nothing ran unconfined


def test_a_bwrap_that_cannot_run_is_refused_with_what_it_said(
    workdir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = _path_without_bwrap(tmp_path, monkeypatch, broken=True) / "bwrap"
    sandbox = Sandbox(workdir, QUICK, mode="auto")
    assert sandbox.refusal is not None and not sandbox.sandboxed
    assert sandbox.refusal.startswith(
        f"bubblewrap ({fake}) cannot run here (exit status 1: bwrap: setting up uid map: "
        "Permission denied)"
    )
    assert bwrap.bwrap_path() is None
    assert sandbox.run(f"touch {workdir}/ran").error == sandbox.refusal
    assert not (workdir / "ran").exists()


@pytest.mark.parametrize("broken", [False, True])
def test_the_refusal_is_a_set_up_problem_with_its_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, broken: bool
) -> None:
    folder = _path_without_bwrap(tmp_path, monkeypatch, broken)
    problem = bwrap.bwrap_problem(shutil.which("bwrap"))
    assert problem is not None
    assert f"`{bwrap.INSTALL_BWRAP}`" in problem
    assert bwrap.INSTALL_BWRAP == "sudo apt-get install -y bubblewrap"
    assert "or opt out with 'sandbox: off' in the eval file" in problem
    assert (str(folder) in problem) is broken


def test_a_working_bwrap_has_no_problem() -> None:
    assert bwrap.bwrap_problem(bwrap.bwrap_path()) is None


def test_off_runs_with_one_notice(workdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sandbox_module, "_NOTICE", sandbox_module._OnceNotice())
    assert fallback_notice() is None  # nothing ran unconfined yet
    Sandbox(workdir, QUICK, mode="required")
    assert fallback_notice() is None  # bwrap works here: no notice
    first = Sandbox(workdir, QUICK, mode="off")
    Sandbox(workdir, QUICK, mode="off")
    assert first.refusal is None
    result = first.run("echo fine")
    assert (result.sandboxed, result.stdout) == (False, "fine\n")
    assert fallback_notice() == FALLBACK_NOTICE
    assert fallback_notice() is None


def test_bad_mode(workdir: Path) -> None:
    with pytest.raises(ValueError, match="sandbox mode must be one of auto, required, off"):
        Sandbox(workdir, QUICK, mode="maybe")


@pytest.mark.slow
def test_concurrent_commands_are_bounded(workdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(process, "_SLOTS", process._SLOTS)  # restored afterwards
    bound = 2
    set_max_concurrent(bound)
    sandbox = Sandbox(workdir, QUICK, mode="required")
    results: list[CommandResult] = []

    def one(i: int) -> None:
        command = f"date +%s.%N > start{i}; sleep 0.5; date +%s.%N > end{i}"
        results.append(sandbox.run(command))

    threads = [threading.Thread(target=one, args=(i,)) for i in range(2 * bound)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert [r.exit_code for r in results] == [0] * (2 * bound)
    spans = [
        (float((workdir / f"start{i}").read_text()), float((workdir / f"end{i}").read_text()))
        for i in range(2 * bound)
    ]
    running = [sum(start <= t < end for start, end in spans) for t, _ in spans]
    assert max(running) == bound


def test_set_max_concurrent_rejects_zero() -> None:
    with pytest.raises(ValueError, match=">= 1"):
        set_max_concurrent(0)


# --- what a command sees (issue 15) -------------------------------------------------------------


def test_the_host_is_not_there(confined: Sandbox, workdir: Path, tmp_path: Path) -> None:
    """Only the system, a minimal /etc, the Python and the workdir: not $HOME, not the project
    checkout, not another item's workdir, not the host's processes."""
    other = tmp_path / "other-item"
    other.mkdir()
    (other / "notes.txt").write_text("another item's file")
    checkout = Path(__file__).resolve().parents[1]
    probes = {
        "cat /etc/shadow": "No such file",
        f"ls {Path.home()}/.bashrc": "No such file",
        f"cat {other}/notes.txt": "No such file",
        f"cat {checkout}/pyproject.toml": "No such file",
        f"ls {checkout}/tests": "No such file",
        "ls /etc/ssh /etc/apt /etc/pip.conf": "No such file",
        "ls /var /home /root/.cache": "No such file",
    }
    for command, error in probes.items():
        result = confined.run(command)
        assert result.exit_code != 0, command
        assert error in result.stderr, (command, result.stderr)
    tools = confined.run("echo 'a b' | awk '{print $2}' && python3 -c 'print(6*7)' && id -un")
    assert tools.exit_code == 0 and tools.stdout.startswith("b\n42\n"), tools
    processes = confined.run("ls /proc | grep -c '^[0-9]'")
    assert int(processes.stdout) <= 5, "the host's processes are visible"
    assert str(os.getpid()) not in confined.run("ls /proc").stdout.split()


def test_without_bwrap_a_command_cannot_read_this_process(tmp_path: Path) -> None:
    """sandbox: off: the child's environment is the allowlist, and this process's own
    /proc/PID/environ and mem are closed to it (even as root: it drops every capability)."""
    planted = "sk-PLANTED-" + uuid.uuid4().hex
    script = tmp_path / "probe.py"
    script.write_text(
        "import sys\n"
        "from pathlib import Path\n"
        "from pytest_llmbench.agent.sandbox import Sandbox, SandboxLimits\n"
        "box = Sandbox(Path(sys.argv[1]), SandboxLimits(timeout_s=10), 'off')\n"
        "r = box.run('env; cat /proc/$PPID/environ; head -c 64 /proc/$PPID/mem; "
        "cat /proc/$PPID/cmdline; echo; grep CapEff /proc/self/status')\n"
        "print(r.stdout); print(r.stderr)\n"
    )
    done = subprocess.run(
        [sys.executable, str(script), str(tmp_path)],
        env={**os.environ, "OPENAI_API_KEY": planted},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert planted not in done.stdout and "PLANTED" not in done.stdout
    assert "/proc/" in done.stdout and "environ: Permission denied" in done.stdout
    assert "mem' for reading: Permission denied" in done.stdout
    assert "CapEff:\t0000000000000000" in done.stdout


def test_disk_size_limit_stops_the_command(workdir: Path) -> None:
    limits = SandboxLimits(timeout_s=20.0, max_disk_mb=20, max_file_mb=8)
    box = Sandbox(workdir, limits, mode="required")
    result = box.run("i=0; while true; do i=$((i+1)); head -c 4000000 /dev/zero > f$i; done")
    assert result.disk_limit_hit == "the workdir holds more than 20 MB"
    assert not result.timed_out and result.duration_s < 10
    used = sum(p.stat().st_blocks * 512 for p in workdir.iterdir()) / 1024 / 1024
    assert 20 < used < 20 + 100, f"{used:.0f} MB"  # bounded: a poll interval's writes at most
    # A full workdir runs nothing more until files are removed.
    again = box.run("echo more > g")
    assert again.error is not None and "remove files" in again.error
    assert not (workdir / "g").exists()


def test_entry_limit_stops_the_command(workdir: Path) -> None:
    limits = SandboxLimits(timeout_s=20.0, max_entries=300)
    box = Sandbox(workdir, limits, mode="required")
    result = box.run("i=0; while true; do i=$((i+1)); : > f$i; done")
    assert result.disk_limit_hit == "the workdir holds more than 300 entries"
    assert 300 < len(list(workdir.iterdir())) < 300 + 20_000


def test_a_command_that_ends_over_the_limit_is_reported(workdir: Path) -> None:
    box = Sandbox(workdir, SandboxLimits(timeout_s=20.0, max_entries=10), mode="required")
    # Over the limit when it ends, whether a poll saw it running or not.
    result = box.run("touch a b c d e f g h i j k l")
    assert result.disk_limit_hit == "the workdir holds more than 10 entries"
    assert len(list(workdir.iterdir())) <= 12


def test_a_nul_in_a_command_is_an_error_result(confined: Sandbox) -> None:
    result = confined.run("echo a\0b")
    assert result.error is not None and "null byte" in result.error


def test_pytest_runs_in_the_sandbox(workdir: Path) -> None:
    """A `command` check's `python3 -m pytest` loads this plugin by its entry point: its source
    is mounted (read-only) even where an editable install keeps it in the checkout."""
    (workdir / "test_calc.py").write_text("def test_add():\n    assert 1 + 1 == 2\n")
    box = Sandbox(
        workdir,
        SandboxLimits(timeout_s=60.0),
        "required",
        path_prefix=[Path(sys.executable).parent],
    )
    result = box.run("python3 -m pytest -q -p no:cacheprovider")
    assert result.exit_code == 0, result.stdout + result.stderr
    assert "1 passed" in result.stdout
    source = Path(sandbox_module.__file__).resolve().parents[1]
    assert box.run(f"touch {source}/x").exit_code != 0


@pytest.mark.parametrize("network", [False, True])
def test_a_server_with_the_network_can_resolve_names_and_nothing_else_of_etc_is_added(
    confined: Sandbox, network: bool
) -> None:
    """`network: true` shares the host's network, and with it what resolving names and
    checking certificates read; /etc/ssl/private, beside them, stays out."""
    probe = "for f in /etc/resolv.conf /etc/ssl/certs /etc/ssl/private; do test -e $f && echo $f; done; true"
    argv, env = server_process(confined, ["/bin/sh", "-c", probe], {}, network=network)
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=30, check=False)
    assert done.returncode == 0, done.stderr
    host = [f for f in ("/etc/resolv.conf", "/etc/ssl/certs") if os.path.exists(f)]
    assert done.stdout.split() == (host if network else [])
    assert host  # the machine has them, so the check above can fail


@pytest.mark.parametrize(
    ("command", "program"),
    [
        ("OPENAI_API_KEY=sk-live-123 curl https://example.com", "curl"),
        ("env -i DATABASE_URL=postgres://u:p@h/db /usr/bin/psql -c 'select 1'", "psql"),
        ("timeout 5s pytest -q", "pytest"),
        ("ls -la", "ls"),
        ("$(cat secret.txt)", "sh"),
        ("'unclosed", "sh"),
        ("", "sh"),
    ],
)
def test_a_command_is_named_by_its_program_never_by_what_precedes_it(
    command: str, program: str
) -> None:
    """A span names a sandbox command: no variable set before it, no argument, no expansion."""
    from pytest_llmbench.agent.sandbox import program_of

    assert program_of(command) == program
