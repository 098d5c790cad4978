"""Run one shell command for an agent, confined.

:class:`Sandbox` runs ``/bin/sh -c command`` in an item's workdir. Under bubblewrap a command
sees a filesystem of its own: the system directories it needs to run tools (``/usr``, ``/bin``,
``/lib``, the Python that runs pytest) read-only, a minimal ``/etc`` (no ``shadow``, no keys),
a private ``/tmp``, ``/dev`` and ``/proc`` (its own PID namespace: the host's processes are not
there), its workdir, and nothing else: not ``$HOME``, not the project checkout, not other items'
workdirs (an MCP server also sees its own program's install prefix, read-only:
:mod:`.programs`). It has no network (a fresh network namespace) and no capabilities. Always,
bwrap or not: an environment built from an allowlist (never a credential), rlimits on CPU time,
address space, file size and core dumps, a cap on the number of processes, a bound on what the
workdir may hold (size and entries: the command is killed past it), a wall-clock timeout that
kills the whole process group, and output read with a size cap.

Where bwrap does not work, mode ``"auto"`` and ``"required"`` refuse to run commands; the
refusal (:func:`bwrap_problem`) is worded as a set-up problem: what is missing or broken, and
the command that installs it. Mode ``"off"`` is the explicit opt-out: commands
run with those limits only, this process is made non-dumpable so that a command cannot read
its environment through ``/proc``, and a command run as root drops every capability.

RLIMIT_NPROC does not bind root (the kernel exempts uid 0, inside bwrap's user namespace too),
so when running as root the process cap is a pids cgroup made for each command instead; where
none can be made, :attr:`Sandbox.process_limit` is ``"none"``.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import dataclasses
import functools
import glob
import itertools
import os
import resource
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

#: The PATH commands see; nothing of the caller's own PATH leaks in.
CLEAN_PATH = "/usr/local/bin:/usr/bin:/bin"
FALLBACK_NOTICE = (
    "sandbox: off: run_command runs without bubblewrap, with rlimits and a scrubbed environment "
    "only (it can read what this user can read on the host)"
)
#: What installs bubblewrap (Debian and Ubuntu): tools/debian-packages.sh, which `make eval`
#: and `make test` run, installs the same package.
INSTALL_BWRAP = "sudo apt-get install -y bubblewrap"
_OPT_OUT = (
    "or opt out with 'sandbox: off' in the eval file (commands then run unconfined, with limits "
    "and a scrubbed environment only)"
)
_PROBE_SAID = 200  # characters of a failed probe's stderr kept in the refusal
MODES = ("auto", "required", "off")
#: System directories a command may read (and run tools from); the ones that exist are bound.
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
#: What of /etc a command sees: what tools and the dynamic linker read, no secrets.
ETC_ENTRIES = (
    "alternatives", "debian_version", "group", "host.conf", "hosts", "ld.so.cache",
    "ld.so.conf", "ld.so.conf.d", "locale.alias", "localtime", "magic", "magic.mime",
    "mime.types", "nsswitch.conf", "os-release", "passwd", "protocols", "services", "timezone",
)  # fmt: skip
_ETC_GLOBS = ("/etc/python3*",)  # Debian's python3 reads its sitecustomize from there
#: What of /etc a process with the network (an MCP server's ``network: true``) also sees, to
#: resolve names and check certificates; public, unlike /etc/ssl/private beside them.
NETWORK_ETC = ("/etc/resolv.conf", "/etc/gai.conf", "/etc/ssl/certs", "/etc/ca-certificates")
_MB = 1024 * 1024
_CHUNK = 65536
_PROBE_TIMEOUT_S = 10.0
# Readers of a pipe still held open by a process that escaped the group are abandoned after this.
_READER_JOIN_S = 2.0
_CGROUP_REMOVE_TRIES = 100
#: How often a running command's workdir is measured against the disk limits: every 20 ms
#: while measuring is cheap, less often (up to 0.5 s) as the workdir grows.
_DISK_POLL_S = 0.02
_DISK_POLL_MAX_S = 0.5


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


class SandboxUnavailable(RuntimeError):
    """Mode ``"required"`` and bubblewrap does not work here (a set-up problem)."""


# --- bubblewrap detection -------------------------------------------------------------------


def bwrap_path() -> str | None:
    """The bwrap executable when it exists and works here (probed once), else None."""
    path = shutil.which("bwrap")
    return path if bwrap_problem(path) is None else None


def bwrap_problem(path: str | None) -> str | None:
    """Why commands cannot run under the bwrap found at ``path`` (None: not on PATH), worded
    as a set-up problem with the command that fixes it; None when it works."""
    if path is None:
        return (
            "bubblewrap is not installed (no bwrap on PATH), and agent commands run under it: "
            f"install it with `{INSTALL_BWRAP}` (`make eval` and `make test` do), {_OPT_OUT}"
        )
    failure = _bwrap_failure(path, sized_tmp=False)
    if failure is None:
        return None
    return (
        f"bubblewrap ({path}) cannot run here ({failure}), and agent commands run under it: "
        "it needs unprivileged user namespaces, which this machine or container may not allow; "
        f"install or repair it with `{INSTALL_BWRAP}`, {_OPT_OUT}"
    )


def _bwrap_works(path: str, sized_tmp: bool) -> bool:
    return _bwrap_failure(path, sized_tmp) is None


@functools.cache
def _bwrap_failure(path: str, sized_tmp: bool) -> str | None:
    """What went wrong when ``path`` ran a trivial command (probed once), or None."""
    # bwrap can exist yet fail: user namespaces disabled, or a bwrap without some option.
    with tempfile.TemporaryDirectory(prefix="llmbench-bwrap-probe-") as tmp:
        view = View(writable=(Path(tmp),), cwd=Path(tmp))
        argv = _bwrap_argv(path, view, SandboxLimits(), "true", sized_tmp)
        try:
            done = subprocess.run(argv, capture_output=True, timeout=_PROBE_TIMEOUT_S, check=False)
        except subprocess.TimeoutExpired:
            return f"it did not finish within {_PROBE_TIMEOUT_S:g} s"
        except (OSError, subprocess.SubprocessError) as exc:
            return f"{type(exc).__name__}: {exc}"
    if done.returncode == 0:
        return None
    said = done.stderr.decode("utf-8", errors="replace").strip().splitlines()
    return f"exit status {done.returncode}" + (f": {said[-1][:_PROBE_SAID]}" if said else "")


@dataclass(frozen=True)
class View:
    """What of the host a command sees besides the system: folders it may write and read."""

    writable: tuple[Path, ...] = ()
    read_only: tuple[Path, ...] = ()
    hidden: tuple[Path, ...] = ()  #: files inside those folders it must not read
    cwd: Path = Path("/")
    #: a server's install prefixes (``agent.programs``), read-only, mounted with the Python
    programs: tuple[Path, ...] = ()
    #: symlinks made again at the same place (``path``, ``target``): a server's way to its program
    links: tuple[tuple[Path, Path], ...] = ()


def _bind(path: str) -> list[str]:
    """Mount ``path`` read-only at the same place; a symlink stays a symlink (merged /usr)."""
    if os.path.islink(path):
        return ["--symlink", os.readlink(path), path]
    return ["--ro-bind", path, path] if os.path.exists(path) else []


@functools.cache
def _empty_file() -> Path:
    """An empty, read-only file of this process, mounted over files a command must not read."""
    fd, name = tempfile.mkstemp(prefix="llmbench-hidden-")
    os.close(fd)
    os.chmod(name, 0o444)
    atexit.register(_remove_quietly, name)
    return Path(name)


def _remove_quietly(name: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(name)


@functools.cache
def _python_dirs() -> tuple[str, ...]:
    """The folders of the Python that runs pytest and of its virtualenv (outside the system
    directories), for the ``python3`` first on a command's PATH."""
    prefixes = (sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix)
    found = [os.path.realpath(prefix) for prefix in prefixes]
    # This plugin's own source too: pytest (in a `command` check, say) loads it by its entry
    # point, and an editable install keeps it in the checkout, which is not mounted.
    for package in _plugin_sources():
        if not any(package.startswith(prefix + "/") for prefix in found):
            found.append(package)
    outside = [p for p in found if not any(p == d or p.startswith(d + "/") for d in SYSTEM_DIRS)]
    return tuple(dict.fromkeys(outside))


