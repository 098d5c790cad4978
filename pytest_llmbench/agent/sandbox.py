"""Run one shell command for an agent, confined.

:class:`Sandbox` runs ``/bin/sh -c command`` in an item's workdir. Under bubblewrap the system
is read-only, ``/tmp`` is private, only the workdir is writable and there is no network (a fresh
network namespace). Always, bwrap or not: a clean environment (no inherited secrets), rlimits
on CPU time, address space, file size and core dumps, a cap on the number of processes, a
wall-clock timeout that kills the whole process group, and output read with a size cap. Where
bwrap does not work, mode ``"auto"`` falls back to those limits alone and
:func:`fallback_notice` says so once; mode ``"required"`` raises :class:`SandboxUnavailable`.

RLIMIT_NPROC does not bind root (the kernel exempts uid 0, inside bwrap's user namespace too),
so when running as root the process cap is a pids cgroup made for each command instead; where
none can be made, :attr:`Sandbox.process_limit` is ``"none"``.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import os
import resource
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

#: The PATH commands see; nothing of the caller's own PATH leaks in.
CLEAN_PATH = "/usr/local/bin:/usr/bin:/bin"
FALLBACK_NOTICE = "bubblewrap (bwrap) not available: run_command runs with rlimits only"
MODES = ("auto", "required", "off")
_MB = 1024 * 1024
_CHUNK = 65536
_PROBE_TIMEOUT_S = 10.0
# Readers of a pipe still held open by a process that escaped the group are abandoned after this.
_READER_JOIN_S = 2.0
_CGROUP_REMOVE_TRIES = 100


@dataclass(frozen=True)
class SandboxLimits:
    """What one command may use."""

    timeout_s: float = 30.0  #: wall-clock seconds before the process group is killed
    cpu_s: int = 20  #: CPU seconds per process (RLIMIT_CPU)
    memory_mb: int = 1024  #: address space per process (RLIMIT_AS); also caps the private /tmp
    max_processes: int = 64  #: processes and threads at once (pids cgroup or RLIMIT_NPROC)
    max_output_bytes: int = 16_000  #: per stream; past it the group is killed
    max_file_mb: int = 64  #: largest file a command may write (RLIMIT_FSIZE)


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


class SandboxUnavailable(RuntimeError):
    """Mode ``"required"`` and bubblewrap does not work here."""


# --- bubblewrap detection -------------------------------------------------------------------


def bwrap_path() -> str | None:
    """The bwrap executable when it exists and works here (probed once), else None."""
    path = shutil.which("bwrap")
    return path if path is not None and _bwrap_works(path, sized_tmp=False) else None


@functools.cache
def _bwrap_works(path: str, sized_tmp: bool) -> bool:
    # bwrap can exist yet fail: user namespaces disabled, or a bwrap without some option.
    with tempfile.TemporaryDirectory(prefix="llmbench-bwrap-probe-") as tmp:
        argv = _bwrap_argv(path, Path(tmp), SandboxLimits(), "true", sized_tmp)
        try:
            done = subprocess.run(argv, capture_output=True, timeout=_PROBE_TIMEOUT_S, check=False)
        except (OSError, subprocess.SubprocessError):
            return False
    return done.returncode == 0


def _bwrap_argv(
    bwrap: str, workdir: Path, limits: SandboxLimits, command: str, sized_tmp: bool
) -> list[str]:
    wd = str(workdir)
    # --size (bubblewrap >= 0.8) keeps a command from filling memory through the private /tmp
    size = ["--size", str(limits.memory_mb * _MB)] if sized_tmp else []
    return [
        bwrap,
        *("--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"),
        *size,
        *("--tmpfs", "/tmp", "--bind", wd, wd, "--chdir", wd),
        *("--unshare-all", "--die-with-parent", "--new-session"),
        # run as root, bwrap keeps every capability in the sandbox, and CAP_SYS_ADMIN could
        # remount the read-only root writable
        *("--cap-drop", "ALL"),
        *("/bin/sh", "-c", command),
    ]


# --- the once-per-process fallback notice and the process-wide bound --------------------------


class _OnceNotice:
    """The fallback notice: armed by a falling-back sandbox, handed out once."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._armed = False
        self._given = False

    def arm(self) -> None:
        with self._lock:
            self._armed = True

    def take(self) -> str | None:
        with self._lock:
            if not self._armed or self._given:
                return None
            self._given = True
            return FALLBACK_NOTICE


