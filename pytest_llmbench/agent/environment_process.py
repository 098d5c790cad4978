"""An environment module's runner as the parent drives it: started confined, spoken to in JSON
lines, bounded in time, stopped; and the toolbox that puts its tools beside the file's others.

:class:`EnvironmentProcess` starts :mod:`.environment_runner` as a stdio MCP server is started
(:func:`.mcp_launch.server_process` and :func:`.mcp_launch.server_cap`: bubblewrap, rlimits, a
clean environment, a pids cgroup where there is one; unconfined as root, no capability), in the workdir, the module's folder shown
read-only (its ``.env`` files hidden). Its failures are :class:`~..models.EnvError`: a module
that cannot be imported or has no tools (the handshake says why), a state the runner refused
(a value JSON cannot hold, a corrupted file), a runner that died or outlasted its timeout.
:class:`EnvironmentToolbox` is what the agent loop calls: the environment's tools, then the
item's other tools (built-ins, ``module:function``, MCP), one name each.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..models import EnvError, SandboxError
from .limits import disk_overrun
from .mcp_io import StderrTail
from .mcp_launch import server_cap, server_process
from .sandbox import Sandbox, SandboxUnavailable
from .tools import ERROR_PREFIX

#: The runner, run as a script by this Python.
RUNNER = Path(__file__).with_name("environment_runner.py")
#: Seconds a call may take (an MCP server's ``tool_timeout_s`` default), and the start.
TOOL_TIMEOUT_S = 30.0
STARTUP_TIMEOUT_S = 30.0
_LINE_LIMIT = 8 * 1024 * 1024  # bytes of one answer line
_STOP_WAIT_S = 2.0  # for a runner whose stdin closed, before it is killed


class EnvironmentProcess:
    """One running environment: its tools' schemas, and :meth:`call`."""

    def __init__(self, label: str, process: asyncio.subprocess.Process, errlog: StderrTail):
        self.label = label  #: how errors name the environment (its module's file name)
        self._process = process
        self._errlog = errlog
        self._lock = asyncio.Lock()
        self.schemas: list[dict[str, Any]] = []
        #: why it cannot serve any more (a fatal answer, a death, a timeout), once it cannot
        self.broken: str | None = None

    @property
    def names(self) -> list[str]:
        """Its tools' names, in the module's order."""
        return [schema["function"]["name"] for schema in self.schemas]

    async def handshake(self, timeout_s: float) -> None:
        """Read the tools the runner found, or why it could not (the item's error)."""
        message = await self._read("start", timeout_s)
        tools = message.get("tools")
        if not isinstance(tools, list):
            raise self._fail(f"answered {str(message)[:200]} in place of its tools")
        self.schemas = tools

    async def seed(self, seed: Any, timeout_s: float) -> None:
        """Have a runner started with ``--seed`` write ``seed`` as the state file."""
        assert self._process.stdin is not None
        try:
            self._process.stdin.write(json.dumps({"seed": seed}).encode() + b"\n")
            await self._process.stdin.drain()
        except (ConnectionError, OSError):
            raise self._fail("exited before it was given the seed") from None
        message = await self._read("the seeding", timeout_s)
        if message.get("seeded") is not True:
            raise self._fail(f"answered {str(message)[:200]} in place of the seeding's end")

    async def call(self, name: str, arguments: Mapping[str, Any], timeout_s: float) -> str:
        """What the model reads of the call: the result, or ``error: ...`` when the tool
        raised; EnvError when the environment failed."""
        message = await self.answer(name, arguments, timeout_s)
        if "error" in message:
            return f"{ERROR_PREFIX}{message['error']}"
        return str(message.get("result", ""))

    async def answer(
        self, name: str, arguments: Mapping[str, Any], timeout_s: float
    ) -> dict[str, Any]:
        """The runner's answer to the call: ``{"result": text}``, or ``{"error": text}`` when
        the tool raised; EnvError when the environment failed."""
        async with self._lock:
            if self.broken is not None:
                raise EnvError(f"{self.broken}; the call of {name} was not made")
            line = json.dumps({"name": name, "arguments": dict(arguments)}, ensure_ascii=False)
            assert self._process.stdin is not None
            try:
                self._process.stdin.write(line.encode() + b"\n")
                await self._process.stdin.drain()
            except (ConnectionError, OSError):
                raise self._fail(f"exited before the call of {name}") from None
            return await self._read(f"the call of {name}", timeout_s)

    async def _read(self, what: str, timeout_s: float) -> dict[str, Any]:
        assert self._process.stdout is not None
        try:
            raw = await asyncio.wait_for(self._process.stdout.readline(), timeout_s)
        except asyncio.TimeoutError:
            raise self._fail(f"{what} did not finish within {timeout_s:g} s") from None
        except (ValueError, asyncio.LimitOverrunError):
            raise self._fail(f"{what}: an answer longer than {_LINE_LIMIT} bytes") from None
        if not raw:
            await _reaped(self._process)
            code = self._process.returncode
            raise self._fail(f"exited (status {code}) during {what}{self._errlog.cause()}")
        try:
            message = json.loads(raw)
        except ValueError:
            raise self._fail(f"answered what is not JSON during {what}: {raw[:200]!r}") from None
        if not isinstance(message, dict):
            raise self._fail(f"answered {raw[:200]!r} during {what}")
        if "fatal" in message:
            raise self._fail(str(message["fatal"]), prefixed=False)
        return message

    def _fail(self, why: str, prefixed: bool = True) -> EnvError:
        said = f"environment {self.label}: {'its runner ' if prefixed else ''}{why}"
        self.broken = said
        return EnvError(said)

    async def stop(self) -> None:
        """Close its stdin, give it a moment, then kill its process group."""
        with contextlib.suppress(OSError, RuntimeError):
            if self._process.stdin is not None:
                self._process.stdin.close()
        try:
            await asyncio.wait_for(self._process.wait(), _STOP_WAIT_S)
        except asyncio.TimeoutError:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self._process.pid, signal.SIGKILL)
            await self._process.wait()
        finally:  # cancelled while waiting: it goes all the same
            if self._process.returncode is None:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(self._process.pid, signal.SIGKILL)


