"""Run one shell command for an agent, confined.

:class:`Sandbox` runs ``/bin/sh -c command`` in an item's workdir. Under bubblewrap a command
sees a filesystem of its own and no network (:mod:`.bwrap` builds that command line). Always,
bwrap or not: an environment built from an allowlist (never a credential), rlimits on CPU time,
address space, file size and core dumps, a cap on the number of processes (:mod:`.limits`,
:mod:`.process_cap`), a bound on what the workdir may hold (size and entries: the command is
killed past it), a wall-clock timeout that kills the whole process group, and output read with a
size cap (:mod:`.process`). An MCP server is started the same way (:mod:`.mcp_launch`).

Where bwrap does not work, mode ``"auto"`` and ``"required"`` refuse to run commands; the
refusal (:func:`.bwrap.bwrap_problem`) is worded as a set-up problem: what is missing or broken,
and the command that installs it. Mode ``"off"`` is the explicit opt-out: commands
run with those limits only, this process is made non-dumpable so that a command cannot read
its environment through ``/proc``, and a command run as root drops every capability.

As root, where no pids cgroup can be made, :attr:`Sandbox.process_limit` is ``"none"``.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .bwrap import (
    View,
    bwrap_argv,
    bwrap_problem,
)
from .capabilities import must_drop
from .limits import (
    SandboxLimits,
    child_setup,
    disk_overrun,
    protect_this_process,
    rlimits,
)
from .process import CommandResult, command_slot, not_run, run_captured
from .process_cap import PidsCgroup, pids_cgroup_parent
from .tool_spans import span_notes, timed

# What other modules import from here.
__all__ = [
    "CLEAN_PATH",
    "FALLBACK_NOTICE",
    "MODES",
    "Sandbox",
    "SandboxUnavailable",
    "fallback_notice",
]

#: The PATH commands see; nothing of the caller's own PATH leaks in.
CLEAN_PATH = "/usr/local/bin:/usr/bin:/bin"
FALLBACK_NOTICE = (
    "sandbox: off: run_command runs without bubblewrap, with rlimits and a scrubbed environment "
    "only (it can read what this user can read on the host)"
)
MODES = ("auto", "required", "off")


class SandboxUnavailable(RuntimeError):
    """Mode ``"required"`` and bubblewrap does not work here (a set-up problem)."""


# --- the once-per-process fallback notice -------------------------------------------------------


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


def fallback_notice() -> str | None:
    """The one-line fallback notice, the first time after a sandbox fell back; else None."""
    return _NOTICE.take()


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
        parent = pids_cgroup_parent()
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
        """Run ``command`` with ``/bin/sh -c``; blocks (callers use ``asyncio.to_thread``).
        Timed as a ``sandbox`` span when the run exports a trace (:mod:`.tool_spans`)."""
        with timed("sandbox", program_of(command), {}) as span:
            result = self._run(command)
            if span is not None:
                _describe_command(span, command, result)
        return result

    def _run(self, command: str) -> CommandResult:
        if self.refusal is not None:
            return self._failure(self.refusal)
        if not self.workdir.is_dir():
            return self._failure(f"workdir {self.workdir} is not a directory")
        full = self.writable and disk_overrun(self.workdir, self.limits)
        if full:
            return self._failure(f"{full}: remove files before running commands", full)
        with command_slot():
            try:
                cgroup = self.process_cgroup()
            except OSError as exc:
                return self._failure(f"cannot make a pids cgroup: {exc}")
            try:
                return self._run_in(command, cgroup)
            finally:
                if cgroup is not None:
                    cgroup.remove()

    def process_cgroup(self) -> PidsCgroup | None:
        """A new pids cgroup capped at ``max_processes`` (the caller removes it), where the cap
        is one (:attr:`process_limit` ``"cgroup"``); else None."""
        if self._cgroup_parent is None:
            return None
        return PidsCgroup(self._cgroup_parent, self.limits.max_processes)

    def confine(self, command: str, view: View | None = None, share_net: bool = False) -> list[str]:
        """The argv that runs ``/bin/sh -c command`` as this sandbox does: under bwrap, seeing
        ``view`` (default: :attr:`view`) and the host's network only when ``share_net``; a
        plain shell in mode ``"off"``. The caller checks :attr:`refusal` first."""
        if self._bwrap is None:
            return ["/bin/sh", "-c", command]
        return bwrap_argv(self._bwrap, view or self.view, self.limits, command, share_net)

    def elsewhere(self, workdir: Path) -> Sandbox:
        """A sandbox of this one's mode, limits and PATH on another ``workdir`` (a shared MCP
        server's scratch folder)."""
        return Sandbox(workdir, self.limits, self.mode, path_prefix=self.path_prefix)

    def environment(self) -> dict[str, str]:
        """The whole environment its commands get: nothing of this process's."""
        home = self.workdir if self.writable else Path("/tmp")
        return {"PATH": self._path, "HOME": str(home), "LANG": "C.UTF-8"}

    def _run_in(self, command: str, cgroup: PidsCgroup | None) -> CommandResult:
        unconfined = self._bwrap is None
        if unconfined:
            protect_this_process()  # before the fork: the child must not read our environ
        setup = child_setup(
            rlimits(self.limits),
            cgroup.procs_fd if cgroup else None,
            drop_capabilities=must_drop(unconfined),
        )
        try:
            argv = self.confine(command)
        except OSError as exc:  # the empty file hidden files are covered with
            return self._failure(f"cannot start /bin/sh: {type(exc).__name__}: {exc}")
        result = run_captured(
            argv,
            cwd=self.view.cwd,
            env=self.environment(),
            setup=setup,
            timeout_s=self.limits.timeout_s,
            max_output_bytes=self.limits.max_output_bytes,
            overrun=self._overrun if self.writable else None,
            sandboxed=self.sandboxed,
        )
        hit = cgroup is not None and cgroup.limit_hit()
        return dataclasses.replace(result, process_limit_hit=hit)

    def _overrun(self) -> str | None:
        return disk_overrun(self.workdir, self.limits)

    def _failure(self, error: str, overrun: str | None = None) -> CommandResult:
        return not_run(error, self.sandboxed, overrun)


