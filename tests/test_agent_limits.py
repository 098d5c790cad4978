"""A command's limits, in process: the rlimits, prlimit's command line, the workdir's size."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_llmbench.agent.limits import (
    MB,
    SERVER_ADDRESS_SPACE_FACTOR,
    SandboxLimits,
    child_setup,
    disk_overrun,
    prlimit_argv,
    rlimits,
)

SMALL = SandboxLimits(cpu_s=7, memory_mb=300, max_file_mb=2, max_disk_mb=1, max_entries=4)


def test_rlimits_are_the_limits_and_no_core() -> None:
    wanted = dict(rlimits(SMALL))
    hard_cpu = resource.getrlimit(resource.RLIMIT_CPU)[1]
    assert wanted[resource.RLIMIT_CPU] == (
        7 if hard_cpu == resource.RLIM_INFINITY else min(7, hard_cpu)
    )
    assert wanted[resource.RLIMIT_CORE] == 0
    assert resource.RLIMIT_NPROC in wanted


def test_an_rlimit_is_never_asked_above_its_hard_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    """An unprivileged process cannot raise a hard limit: a lower one already set stays."""
    real = resource.getrlimit
    lower = {resource.RLIMIT_CPU: 3, resource.RLIMIT_AS: 100 * MB}
    monkeypatch.setattr(
        resource,
        "getrlimit",
        lambda which: (0, lower[which]) if which in lower else real(which),
    )
    wanted = dict(rlimits(SMALL))
    assert wanted[resource.RLIMIT_CPU] == 3
    assert wanted[resource.RLIMIT_AS] == 100 * MB


def test_child_setup_sets_the_limits_in_the_child() -> None:
    setup = child_setup(rlimits(SMALL), None, drop_capabilities=False)
    probe = "import resource as r; print(r.getrlimit(r.RLIMIT_CPU), r.getrlimit(r.RLIMIT_FSIZE))"
    done = subprocess.run(
        [sys.executable, "-c", probe], preexec_fn=setup, capture_output=True, text=True, check=True
    )
    assert done.stdout.split("\n")[0] == f"(7, 7) ({2 * MB}, {2 * MB})"


def test_a_server_gets_the_limits_through_prlimit_with_a_larger_address_space() -> None:
    argv = prlimit_argv(SMALL)
    assert argv[0] == "prlimit" and argv[-1] == "--"
    expected = {"--cpu=7", f"--as={300 * SERVER_ADDRESS_SPACE_FACTOR * MB}", f"--fsize={2 * MB}"}
    assert expected | {"--core=0"} <= set(argv)
    # RLIMIT_NPROC does not bind root: its cap is the server's pids cgroup instead
    assert any(arg.startswith("--nproc=") for arg in argv) is (os.getuid() != 0)


def test_disk_overrun_counts_entries_down_the_tree(tmp_path: Path) -> None:
    (tmp_path / "a/b").mkdir(parents=True)
    (tmp_path / "a/b/one").write_text("1")
    assert disk_overrun(tmp_path, SMALL) is None  # three entries
    (tmp_path / "a/b/two").write_text("2")
    (tmp_path / "three").write_text("3")
    assert disk_overrun(tmp_path, SMALL) == "the workdir holds more than 4 entries"


def test_disk_overrun_measures_blocks_used(tmp_path: Path) -> None:
    (tmp_path / "half").write_bytes(os.urandom(MB // 2))
    assert disk_overrun(tmp_path, SMALL) is None
    (tmp_path / "more").write_bytes(os.urandom(MB))
    assert disk_overrun(tmp_path, SMALL) == "the workdir holds more than 1 MB"
    (tmp_path / "more").unlink()
    with open(tmp_path / "sparse", "wb") as sparse:  # its size is not what it uses
        sparse.truncate(10 * MB)
    assert disk_overrun(tmp_path, SMALL) is None
