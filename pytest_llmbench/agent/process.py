"""Run one command line to its end, with a timeout, and capture its output with a cap.

:func:`run_captured` starts an argv (bwrap's, or ``/bin/sh -c``) in a process group of its own,
reads stdout and stderr up to a cap (past it, the group is killed), kills the whole group on
the wall-clock timeout or when a measure of the workdir says it passed a limit, and always
kills what the command left behind. How many commands run at once in this process is bounded
(:func:`command_slot`, :func:`set_max_concurrent`). What the command may see and use is the
caller's (:mod:`.sandbox`, :mod:`.bwrap`, :mod:`.limits`).
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

_CHUNK = 65536
# Readers of a pipe still held open by a process that escaped the group are abandoned after this.
_READER_JOIN_S = 2.0
#: How often a running command's workdir is measured against the disk limits: every 20 ms
#: while measuring is cheap, less often (up to 0.5 s) as the workdir grows.
_DISK_POLL_S = 0.02
_DISK_POLL_MAX_S = 0.5


@dataclass(frozen=True)
class CommandResult:
    """What came of one command."""

    exit_code: int | None  #: shell convention (128 + signal when killed); None on timeout
    stdout: str  #: decoded, truncated to the cap with a marker line
    stderr: str  #: likewise
    timed_out: bool  #: the wall-clock timeout killed it
    truncated: bool  #: an output stream passed the cap (and the group was killed)
    sandboxed: bool  #: ran under bwrap
    duration_s: float  #: wall-clock seconds
    error: str | None = None  #: why it could not run at all
    process_limit_hit: bool = False  #: a fork was refused by the pids cgroup
    disk_limit_hit: str | None = None  #: the workdir outgrew a limit (which), and was stopped


def not_run(error: str, sandboxed: bool, overrun: str | None = None) -> CommandResult:
    """The result of a command that could not run at all, saying why."""
    return CommandResult(
        None, "", "", False, False, sandboxed, 0.0, error=error, disk_limit_hit=overrun
    )


# --- the process-wide bound ---------------------------------------------------------------------

_SLOTS = threading.BoundedSemaphore(max(1, os.cpu_count() or 1))


def command_slot() -> threading.BoundedSemaphore:
    """The bound on commands running at once: hold it while one runs (the one acquired is the
    one released, even if :func:`set_max_concurrent` replaces it meanwhile)."""
    return _SLOTS


def set_max_concurrent(n: int) -> None:
    """Bound the commands running at once in this process (default: the CPU count)."""
    if n < 1:
        raise ValueError(f"max concurrent commands must be >= 1, got {n}")
    global _SLOTS
    _SLOTS = threading.BoundedSemaphore(n)


# --- running ------------------------------------------------------------------------------------


def run_captured(
    argv: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    setup: Callable[[], None],
    timeout_s: float,
    max_output_bytes: int,
    overrun: Callable[[], str | None] | None,
    sandboxed: bool,
) -> CommandResult:
    """Run ``argv`` in ``cwd`` with exactly ``env``; ``setup`` runs in the child before exec.
    The group is killed after ``timeout_s`` and when a stream passes ``max_output_bytes``.
    ``overrun`` (None: not measured) says which limit the workdir passed, if any: the command
    is then stopped. Blocks until the command and its group are gone."""
    started = time.monotonic()
    try:
        proc = subprocess.Popen(
            argv,
            cwd=cwd,
            env=dict(env),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            preexec_fn=setup,  # runs before the fds are closed, so it can join the cgroup
        )
    except (OSError, ValueError, subprocess.SubprocessError) as exc:  # ValueError: a NUL
        return not_run(f"cannot start /bin/sh: {type(exc).__name__}: {exc}", sandboxed)
    return _collect(proc, started, started + timeout_s, max_output_bytes, overrun, sandboxed)


def _collect(
    proc: subprocess.Popen[bytes],
    started: float,
    deadline: float,
    cap: int,
    overrun: Callable[[], str | None] | None,
    sandboxed: bool,
) -> CommandResult:
    assert proc.stdout is not None and proc.stderr is not None
    group = _Group(proc)
    readers = [_CappedReader(s, cap, group.kill) for s in (proc.stdout, proc.stderr)]
    for reader in readers:
        reader.start()
    timed_out, passed = _watch(group, deadline, overrun)
    group.kill()  # the timed-out command, or background jobs it left behind
    returncode = group.reap()
    for reader in readers:
        reader.join(_READER_JOIN_S)
    out, err = readers
    if passed is None and overrun is not None:
        passed = overrun()  # written in the last moments
    return CommandResult(
        exit_code=None if timed_out else shell_exit_code(returncode),
        stdout=out.text(),
        stderr=err.text(),
        timed_out=timed_out,
        truncated=out.overflowed or err.overflowed,
        sandboxed=sandboxed,
        duration_s=time.monotonic() - started,
        disk_limit_hit=passed,
    )


def _watch(
    group: _Group, deadline: float, overrun: Callable[[], str | None] | None
) -> tuple[bool, str | None]:
    """Wait for the command; (timed out, the disk limit it passed) when it was stopped."""
    poll_s = _DISK_POLL_S
    while not group.exited_within(min(poll_s, deadline - time.monotonic())):
        if time.monotonic() >= deadline:
            return True, None
        if overrun is None:
            continue
        measured = time.monotonic()
        passed = overrun()
        if passed is not None:
            return False, passed
        # Often while measuring is cheap; a big workdir is measured less often (at most
        # a fifth of the time goes to it).
        poll_s = min(_DISK_POLL_MAX_S, max(_DISK_POLL_S, 4 * (time.monotonic() - measured)))
    return False, None


def shell_exit_code(returncode: int) -> int:
    """``returncode`` as a shell reports it: death by signal N is 128 + N."""
    # a shell reports death by signal N as 128 + N, and so does bwrap; match it without bwrap
    return 128 - returncode if returncode < 0 else returncode


def kill_quietly(kill: Callable[[int, int], None], target: int) -> None:
    """SIGKILL ``target`` with ``kill`` (``os.kill``, ``os.killpg``); gone already is fine."""
    try:
        kill(target, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):  # already gone
        pass


def _wait_unreaped(pid: int) -> None:
    try:
        os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)
    except ChildProcessError:  # reaped meanwhile, after a timeout
        pass


class _Group:
    """The command's process group, killed only while its leader is unreaped (no pid reuse)."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self._proc = proc
        self._lock = threading.Lock()
        self._reaped = False
        self._waiter: threading.Thread | None = None

    def kill(self) -> None:
        with self._lock:
            if not self._reaped:
                kill_quietly(os.killpg, self._proc.pid)

    def exited_within(self, timeout_s: float) -> bool:
        """Wait for the leader to exit without reaping it; False on timeout."""
        if self._waiter is None:
            self._waiter = threading.Thread(
                target=_wait_unreaped, args=(self._proc.pid,), daemon=True
            )
            self._waiter.start()
        self._waiter.join(max(0.0, timeout_s))
        return not self._waiter.is_alive()

    def reap(self) -> int:
        with self._lock:
            self._reaped = True
            return self._proc.wait()


class _CappedReader(threading.Thread):
    """Reads one pipe into memory up to ``cap`` bytes; past it, stops and calls ``on_overflow``."""

    def __init__(self, stream: IO[bytes], cap: int, on_overflow: Callable[[], None]) -> None:
        super().__init__(daemon=True)
        self._stream, self._cap, self._on_overflow = stream, cap, on_overflow
        self.data = bytearray()
        self.overflowed = False

    def run(self) -> None:
        with self._stream:
            while chunk := os.read(self._stream.fileno(), _CHUNK):
                room = self._cap - len(self.data)
                self.data += chunk[:room]
                if len(chunk) > room:
                    self.overflowed = True
                    self._on_overflow()
                    return

    def text(self) -> str:
        text = self.data.decode("utf-8", errors="replace")
        return text + f"\n[... output truncated at {self._cap} bytes]" if self.overflowed else text
