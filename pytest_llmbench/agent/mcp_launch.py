"""Starting an MCP server, or connecting to one: its settings, its process, its transport.

A stdio server (``command``) runs in the item's sandbox as a command does
(:func:`server_process`): under bwrap, with the command rlimits (a larger address space), an
environment of the clean variables and its ``env:``, in a pids cgroup of its own where there is
one (:func:`server_cap`); its program is shown to the sandbox by its install prefix
(:mod:`.programs`). A ``url`` server is reached over streamable HTTP. ``${VAR}`` in ``env:`` and
``headers:`` is read from the environment when the server starts (:func:`resolve`), each value
noted so that it can be kept out of every message. The SDK (``mcp``) is imported when a server
starts, never before.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import shlex
import sys
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from ..models import ToolError
from .capabilities import dropped_argv, must_drop
from .limits import prlimit_argv, protect_this_process
from .mcp_io import HttpStatus, StderrTail, quiet_parse_errors
from .programs import Program, ProgramNotVisible, locate
from .sandbox import Sandbox, SandboxUnavailable

_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
_INTERPRETERS = ("python", "python3")
#: Variables a launcher may add to a server's environment (the MCP SDK's defaults on POSIX).
_LAUNCHER_VARS = ("HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER")


class McpServer(Protocol):
    """What a session needs of a server's settings (``spec.schema.McpServer``)."""

    @property
    def name(self) -> str: ...
    @property
    def command(self) -> str | None: ...  # a stdio server's executable, or None
    @property
    def args(self) -> Sequence[str]: ...
    @property
    def env(self) -> Sequence[tuple[str, str]]: ...  # values may hold ${VAR}
    @property
    def cwd(self) -> str | None: ...  # relative to the workdir
    @property
    def url(self) -> str | None: ...  # a streamable HTTP server's endpoint, or None
    @property
    def headers(self) -> Sequence[tuple[str, str]]: ...  # values may hold ${VAR}
    @property
    def network(self) -> bool: ...
    @property
    def tool_timeout_s(self) -> float: ...
    @property
    def startup_timeout_s(self) -> float: ...
    @property
    def shared(self) -> bool: ...  # one session per process (agent.mcp_pool)


class McpServerError(ToolError):
    """A server that could not serve the item: the item's error, of kind ``tool``."""

    def __init__(self, message: str) -> None:
        super().__init__(message)


def resolve(template: str, server: str, where: str, secrets: list[tuple[str, str]]) -> str:
    """``template`` with each ``${VAR}`` read from the environment (each value added to
    ``secrets`` with its name); McpServerError naming the variable, never a value, when it is
    not set."""

    def value(match: re.Match[str]) -> str:
        if match[1] not in os.environ:
            raise McpServerError(
                f"MCP server {server!r}: {where} uses ${{{match[1]}}}, which is not set"
            )
        secrets.append((os.environ[match[1]], match[1]))
        return os.environ[match[1]]

    return _VARIABLE.sub(value, template)


# --- a stdio server's process -------------------------------------------------------------------


def server_process(
    sandbox: Sandbox,
    argv: Sequence[str],
    env: Mapping[str, str],
    *,
    network: bool = False,
    cwd: Path | None = None,
    programs: Sequence[Path] = (),
    links: Sequence[tuple[Path, Path]] = (),
    path: Sequence[Path] = (),
) -> tuple[list[str], dict[str, str]]:
    """The argv and environment that start a long-lived process (an MCP server) confined by
    ``sandbox`` as its commands are: under bwrap (with the host's network only when
    ``network``), the CPU, file-size and core rlimits, the address space's times
    :data:`.limits.SERVER_ADDRESS_SPACE_FACTOR`, an environment of the clean variables and
    ``env``. It starts in ``cwd`` (a folder the sandbox sees; default: where commands start);
    the caller starts it there too, for the unconfined mode. ``programs`` (its install
    prefixes) are shown read-only, ``links`` (``path``, ``target``) made again, and ``path``
    goes first on its PATH (``agent.programs`` says which).

    The caller starts and stops it (a process group of its own). Variables a launcher adds
    to the environment it is given (the MCP SDK adds ``LOGNAME``, ``SHELL``, ``TERM`` and
    ``USER``) are unset before ``argv`` runs, unless ``env`` names them. Raises
    :class:`.sandbox.SandboxUnavailable` where bwrap does not work and the mode is not
    ``"off"``. Unconfined as root, it drops every capability before ``argv`` runs
    (:mod:`.capabilities`).
    """
    if sandbox.refusal is not None:
        raise SandboxUnavailable(sandbox.refusal)
    clean = {**sandbox.environment(), **env}
    if path and "PATH" not in env:
        clean["PATH"] = ":".join([*(str(p) for p in path), sandbox.search_path])
    stray = sorted(set(_LAUNCHER_VARS) - set(clean))
    command = f"unset {' '.join(stray)}; " if stray else ""
    command += "exec " + shlex.join([*prlimit_argv(sandbox.limits), *argv])
    if not sandbox.sandboxed:
        protect_this_process()  # the server must not read our environ through /proc
        shell = sandbox.confine(command)  # ...nor, as root, with CAP_SYS_PTRACE, read it anyway
        return (dropped_argv(shell) if must_drop(unconfined=True) else shell), clean
    view = dataclasses.replace(
        sandbox.view,
        cwd=sandbox.view.cwd if cwd is None else cwd,
        programs=tuple(programs),
        links=tuple(links),
    )
    return sandbox.confine(command, view, share_net=network), clean