_NOTICE = _OnceNotice()
_SLOTS = threading.BoundedSemaphore(max(1, os.cpu_count() or 1))


def fallback_notice() -> str | None:
    """The one-line fallback notice, the first time after a sandbox fell back; else None."""
    return _NOTICE.take()


def set_max_concurrent(n: int) -> None:
    """Bound the commands running at once in this process (default: the CPU count)."""
    if n < 1:
        raise ValueError(f"max concurrent commands must be >= 1, got {n}")
    global _SLOTS
    _SLOTS = threading.BoundedSemaphore(n)


# --- process cap ------------------------------------------------------------------------------


@functools.cache
def _pids_cgroup_parent() -> Path | None:
    """A pids cgroup directory this process may create children in, or None."""
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


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


class _PidsCgroup:
    """A pids cgroup for one command: caps its processes, then kills what is left."""

    _serial = itertools.count()

    def __init__(self, parent: Path, max_processes: int) -> None:
        self.path = parent / f"llmbench-{os.getpid()}-{next(self._serial)}"
        self.path.mkdir()
        (self.path / "pids.max").write_text(str(max_processes))
        self.procs_fd = os.open(self.path / "cgroup.procs", os.O_WRONLY)

    def limit_hit(self) -> bool:
        events = _read(self.path / "pids.events").split()
        return len(events) == 2 and events[0] == "max" and events[1] != "0"

    def remove(self) -> None:
        os.close(self.procs_fd)
        for _ in range(_CGROUP_REMOVE_TRIES):
            for pid in _read(self.path / "cgroup.procs").split():
                _kill_quietly(os.kill, int(pid))
            try:
                self.path.rmdir()
                return
            except OSError:  # busy until the killed processes are gone
                time.sleep(0.01)


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


def _nproc_budget(max_processes: int) -> int:
    # RLIMIT_NPROC counts every process of the user, not just the command's own, so the
    # budget is what the user runs now plus max_processes
    uid = os.getuid()
    return max_processes if uid == 0 else _user_task_count(uid) + max_processes


def _rlimits(limits: SandboxLimits) -> list[tuple[int, int]]:
    wanted = [
        (resource.RLIMIT_CPU, limits.cpu_s),
        (resource.RLIMIT_AS, limits.memory_mb * _MB),
        (resource.RLIMIT_FSIZE, limits.max_file_mb * _MB),
        (resource.RLIMIT_CORE, 0),
        (resource.RLIMIT_NPROC, _nproc_budget(limits.max_processes)),
    ]
    # an unprivileged process cannot raise a hard limit; keep any lower one it already has
    capped = []
    for which, value in wanted:
        hard = resource.getrlimit(which)[1]
        capped.append((which, value if hard == resource.RLIM_INFINITY else min(value, hard)))
    return capped


def _child_setup(rlimits: list[tuple[int, int]], cgroup_fd: int | None) -> Callable[[], None]:
    def setup() -> None:  # runs in the child between fork and exec: system calls only
        if cgroup_fd is not None:
            os.write(cgroup_fd, b"0")  # "0" moves the writing process
        for which, value in rlimits:
            resource.setrlimit(which, (value, value))

    return setup


# --- running ----------------------------------------------------------------------------------


def _kill_quietly(kill: Callable[[int, int], None], target: int) -> None:
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

    def kill(self) -> None:
        with self._lock:
            if not self._reaped:
                _kill_quietly(os.killpg, self._proc.pid)

    def exited_within(self, timeout_s: float) -> bool:
        """Wait for the leader to exit without reaping it; False on timeout."""
        waiter = threading.Thread(target=_wait_unreaped, args=(self._proc.pid,), daemon=True)
        waiter.start()
        waiter.join(timeout_s)
        return not waiter.is_alive()

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


def _shell_exit_code(returncode: int) -> int:
    # a shell reports death by signal N as 128 + N, and so does bwrap; match it without bwrap
    return 128 - returncode if returncode < 0 else returncode