def program_of(command: str) -> str:
    """The program a shell command line starts, by its file name (``sh`` when none can be told);
    what a span names a command by. Its arguments and the ``NAME=value`` words and wrappers
    (``env``, ``sudo``...) before it are left out: they may hold data, keys included."""
    import shlex

    try:
        words = shlex.split(command)
    except ValueError:  # an unclosed quote: the shell will say so; the span names none
        words = command.split()
    for word in words:
        if _ASSIGNMENT.match(word) or word in _WRAPPERS or _SKIPPED.fullmatch(word):
            continue
        name = word.rpartition("/")[2]
        return name if _PROGRAM.fullmatch(name) else "sh"
    return "sh"


#: ``NAME=value`` before a command (an environment variable set for it).
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")
#: Words that run the next one: the program is that one.
_WRAPPERS = frozenset({"env", "sudo", "exec", "nohup", "time", "command", "nice", "timeout"})
#: A wrapper's option or duration (``-u``, ``5s``): not the program.
_SKIPPED = re.compile(r"-.*|\d+(\.\d+)?[smhd]?")
#: What a program's file name may look like on a span (anything else is named ``sh``).
_PROGRAM = re.compile(r"[A-Za-z0-9._+-]{1,64}")


def _describe_command(span: dict[str, Any], command: str, result: CommandResult) -> None:
    """A command's span: its program and exit code, why it did not finish; the whole
    command line only when the run's spans carry content."""
    span.update(program=program_of(command), exit_code=result.exit_code)
    span["timed_out"] = result.timed_out or None
    span["error"] = result.error or ("timed out" if result.timed_out else None)
    notes = span_notes()
    if notes is not None and notes.content:
        span["command"] = command