def _plugin_sources() -> list[str]:
    """Where this package's source is: the one running, and an editable install's."""
    import importlib.metadata
    import json

    sources = [str(Path(__file__).resolve().parents[1])]
    try:
        direct = importlib.metadata.distribution("pytest-llmbench").read_text("direct_url.json")
        url = json.loads(direct or "{}").get("url", "")
    except (importlib.metadata.PackageNotFoundError, ValueError, AttributeError):
        url = ""
    if url.startswith("file://"):
        editable = Path(url.removeprefix("file://")) / "pytest_llmbench"
        if editable.is_dir():
            sources.append(str(editable.resolve()))
    return sources


def shown_folders() -> tuple[str, ...]:
    """The folders of the host every command sees (read-only): the system directories there
    are, and the Python's (:func:`_python_dirs`)."""
    system = [folder for folder in SYSTEM_DIRS if os.path.lexists(folder)]
    return (*system, *_python_dirs())


def system_view() -> list[str]:
    """bwrap arguments for the read-only system: tools, libraries and a minimal /etc (the
    Python's folders are bound after /tmp, which may hold them)."""
    args: list[str] = []
    for folder in SYSTEM_DIRS:
        args += _bind(folder)
    args += ["--dir", "/etc"]
    entries = [f"/etc/{name}" for name in ETC_ENTRIES]
    entries += sorted(path for pattern in _ETC_GLOBS for path in glob.glob(pattern))
    for entry in entries:
        args += _bind(entry)
    return args


