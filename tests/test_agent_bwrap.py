"""The bubblewrap command line, in process: what a command is shown, for a given view."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from pytest_llmbench.agent.bwrap import (
    ETC_ENTRIES,
    NETWORK_ETC,
    View,
    bwrap_argv,
    system_view,
)
from pytest_llmbench.agent.limits import MB, SandboxLimits

LIMITS = SandboxLimits(memory_mb=256)


@pytest.fixture
def bwrap() -> str:
    found = shutil.which("bwrap")
    assert found is not None  # the sandbox tests need it: .ci/run installs it
    return found


def triples(argv: list[str]) -> list[tuple[str, str, str]]:
    return [(argv[i], argv[i + 1], argv[i + 2]) for i in range(len(argv) - 2)]


def test_the_view_is_mounted_over_the_private_tmp_in_a_read_only_root(bwrap: str) -> None:
    view = View(
        writable=(Path("/tmp/work"),),
        read_only=(Path("/tmp/data"),),
        hidden=(Path("/tmp/data/secret.txt"),),
        cwd=Path("/tmp/work"),
        programs=(Path("/opt/server"),),
        links=((Path("/tmp/work/bin/server"), Path("/opt/server/bin/server")),),
    )
    argv = bwrap_argv(bwrap, view, LIMITS, "echo hi")
    assert argv[0] == bwrap and argv[-3:] == ["/bin/sh", "-c", "echo hi"]
    found = triples(argv)
    tmpfs = argv.index("--tmpfs")
    for mount in [
        ("--bind", "/tmp/work", "/tmp/work"),
        ("--ro-bind", "/tmp/data", "/tmp/data"),
        ("--ro-bind", "/opt/server", "/opt/server"),
        ("--symlink", "/opt/server/bin/server", "/tmp/work/bin/server"),
    ]:
        assert found.index(mount) > tmpfs, mount  # over the private /tmp, not under it
    assert argv[argv.index("--chdir") + 1] == "/tmp/work"
    assert argv[argv.index("--remount-ro") + 1] == "/"
    assert argv[argv.index("--cap-drop") + 1] == "ALL"
    assert {"--unshare-all", "--die-with-parent", "--new-session"} <= set(argv)
    assert "--share-net" not in argv
    assert argv[argv.index("--size") + 1] == str(256 * MB)  # bubblewrap 0.8 here


def test_a_hidden_file_is_covered_by_an_empty_read_only_file(bwrap: str) -> None:
    view = View(read_only=(Path("/tmp/data"),), hidden=(Path("/tmp/data/key"),))
    argv = bwrap_argv(bwrap, view, LIMITS, "true")
    (cover,) = [src for flag, src, dst in triples(argv) if dst == "/tmp/data/key"]
    assert argv[argv.index(cover) - 1] == "--ro-bind"
    assert os.path.getsize(cover) == 0
    assert os.stat(cover).st_mode & 0o777 == 0o444


def test_the_network_comes_with_what_resolving_names_reads_and_no_more(bwrap: str) -> None:
    argv = bwrap_argv(bwrap, View(), LIMITS, "true", share_net=True)
    assert "--share-net" in argv
    shown = [dst for flag, src, dst in triples(argv) if flag == "--ro-bind" and src == dst]
    there = [f for f in NETWORK_ETC if os.path.exists(f)]
    assert there and set(there) <= set(shown)
    assert not [f for f in shown if f.startswith("/etc/ssl/private")]
    closed = bwrap_argv(bwrap, View(), LIMITS, "true")
    assert not set(there) & set(closed)


def test_a_bwrap_that_cannot_run_gets_no_sized_tmp(tmp_path: Path) -> None:
    argv = bwrap_argv(str(tmp_path / "no-bwrap"), View(), LIMITS, "true")
    assert "--size" not in argv and "--tmpfs" in argv


def test_of_etc_only_the_allowlist_is_shown() -> None:
    args = system_view()
    etc = [dst for flag, src, dst in triples(args) if dst.startswith("/etc/")]
    allowed = {f"/etc/{name}" for name in ETC_ENTRIES}
    assert etc and all(f in allowed or f.startswith("/etc/python3") for f in etc)
    assert "/etc/shadow" not in args and "/etc/ssl" not in " ".join(args)
    assert args[args.index("--dir") + 1] == "/etc"


def test_a_virtualenv_reached_through_a_symlink_runs_at_its_linked_path(
    bwrap: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """sys.executable names the venv as it was reached (a .venv symlinked into a checkout,
    pyenv-virtualenv's links): the sandbox shows it there too, not only at its real path."""
    import subprocess
    import sys

    from pytest_llmbench.agent import bwrap as module

    linked = tmp_path / "linked-venv"
    linked.symlink_to(os.path.realpath(sys.prefix))
    monkeypatch.setattr(sys, "prefix", str(linked))
    monkeypatch.setattr(sys, "exec_prefix", str(linked))
    module._python_dirs.cache_clear()
    try:
        assert str(linked) in module.shown_folders()
        python = linked / "bin" / Path(sys.executable).name
        work = tmp_path / "work"  # beside the link: the link itself is not shown
        work.mkdir()
        view = View(writable=(work,), cwd=work)
        argv = bwrap_argv(bwrap, view, LIMITS, f"{python} -c 'import sys; print(sys.prefix)'")
        done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    finally:
        module._python_dirs.cache_clear()
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(linked)
