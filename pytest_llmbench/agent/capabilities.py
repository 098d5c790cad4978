"""Dropping every capability before a program runs unconfined as root (``sandbox: off``).

Root keeps CAP_SYS_PTRACE, with which a child reads this process's ``/proc/PID/environ`` (its
API keys) although the process is non-dumpable (:func:`.limits.protect_this_process`), and
CAP_DAC_OVERRIDE, with which it reads any file. An empty bounding set and ``no_new_privs``
leave the program exec'd next none of them. The one piece of code that drops them is
:func:`dropper`, used two ways: a command's child calls it between fork and exec
(:func:`.limits.child_setup`); a long-lived process (an MCP server, an environment's runner,
started by launchers that take no ``preexec_fn``, such as the MCP SDK's stdio client) runs
behind :func:`dropped_argv`, this file run as a script, which drops them and execs the rest.

Standard library only, nothing of pytest_llmbench: the script runs as ``python -I``.
"""

from __future__ import annotations

import ctypes
import errno
import functools
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

_PR_CAPBSET_DROP = 24
_PR_SET_NO_NEW_PRIVS = 38


@functools.cache
def libc() -> ctypes.CDLL:
    """The C library, for ``prctl``."""
    return ctypes.CDLL(None, use_errno=True)


@functools.cache
def _last_capability() -> int:
    try:
        return int(Path("/proc/sys/kernel/cap_last_cap").read_text())
    except (OSError, ValueError):
        return 63  # the kernel refuses numbers past its last: harmless


def must_drop(unconfined: bool) -> bool:
    """Whether a child started ``unconfined`` must drop its capabilities: as root it has them
    all (bubblewrap drops them itself)."""
    return unconfined and os.geteuid() == 0


def dropper() -> Callable[[], None]:
    """What drops every capability of the calling process and of what it execs; built in the
    parent, it makes system calls only, so a child may run it between fork and exec."""
    prctl, last = libc().prctl, _last_capability()

    def drop() -> None:
        for capability in range(last + 1):
            # EINVAL: a number past the kernel's last capability (when /proc did not say it)
            if prctl(_PR_CAPBSET_DROP, capability, 0, 0, 0) and ctypes.get_errno() != errno.EINVAL:
                raise OSError(ctypes.get_errno(), f"cannot drop capability {capability}")
        if prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0):
            raise OSError(ctypes.get_errno(), "cannot set no_new_privs")

    return drop


def dropped_argv(argv: Sequence[str]) -> list[str]:
    """``argv`` run with no capability: behind this file run as a script."""
    return [sys.executable, "-I", "-B", str(Path(__file__).resolve()), *argv]


def main(argv: list[str]) -> int:
    """Drop every capability, then become ``argv`` (126, starting nothing, when the drop
    fails: the program would keep them)."""
    if not argv:
        print("usage: capabilities.py PROGRAM [ARGUMENT ...]", file=sys.stderr)
        return 2
    try:
        dropper()()
    except OSError as exc:
        print(f"capabilities.py: {exc}; {argv[0]} not started", file=sys.stderr)
        return 126
    os.execvp(argv[0], argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