async def _reaped(process: asyncio.subprocess.Process) -> None:
    with contextlib.suppress(asyncio.TimeoutError):
        await asyncio.wait_for(process.wait(), _STOP_WAIT_S)


def runner_sandbox(sandbox: Sandbox, module: Path) -> Sandbox:
    """``sandbox`` on the same workdir, mode, limits and PATH, with the ``.env`` files beside
    ``module`` hidden (its folder is shown read-only by :func:`start_environment`)."""
    from .post import env_files

    return Sandbox(
        sandbox.workdir,
        sandbox.limits,
        sandbox.mode,
        path_prefix=sandbox.path_prefix,
        hidden=env_files(module.parent, ()),
    )


@contextlib.asynccontextmanager
async def start_environment(
    module: Path,
    state_file: str,
    names: Sequence[str],
    sandbox: Sandbox,
    timeout_s: float = STARTUP_TIMEOUT_S,
) -> AsyncIterator[EnvironmentProcess]:
    """The runner of ``module`` serving the tools ``names`` (those collection read in its
    source) on ``state_file`` (relative to the sandbox's workdir), started confined and past
    its handshake; stopped, with what it started, on the way out."""
    confined = runner_sandbox(sandbox, module)
    # The module's folder as an install prefix is: bound before the workdir, so that a
    # workdir inside it stays writable.
    programs = (module.parent.resolve(),)
    arguments = [str(module), state_file, *names]
    async with _confined_runner(module.name, arguments, confined, programs) as running:
        await running.handshake(timeout_s)
        yield running


