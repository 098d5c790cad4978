"""The cap on how many processes a command runs at once.

RLIMIT_NPROC counts every process of the user, so a command's budget is what the user runs
now plus ``max_processes`` (:func:`nproc_budget`). It does not bind root (the kernel exempts
uid 0, inside bwrap's user namespace too), so as root the cap is a pids cgroup made for each
command instead (:class:`PidsCgroup`, under :func:`pids_cgroup_parent`); where none can be
made, there is no cap (``Sandbox.process_limit`` is ``"none"``).
"""

from __future__ import annotations

import functools
import itertools
import os
import time
from pathlib import Path

from .process import kill_quietly

_CGROUP_REMOVE_TRIES = 100


def nproc_budget(max_processes: int) -> int:
    """The RLIMIT_NPROC that lets a command start ``max_processes`` more processes."""
    # RLIMIT_NPROC counts every process of the user, not just the command's own, so the
    # budget is what the user runs now plus max_processes
    uid = os.getuid()
    return max_processes if uid == 0 else _user_task_count(uid) + max_processes


def _user_task_count(uid: int) -> int:
    """Processes and threads of ``uid``: what RLIMIT_NPROC counts against."""
    total = 0
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            status = _read(entry / "status")
            uids = [line for line in status.splitlines() if line.startswith("Uid:")]
            threads = [line for line in status.splitlines() if line.startswith("Threads:")]
            if uids and threads and uids[0].split()[1] == str(uid):
                total += int(threads[0].split()[1])
    return total


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


@functools.cache
def pids_cgroup_parent() -> Path | None:
    """A pids cgroup directory this process may create children in (as root), or None."""
    if os.geteuid() != 0:
        return None
    for parent in _pids_cgroup_candidates():
        probe = parent / f"llmbench-probe-{os.getpid()}"
        try:
            probe.mkdir()
            (probe / "pids.max").write_text("1")
            probe.rmdir()
        except OSError:
            continue
        return parent
    return None


def _pids_cgroup_candidates() -> list[Path]:
    """Our own cgroup in each hierarchy that has the pids controller (v1, or v2 with it on)."""
    try:
        own = Path("/proc/self/cgroup").read_text().splitlines()
        mounts = Path("/proc/self/mounts").read_text().splitlines()
    except OSError:
        return []
    found = []
    for line in mounts:
        _, mountpoint, fstype, options, *_ = line.split()
        if fstype == "cgroup" and "pids" in options.split(","):
            found += [Path(mountpoint) / path for path in _own_paths(own, v1=True)]
        elif fstype == "cgroup2":
            parents = [Path(mountpoint) / path for path in _own_paths(own, v1=False)]
            found += [p for p in parents if "pids" in _read(p / "cgroup.subtree_control").split()]
    return found


def _own_paths(own: list[str], v1: bool) -> list[str]:
    fields = [line.split(":", 2) for line in own if line.count(":") >= 2]
    if v1:
        return [path.lstrip("/") for _, ctl, path in fields if "pids" in ctl.split(",")]
    return [path.lstrip("/") for hid, ctl, path in fields if hid == "0" and not ctl]


class PidsCgroup:
    """A pids cgroup for one command: caps its processes, then kills what is left."""

    _serial = itertools.count()

    def __init__(self, parent: Path, max_processes: int) -> None:
        self.path = parent / f"llmbench-{os.getpid()}-{next(self._serial)}"
        self.path.mkdir()
        (self.path / "pids.max").write_text(str(max_processes))
        #: written "0" by a child to move itself in (:func:`.limits.child_setup`)
        self.procs_fd = os.open(self.path / "cgroup.procs", os.O_WRONLY)

    def limit_hit(self) -> bool:
        """Whether a fork was refused for passing the cap."""
        events = _read(self.path / "pids.events").split()
        return len(events) == 2 and events[0] == "max" and events[1] != "0"

    def remove(self) -> None:
        """Kill what is left in it, and remove it."""
        os.close(self.procs_fd)
        for _ in range(_CGROUP_REMOVE_TRIES):
            for pid in _read(self.path / "cgroup.procs").split():
                kill_quietly(os.kill, int(pid))
            try:
                self.path.rmdir()
                return
            except OSError:  # busy until the killed processes are gone
                time.sleep(0.01)