class Sandbox:
    """Runs shell commands for one agent in ``workdir``, confined and limited.

    ``mode``: ``"auto"`` uses bwrap when it works, else rlimits only (with a notice once);
    ``"required"`` raises :class:`SandboxUnavailable` when bwrap does not work; ``"off"`` uses
    rlimits only. ``path_prefix`` puts directories (say, a virtualenv's ``bin``) before
    :data:`CLEAN_PATH`.
    """

    def __init__(
        self,
        workdir: Path,
        limits: SandboxLimits,
        mode: str = "auto",
        *,
        path_prefix: Sequence[Path] = (),
    ) -> None:
        if mode not in MODES:
            raise ValueError(f"sandbox mode must be one of {', '.join(MODES)}, got {mode!r}")
        self.workdir = Path(workdir).resolve()
        self.limits = limits
        self.mode = mode
        self._path = ":".join([*(str(p) for p in path_prefix), CLEAN_PATH])
        self._bwrap = None if mode == "off" else bwrap_path()
        if self._bwrap is None and mode == "required":
            raise SandboxUnavailable("sandbox: required, but bubblewrap (bwrap) does not work here")
        if self._bwrap is None and mode == "auto":
            _NOTICE.arm()
        parent = _pids_cgroup_parent()
        self._cgroup_parent = parent
        #: how the process cap is enforced: "cgroup", "rlimit", or "none" (root without cgroups)
        self.process_limit = "cgroup" if parent else ("rlimit" if os.getuid() != 0 else "none")

    @property
    def sandboxed(self) -> bool:
        """Whether commands run under bwrap."""
        return self._bwrap is not None

    def run(self, command: str) -> CommandResult:
        """Run ``command`` with ``/bin/sh -c``; blocks (callers use ``asyncio.to_thread``)."""
        if not self.workdir.is_dir():
            return self._failure(f"workdir {self.workdir} is not a directory")
        slots = _SLOTS  # the one acquired is the one released, even if the bound changes
        with slots:
            try:
                cgroup = self._make_cgroup()
            except OSError as exc:
                return self._failure(f"cannot make a pids cgroup: {exc}")
            try:
                return self._run_in(command, cgroup)
            finally:
                if cgroup is not None:
                    cgroup.remove()

    def _make_cgroup(self) -> _PidsCgroup | None:
        if self._cgroup_parent is None:
            return None
        return _PidsCgroup(self._cgroup_parent, self.limits.max_processes)

    def _argv(self, command: str) -> list[str]:
        if self._bwrap is None:
            return ["/bin/sh", "-c", command]
        sized = _bwrap_works(self._bwrap, sized_tmp=True)
        return _bwrap_argv(self._bwrap, self.workdir, self.limits, command, sized)

    def _env(self) -> dict[str, str]:
        return {"PATH": self._path, "HOME": str(self.workdir), "LANG": "C.UTF-8"}

    def _run_in(self, command: str, cgroup: _PidsCgroup | None) -> CommandResult:
        setup = _child_setup(_rlimits(self.limits), cgroup.procs_fd if cgroup else None)
        started = time.monotonic()
        try:
            proc = subprocess.Popen(
                self._argv(command),
                cwd=self.workdir,
                env=self._env(),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
                preexec_fn=setup,  # runs before the fds are closed, so it can join the cgroup
            )
        except (OSError, subprocess.SubprocessError) as exc:
            return self._failure(f"cannot start /bin/sh: {type(exc).__name__}: {exc}")
        result = self._collect(proc, started)
        hit = cgroup is not None and cgroup.limit_hit()
        return dataclasses.replace(result, process_limit_hit=hit)

    def _collect(self, proc: subprocess.Popen[bytes], started: float) -> CommandResult:
        assert proc.stdout is not None and proc.stderr is not None
        group = _Group(proc)
        cap = self.limits.max_output_bytes
        readers = [_CappedReader(s, cap, group.kill) for s in (proc.stdout, proc.stderr)]
        for reader in readers:
            reader.start()
        timed_out = not group.exited_within(self.limits.timeout_s)
        group.kill()  # the timed-out command, or background jobs it left behind
        returncode = group.reap()
        for reader in readers:
            reader.join(_READER_JOIN_S)
        out, err = readers
        return CommandResult(
            exit_code=None if timed_out else _shell_exit_code(returncode),
            stdout=out.text(),
            stderr=err.text(),
            timed_out=timed_out,
            truncated=out.overflowed or err.overflowed,
            sandboxed=self.sandboxed,
            duration_s=time.monotonic() - started,
        )

    def _failure(self, error: str) -> CommandResult:
        return CommandResult(None, "", "", False, False, self.sandboxed, 0.0, error=error)