async def seed_confined(
    state_file: str, seed: Any, sandbox: Sandbox, timeout_s: float = STARTUP_TIMEOUT_S
) -> None:
    """Write a SQLite state file from ``seed`` (SQL text, or ``{table: [rows]}``) in a runner
    confined by ``sandbox``, in its workdir: the eval file's SQL never runs in this process."""
    async with _confined_runner(f"seed of {state_file}", ["--seed", state_file], sandbox) as run:
        await run.seed(seed, timeout_s)


@contextlib.asynccontextmanager
async def _confined_runner(
    label: str, arguments: Sequence[str], confined: Sandbox, programs: Sequence[Path] = ()
) -> AsyncIterator[EnvironmentProcess]:
    """:mod:`.environment_runner` started with ``arguments``, confined as an MCP server is, in
    the sandbox's workdir; stopped, with what it started, on the way out."""
    argv = [sys.executable, "-I", "-B", str(RUNNER), *arguments]
    try:
        argv, env = server_process(confined, argv, {}, cwd=confined.workdir, programs=programs)
    except SandboxUnavailable as exc:
        raise SandboxError(f"environment {label} cannot start: {exc}") from None
    errlog = StderrTail()
    with server_cap(confined) as cap:
        try:
            process = await asyncio.create_subprocess_exec(
                *cap, *argv, env=env, cwd=confined.workdir, stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE, stderr=errlog.writer, start_new_session=True,
                limit=_LINE_LIMIT,
            )  # fmt: skip
        except OSError as exc:
            raise EnvError(f"environment {label} cannot start: {exc}") from None
        finally:
            errlog.started()
        running = EnvironmentProcess(label, process, errlog)
        try:
            yield running
        finally:
            await running.stop()


class EnvironmentToolbox:
    """The environment's tools and the item's other tools (``inner``), called through one
    :meth:`acall`; a name both have is an error."""

    def __init__(
        self, running: EnvironmentProcess, inner: Any, sandbox: Sandbox, timeout_s: float
    ) -> None:
        self._running = running
        self._inner = inner
        self._sandbox = sandbox
        self._timeout_s = timeout_s
        self._own = set(running.names)
        clash = sorted(self._own & set(_names(inner)))
        if clash:
            raise EnvError(
                f"environment {running.label}: its tool {clash[0]!r} has the name of another "
                "tool of the file (a built-in, a module:function or an MCP tool)"
            )

    @property
    def names(self) -> list[str]:
        """The names the model sees: the environment's, then the others'."""
        return [*self._running.names, *_names(self._inner)]

    def schemas(self) -> list[dict[str, Any]]:
        """Every tool in the OpenAI function-tool format."""
        return [*self._running.schemas, *self._inner.schemas()]

    def recorded_name(self, name: str) -> str:
        """An environment tool by its own name; the others as ``inner`` records them."""
        if name not in self._own and hasattr(self._inner, "recorded_name"):
            return str(self._inner.recorded_name(name))
        return name

    async def acall(self, name: str, arguments: Mapping[str, Any]) -> str:
        """An environment tool in its runner; another tool as ``inner`` runs it."""
        if name in self._own:
            result = await self._running.call(name, arguments, self._timeout_s)
            box = self._sandbox
            overrun = await asyncio.to_thread(disk_overrun, box.workdir, box.limits)
            if overrun is not None:
                raise EnvError(f"environment {self._running.label}: the call of {name}: "
                               f"{overrun}, the sandbox's limit")  # fmt: skip
            return result
        from .loop import call_tool

        return await call_tool(self._inner, name, dict(arguments))


def _names(toolbox: Any) -> Sequence[str]:
    """A toolbox's tool names: its ``names``, else those of its schemas."""
    names = getattr(toolbox, "names", None)
    if names is not None:
        return list(names)
    return [schema["function"]["name"] for schema in toolbox.schemas()]