def _bwrap_argv(
    bwrap: str,
    view: View,
    limits: SandboxLimits,
    command: str,
    sized_tmp: bool,
    share_net: bool = False,
) -> list[str]:
    # --size (bubblewrap >= 0.8) keeps a command from filling memory through the private /tmp
    size = ["--size", str(limits.memory_mb * _MB)] if sized_tmp else []
    programs = [*_python_dirs(), *(str(p) for p in view.programs)]
    python = [arg for prefix in programs for arg in ("--ro-bind", prefix, prefix)]
    python += [arg for path, to in view.links for arg in ("--symlink", str(to), str(path))]
    binds: list[str] = []
    for folder in view.writable:
        binds += ["--bind", str(folder), str(folder)]
    for folder in view.read_only:
        binds += ["--ro-bind", str(folder), str(folder)]
    for secret in view.hidden:  # an empty file over it (bwrap mounts /dev/null nodev)
        binds += ["--ro-bind", str(_empty_file()), str(secret)]
    # the files themselves, symlinks followed (resolv.conf may point into an unshown /run)
    network = [a for f in NETWORK_ETC if os.path.exists(f) for a in ("--ro-bind", f, f)]
    return [
        bwrap,
        *system_view(),
        *(network if share_net else ()),
        *("--dev", "/dev", "--proc", "/proc"),
        *size,
        # /tmp first: the Python and a workdir under /tmp are bound over the private /tmp
        *("--tmpfs", "/tmp", *python, *binds, "--chdir", str(view.cwd)),
        # the new root (with /etc and the mount points bwrap made) read-only; the mounts on it
        # keep their own modes
        *("--remount-ro", "/"),
        *("--unshare-all", "--die-with-parent", "--new-session"),
        *(("--share-net",) if share_net else ()),
        # run as root, bwrap keeps every capability in the sandbox, and CAP_SYS_ADMIN could
        # remount the read-only root writable
        *("--cap-drop", "ALL"),
        *("/bin/sh", "-c", command),
    ]


#: A server's address space (RLIMIT_AS) as a multiple of ``memory_mb``: runtimes reserve far
#: more address space than they use, and Node 20 reserves over 1 GB at start (for some 70 MB
#: resident), so a Node server could not start under a command's limit.
SERVER_ADDRESS_SPACE_FACTOR = 4
#: Variables a launcher may add to a server's environment (the MCP SDK's defaults on POSIX).
_LAUNCHER_VARS = ("HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER")


