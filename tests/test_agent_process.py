"""Running one command line, in process: exit codes, the output cap, the timeout, the stop."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from pytest_llmbench.agent import process
from pytest_llmbench.agent.limits import SandboxLimits
from pytest_llmbench.agent.process import (
    CommandResult,
    command_slot,
    not_run,
    run_captured,
    set_max_concurrent,
    shell_exit_code,
)

ENV = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}
QUICK = SandboxLimits(timeout_s=10.0)


def run(
    tmp_path: Path,
    script: str,
    limits: SandboxLimits | None = None,
    overrun: Callable[[], str | None] | None = None,
) -> CommandResult:
    return run_captured(
        ["/bin/sh", "-c", script],
        cwd=tmp_path,
        env=ENV,
        setup=lambda: None,
        timeout_s=(limits or QUICK).timeout_s,
        max_output_bytes=(limits or QUICK).max_output_bytes,
        overrun=overrun,
        sandboxed=False,
    )


def test_both_streams_and_the_exit_code_are_kept(tmp_path: Path) -> None:
    result = run(tmp_path, "pwd; echo said >&2; exit 3")
    assert (result.exit_code, result.stdout, result.stderr) == (3, f"{tmp_path}\n", "said\n")
    assert not (result.timed_out or result.truncated or result.sandboxed)
    assert result.error is None and result.disk_limit_hit is None


def test_only_the_given_environment_is_seen(tmp_path: Path) -> None:
    result = run(tmp_path, "env")
    names = {line.split("=", 1)[0] for line in result.stdout.splitlines()}
    assert names <= {*ENV, "PWD", "SHLVL", "_"}


@pytest.mark.parametrize(("returncode", "shell"), [(0, 0), (3, 3), (-9, 137), (-15, 143)])
def test_death_by_signal_reads_as_a_shell_says_it(returncode: int, shell: int) -> None:
    assert shell_exit_code(returncode) == shell


def test_a_command_killed_by_a_signal_exits_128_plus_it(tmp_path: Path) -> None:
    assert run(tmp_path, "kill -9 $$").exit_code == 137


def test_output_past_the_cap_is_cut_and_the_command_killed(tmp_path: Path) -> None:
    result = run(tmp_path, "yes", SandboxLimits(timeout_s=10.0, max_output_bytes=100))
    assert result.truncated and not result.timed_out
    assert result.stdout == "y\n" * 50 + "\n[... output truncated at 100 bytes]"


def test_the_timeout_kills_the_group(tmp_path: Path) -> None:
    result = run(tmp_path, "sleep 30 & sleep 30", SandboxLimits(timeout_s=0.2))
    assert result.timed_out and result.exit_code is None


def test_a_limit_the_measure_reports_stops_the_command(tmp_path: Path) -> None:
    calls: list[int] = []

    def overrun() -> str | None:
        calls.append(1)
        return "the workdir holds more than 1 MB" if len(calls) > 1 else None

    result = run(tmp_path, "sleep 30", overrun=overrun)
    assert result.disk_limit_hit == "the workdir holds more than 1 MB"
    assert not result.timed_out and result.exit_code == 137


def test_a_limit_passed_in_the_last_moments_is_reported(tmp_path: Path) -> None:
    result = run(tmp_path, "true", overrun=lambda: "the workdir holds more than 4 entries")
    assert result.exit_code == 0
    assert result.disk_limit_hit == "the workdir holds more than 4 entries"


def test_a_command_that_cannot_start_is_an_error_result(tmp_path: Path) -> None:
    result = run(tmp_path / "missing", "true")
    assert result.exit_code is None and result.stdout == ""
    assert result.error is not None and result.error.startswith("cannot start /bin/sh: ")
    assert not_run("no", sandboxed=True, overrun="full") == CommandResult(
        None, "", "", False, False, True, 0.0, error="no", disk_limit_hit="full"
    )


def test_the_bound_on_commands_at_once_is_the_last_one_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(process, "_SLOTS", process._SLOTS)  # restored afterwards
    set_max_concurrent(2)
    slot = command_slot()
    assert [slot.acquire(blocking=False) for _ in range(3)] == [True, True, False]
    set_max_concurrent(1)
    assert command_slot() is not slot
    slot.release()
    slot.release()  # the one acquired is the one released
