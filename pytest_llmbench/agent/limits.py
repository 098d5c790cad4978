"""What one command may use, and how a process is held to it.

:class:`SandboxLimits` names the limits. A command's rlimits (CPU time, address space, file
size, core dumps, processes) are set between fork and exec by :func:`child_setup`; a long-lived
process (an MCP server) gets them through ``prlimit`` (:func:`prlimit_argv`). What the workdir
may hold is measured by :func:`disk_overrun`. :func:`protect_this_process` closes this process's
``/proc`` entries to the commands it starts. The cap on processes is :mod:`.process_cap`'s.
"""

from __future__ import annotations

import functools
import os
import resource
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .capabilities import dropper, libc
from .process_cap import nproc_budget

MB = 1024 * 1024
#: A server's address space (RLIMIT_AS) as a multiple of ``memory_mb``: runtimes reserve far
#: more address space than they use, and Node 20 reserves over 1 GB at start (for some 70 MB
#: resident), so a Node server could not start under a command's limit.
SERVER_ADDRESS_SPACE_FACTOR = 4


@dataclass(frozen=True)
class SandboxLimits:
    """What one command may use."""

    timeout_s: float = 30.0  #: wall-clock seconds before the process group is killed
    cpu_s: int = 20  #: CPU seconds per process (RLIMIT_CPU)
    memory_mb: int = 1024  #: address space per process (RLIMIT_AS); also caps the private /tmp
    max_processes: int = 64  #: processes and threads at once (pids cgroup or RLIMIT_NPROC)
    max_output_bytes: int = 16_000  #: per stream; past it the group is killed
    max_file_mb: int = 64  #: largest file a command may write (RLIMIT_FSIZE)
    max_disk_mb: int = 512  #: what the workdir may hold in all; past it the group is killed
    max_entries: int = 20_000  #: files, folders and links the workdir may hold; likewise


def rlimits(limits: SandboxLimits) -> list[tuple[int, int]]:
    """The (resource, value) pairs a command runs under, none above a hard limit already set."""
    wanted = [
        (resource.RLIMIT_CPU, limits.cpu_s),
        (resource.RLIMIT_AS, limits.memory_mb * MB),
        (resource.RLIMIT_FSIZE, limits.max_file_mb * MB),
        (resource.RLIMIT_CORE, 0),
        (resource.RLIMIT_NPROC, nproc_budget(limits.max_processes)),
    ]
    # an unprivileged process cannot raise a hard limit; keep any lower one it already has
    capped = []
    for which, value in wanted:
        hard = resource.getrlimit(which)[1]
        capped.append((which, value if hard == resource.RLIM_INFINITY else min(value, hard)))
    return capped


def prlimit_argv(limits: SandboxLimits) -> list[str]:
    """``prlimit`` setting a long-lived process's rlimits (it cannot take a ``preexec_fn``);
    RLIMIT_NPROC too where it binds (not root: :func:`.mcp_launch.server_cap` caps root's)."""
    nproc = [f"--nproc={nproc_budget(limits.max_processes)}"] if os.getuid() != 0 else []
    return [
        "prlimit",
        f"--cpu={limits.cpu_s}",
        f"--as={limits.memory_mb * SERVER_ADDRESS_SPACE_FACTOR * MB}",
        f"--fsize={limits.max_file_mb * MB}",
        "--core=0",
        *nproc,
        "--",
    ]


def disk_overrun(folder: Path, limits: SandboxLimits) -> str | None:
    """Which limit ``folder`` passes (``max_disk_mb`` by blocks used, ``max_entries``), else
    None. Stops counting at the first limit passed."""
    entries = used = 0
    stack = [str(folder)]
    while stack:
        try:
            listing = os.scandir(stack.pop())
        except OSError:
            continue
        with listing:
            for entry in listing:
                entries += 1
                if entries > limits.max_entries:
                    return f"the workdir holds more than {limits.max_entries} entries"
                try:
                    info = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                used += info.st_blocks * 512
                if used > limits.max_disk_mb * MB:
                    return f"the workdir holds more than {limits.max_disk_mb} MB"
                if entry.is_dir(follow_symlinks=False):
                    stack.append(entry.path)
    return None


# --- between fork and exec ----------------------------------------------------------------------

_PR_SET_DUMPABLE = 4


@functools.cache
def protect_this_process() -> bool:
    """Make this process non-dumpable: its ``/proc/PID/environ``, ``mem`` and the like are then
    closed to its commands (to any process without CAP_SYS_PTRACE). Once; True when done."""
    return int(libc().prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)) == 0


def child_setup(
    limits: list[tuple[int, int]], cgroup_fd: int | None, drop_capabilities: bool
) -> Callable[[], None]:
    """What a command's child runs before exec: join the cgroup behind ``cgroup_fd``, drop
    every capability (root without bwrap), then set ``limits`` (:func:`rlimits`)."""
    drop = dropper() if drop_capabilities else None
    # Built here, in the parent: once the address-space limit is set, the child (a fork of a
    # process far larger than the limit) can map no new memory, and an allocation then (a
    # tuple, a ctypes argument) fails the start under load. So the limits are set last, the
    # address space's after every other, with nothing left to allocate.
    pairs = sorted(
        ((which, (value, value)) for which, value in limits),
        key=lambda pair: pair[0] == resource.RLIMIT_AS,
    )

    def setup() -> None:  # runs in the child between fork and exec: system calls only
        if cgroup_fd is not None:
            os.write(cgroup_fd, b"0")  # "0" moves the writing process
        if drop is not None:  # root without bwrap: no CAP_SYS_PTRACE, no CAP_DAC_OVERRIDE
            drop()
        for which, limit in pairs:
            resource.setrlimit(which, limit)

    return setup