def _prlimit_argv(limits: SandboxLimits) -> list[str]:
    """``prlimit`` setting a long-lived process's rlimits (it cannot take a ``preexec_fn``);
    RLIMIT_NPROC too where it binds (not root: :meth:`Sandbox.server_cap` caps root's)."""
    nproc = [f"--nproc={_nproc_budget(limits.max_processes)}"] if os.getuid() != 0 else []
    return [
        "prlimit",
        f"--cpu={limits.cpu_s}",
        f"--as={limits.memory_mb * SERVER_ADDRESS_SPACE_FACTOR * _MB}",
        f"--fsize={limits.max_file_mb * _MB}",
        "--core=0",
        *nproc,
        "--",
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


_PR_SET_DUMPABLE = 4
_PR_CAPBSET_DROP = 24
_PR_SET_NO_NEW_PRIVS = 38


@functools.cache
def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


@functools.cache
def _last_capability() -> int:
    try:
        return int(Path("/proc/sys/kernel/cap_last_cap").read_text())
    except (OSError, ValueError):
        return 63  # the kernel refuses numbers past its last: harmless


@functools.cache
def protect_this_process() -> bool:
    """Make this process non-dumpable: its ``/proc/PID/environ``, ``mem`` and the like are then
    closed to its commands (to any process without CAP_SYS_PTRACE). Once; True when done."""
    return int(_libc().prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)) == 0


def _child_setup(
    rlimits: list[tuple[int, int]], cgroup_fd: int | None, drop_capabilities: bool
) -> Callable[[], None]:
    prctl, last = _libc().prctl, _last_capability()
    # Built here, in the parent: once the address-space limit is set, the child (a fork of a
    # process far larger than the limit) can map no new memory, and an allocation then (a
    # tuple, a ctypes argument) fails the start under load. So the limits are set last, the
    # address space's after every other, with nothing left to allocate.
    pairs = sorted(
        ((which, (value, value)) for which, value in rlimits),
        key=lambda pair: pair[0] == resource.RLIMIT_AS,
    )

    def setup() -> None:  # runs in the child between fork and exec: system calls only
        if cgroup_fd is not None:
            os.write(cgroup_fd, b"0")  # "0" moves the writing process
        if drop_capabilities:
            # root without bwrap: an empty bounding set leaves the exec'd shell no capability
            # (no CAP_SYS_PTRACE to read this process's /proc entries, no CAP_DAC_OVERRIDE)
            for capability in range(last + 1):
                prctl(_PR_CAPBSET_DROP, capability, 0, 0, 0)
            prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
        for which, limit in pairs:
            resource.setrlimit(which, limit)

    return setup


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
                if used > limits.max_disk_mb * _MB:
                    return f"the workdir holds more than {limits.max_disk_mb} MB"
                if entry.is_dir(follow_symlinks=False):
                    stack.append(entry.path)
    return None


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
        self._waiter: threading.Thread | None = None

    def kill(self) -> None:
        with self._lock:
            if not self._reaped:
                _kill_quietly(os.killpg, self._proc.pid)

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


def _shell_exit_code(returncode: int) -> int:
    # a shell reports death by signal N as 128 + N, and so does bwrap; match it without bwrap
    return 128 - returncode if returncode < 0 else returncode