@contextlib.contextmanager
def server_cap(sandbox: Sandbox) -> Iterator[list[str]]:
    """The argv prefix that puts a long-lived process (an MCP server) in a pids cgroup of
    its own, capped at ``max_processes`` as commands are, when running as root with
    cgroups; ``[]`` elsewhere (RLIMIT_NPROC then, through ``prlimit``). The cgroup is
    removed on the way out, what is left in it killed."""
    cgroup = sandbox.process_cgroup()
    if cgroup is None:
        yield []
        return
    procs = shlex.quote(str(cgroup.path / "cgroup.procs"))
    try:
        yield ["/bin/sh", "-c", f'echo $$ > {procs} && exec "$@"', "sh"]
    finally:
        cgroup.remove()


def server_program(server: McpServer, sandbox: Sandbox) -> Program:
    """The server's command as the sandbox runs it; an error naming it, what the sandbox shows
    and the shapes a command may take, when the sandbox cannot show it."""
    assert server.command is not None
    if server.command in _INTERPRETERS:
        return Program(sys.executable)
    try:
        return locate(server.command, sandbox)
    except ProgramNotVisible as exc:
        raise McpServerError(
            f"MCP server {server.name!r}: {exc.explained(server.command, sandbox)}"
        ) from None


# --- the transports -----------------------------------------------------------------------------


def stdio_transport(
    server: McpServer,
    program: Program,
    sandbox: Sandbox,
    errlog: StderrTail,
    secrets: list[tuple[str, str]],
    cap: Sequence[str],
) -> contextlib.AbstractAsyncContextManager[Any]:
    """The SDK's stdio client for ``server``, started confined (behind ``cap``)."""
    from mcp.client.stdio import StdioServerParameters, stdio_client

    quiet_parse_errors()
    env = {key: resolve(value, server.name, f"env {key}", secrets) for key, value in server.env}
    cwd = (sandbox.workdir / server.cwd).resolve() if server.cwd else sandbox.workdir
    try:
        argv, clean = server_process(
            sandbox,
            [program.command, *server.args],
            env,
            network=server.network,
            cwd=cwd,
            programs=program.mounts,
            links=[(link.path, link.target) for link in program.links],
            path=program.path,
        )
    except SandboxUnavailable as exc:
        raise McpServerError(f"MCP server {server.name!r} cannot start: {exc}") from None
    argv = [*cap, *argv]  # into a pids cgroup of its own first, where there is one
    params = StdioServerParameters(command=argv[0], args=argv[1:], env=clean, cwd=cwd)
    return stdio_client(params, errlog=errlog.writer)


@contextlib.asynccontextmanager
async def http_transport(
    server: McpServer, secrets: list[tuple[str, str]], status: HttpStatus
) -> AsyncIterator[Any]:
    """The SDK's streamable HTTP client for ``server``, its responses seen by ``status``."""
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    assert server.url is not None
    headers = {
        key: resolve(value, server.name, f"header {key}", secrets) for key, value in server.headers
    }
    async with create_mcp_http_client(headers=headers) as client:
        client.event_hooks["response"].append(status.seen)
        async with streamable_http_client(server.url, http_client=client) as streams:
            yield streams