class Sandbox:
    """Runs shell commands for one agent in ``workdir``, confined and limited.

    ``mode``: ``"auto"`` and ``"required"`` run commands under bwrap; where it does not work,
    ``"required"`` raises :class:`SandboxUnavailable` at once and ``"auto"`` refuses each command
    (:attr:`refusal` says why, for callers that fail the item up front). ``"off"`` runs them
    with the limits only (see the module). ``path_prefix`` puts directories (say, a
    virtualenv's ``bin``) before :data:`CLEAN_PATH`. ``writable=False`` mounts the workdir
    read-only; ``read_only`` folders are visible too, ``hidden`` files inside them are not;
    ``cwd`` is where commands start (the workdir by default).
    """

    def __init__(
        self,
        workdir: Path,
        limits: SandboxLimits,
        mode: str = "auto",
        *,
        path_prefix: Sequence[Path] = (),
        writable: bool = True,
        read_only: Sequence[Path] = (),
        hidden: Sequence[Path] = (),
        cwd: Path | None = None,
    ) -> None:
        if mode not in MODES:
            raise ValueError(f"sandbox mode must be one of {', '.join(MODES)}, got {mode!r}")
        self.workdir = Path(workdir).resolve()
        self.limits = limits
        self.mode = mode
        self.writable = writable
        self._path = ":".join([*(str(p) for p in path_prefix), CLEAN_PATH])
        self.path_prefix = tuple(Path(p) for p in path_prefix)
        mounted = (self.workdir,) if writable else ()
        self.view = View(
            writable=mounted,
            read_only=tuple(
                Path(p).resolve() for p in [*read_only, *(() if writable else [workdir])]
            ),
            hidden=tuple(Path(p) for p in hidden),
            cwd=Path(cwd).resolve() if cwd is not None else self.workdir,
        )
        found = None if mode == "off" else shutil.which("bwrap")
        #: why commands are refused (bwrap does not work and the mode does not opt out): a
        #: set-up problem, with the command that fixes it
        self.refusal = None if mode == "off" else bwrap_problem(found)
        self._bwrap = found if self.refusal is None else None
        if self.refusal is not None and mode == "required":
            raise SandboxUnavailable(f"sandbox: required, but {self.refusal}")
        if mode == "off":
            _NOTICE.arm()
        parent = _pids_cgroup_parent()
        self._cgroup_parent = parent
        #: how the process cap is enforced: "cgroup", "rlimit", or "none" (root without cgroups)
        self.process_limit = "cgroup" if parent else ("rlimit" if os.getuid() != 0 else "none")

    @property
    def search_path(self) -> str:
        """The PATH its commands get: the ``path_prefix`` folders, then :data:`CLEAN_PATH`."""
        return self._path

    @property
    def sandboxed(self) -> bool:
        """Whether commands run under bwrap."""
        return self._bwrap is not None

    def run(self, command: str) -> CommandResult:
        """Run ``command`` with ``/bin/sh -c``; blocks (callers use ``asyncio.to_thread``)."""
        if self.refusal is not None:
            return self._failure(self.refusal)
        if not self.workdir.is_dir():
            return self._failure(f"workdir {self.workdir} is not a directory")
        full = self.writable and disk_overrun(self.workdir, self.limits)
        if full:
            return self._failure(f"{full}: remove files before running commands", full)
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
        return _bwrap_argv(self._bwrap, self.view, self.limits, command, sized)

    def server_process(
        self,
        argv: Sequence[str],
        env: Mapping[str, str],
        *,
        network: bool = False,
        cwd: Path | None = None,
        programs: Sequence[Path] = (),
        links: Sequence[tuple[Path, Path]] = (),
        path: Sequence[Path] = (),
    ) -> tuple[list[str], dict[str, str]]:
        """The argv and environment that start a long-lived process (an MCP server) confined
        as commands are: under bwrap (with the host's network only when ``network``), the CPU,
        file-size and core rlimits, the address space's times
        :data:`SERVER_ADDRESS_SPACE_FACTOR`, an environment of the clean variables and ``env``.
        It starts in ``cwd`` (a folder the sandbox sees; default: where commands start); the
        caller starts it there too, for the unconfined mode. ``programs`` (its install
        prefixes) are shown read-only, ``links`` (``path``, ``target``) made again, and
        ``path`` goes first on its PATH (``agent.programs`` says which).

        The caller starts and stops it (a process group of its own). Variables a launcher adds
        to the environment it is given (the MCP SDK adds ``LOGNAME``, ``SHELL``, ``TERM`` and
        ``USER``) are unset before ``argv`` runs, unless ``env`` names them. Raises
        :class:`SandboxUnavailable` where bwrap does not work and the mode is not ``"off"``.
        """
        if self.refusal is not None:
            raise SandboxUnavailable(self.refusal)
        clean = {**self._env(), **env}
        if path and "PATH" not in env:
            clean["PATH"] = ":".join([*(str(p) for p in path), self._path])
        stray = sorted(set(_LAUNCHER_VARS) - set(clean))
        command = f"unset {' '.join(stray)}; " if stray else ""
        command += "exec " + shlex.join([*_prlimit_argv(self.limits), *argv])
        if self._bwrap is None:
            protect_this_process()  # the server must not read our environ through /proc
            return ["/bin/sh", "-c", command], clean
        sized = _bwrap_works(self._bwrap, sized_tmp=True)
        view = dataclasses.replace(
            self.view,
            cwd=self.view.cwd if cwd is None else cwd,
            programs=tuple(programs),
            links=tuple(links),
        )
        confined = _bwrap_argv(self._bwrap, view, self.limits, command, sized, network)
        return confined, clean

    def elsewhere(self, workdir: Path) -> Sandbox:
        """A sandbox of this one's mode, limits and PATH on another ``workdir`` (a shared MCP
        server's scratch folder)."""
        return Sandbox(workdir, self.limits, self.mode, path_prefix=self.path_prefix)

    @contextlib.contextmanager
    def server_cap(self) -> Iterator[list[str]]:
        """The argv prefix that puts a long-lived process (an MCP server) in a pids cgroup of
        its own, capped at ``max_processes`` as commands are, when running as root with
        cgroups; ``[]`` elsewhere (RLIMIT_NPROC then, through ``prlimit``). The cgroup is
        removed on the way out, what is left in it killed."""
        cgroup = self._make_cgroup()
        if cgroup is None:
            yield []
            return
        procs = shlex.quote(str(cgroup.path / "cgroup.procs"))
        try:
            yield ["/bin/sh", "-c", f'echo $$ > {procs} && exec "$@"', "sh"]
        finally:
            cgroup.remove()

    def _env(self) -> dict[str, str]:
        home = self.workdir if self.writable else Path("/tmp")
        return {"PATH": self._path, "HOME": str(home), "LANG": "C.UTF-8"}

    def _run_in(self, command: str, cgroup: _PidsCgroup | None) -> CommandResult:
        unconfined = self._bwrap is None
        if unconfined:
            protect_this_process()  # before the fork: the child must not read our environ
        setup = _child_setup(
            _rlimits(self.limits),
            cgroup.procs_fd if cgroup else None,
            drop_capabilities=unconfined and os.geteuid() == 0,
        )
        started = time.monotonic()
        try:
            proc = subprocess.Popen(
                self._argv(command),
                cwd=self.view.cwd,
                env=self._env(),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
                preexec_fn=setup,  # runs before the fds are closed, so it can join the cgroup
            )
        except (OSError, ValueError, subprocess.SubprocessError) as exc:  # ValueError: a NUL
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
        timed_out, overrun = self._watch(group, started)
        group.kill()  # the timed-out command, or background jobs it left behind
        returncode = group.reap()
        for reader in readers:
            reader.join(_READER_JOIN_S)
        out, err = readers
        if overrun is None and self.writable:
            overrun = disk_overrun(self.workdir, self.limits)  # written in the last moments
        return CommandResult(
            exit_code=None if timed_out else _shell_exit_code(returncode),
            stdout=out.text(),
            stderr=err.text(),
            timed_out=timed_out,
            truncated=out.overflowed or err.overflowed,
            sandboxed=self.sandboxed,
            duration_s=time.monotonic() - started,
            disk_limit_hit=overrun,
        )

    def _watch(self, group: _Group, started: float) -> tuple[bool, str | None]:
        """Wait for the command; (timed out, the disk limit it passed) when it was stopped."""
        deadline = started + self.limits.timeout_s
        poll_s = _DISK_POLL_S
        while not group.exited_within(min(poll_s, deadline - time.monotonic())):
            if time.monotonic() >= deadline:
                return True, None
            if not self.writable:
                continue
            measured = time.monotonic()
            overrun = disk_overrun(self.workdir, self.limits)
            if overrun is not None:
                return False, overrun
            # Often while measuring is cheap; a big workdir is measured less often (at most
            # a fifth of the time goes to it).
            poll_s = min(_DISK_POLL_MAX_S, max(_DISK_POLL_S, 4 * (time.monotonic() - measured)))
        return False, None

    def _failure(self, error: str, overrun: str | None = None) -> CommandResult:
        return CommandResult(
            None, "", "", False, False, self.sandboxed, 0.0, error=error, disk_limit_hit=overrun
        )
