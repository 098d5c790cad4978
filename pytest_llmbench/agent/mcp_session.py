"""One MCP server's session for an agent: started or connected, initialized, bounded in time.

:func:`open_server` starts a stdio server in the item's sandbox or connects to a ``url`` one
(:mod:`.mcp_launch`) and initializes it within ``startup_timeout_s``; :func:`list_tools` asks
for its tools once; :func:`bounded_request` awaits any request of it within a timeout. A server
that does not start, dies, fails ``initialize`` or outlasts a timeout raises
:class:`.mcp_launch.McpServerError`, naming the server and, for a stdio server, the end of what
it wrote to stderr.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING, Any

from .mcp_io import HttpStatus, StderrTail
from .mcp_launch import (
    McpServer,
    McpServerError,
    http_transport,
    server_cap,
    server_program,
    stdio_transport,
)
from .programs import described
from .sandbox import Sandbox

if TYPE_CHECKING:
    from mcp.client.session import ClientSession


class ServerSession:
    """A started server: its session, where it writes its stderr, and what is secret in it."""

    def __init__(
        self,
        server: McpServer,
        session: ClientSession,
        errlog: StderrTail | HttpStatus | None,
    ) -> None:
        self.server = server
        self.session = session
        self.errlog = errlog
        #: why the connection is gone (the server exited), once a request found it closed
        self.broken: str | None = None
        #: why it was stopped on purpose (a shared server past a disk limit)
        self.stopped: str | None = None

    def stderr_tail(self) -> str:
        """The end of what a stdio server wrote to stderr, or the error status an HTTP server
        answered (for an error's cause), else ''."""
        return "" if self.errlog is None else self.errlog.cause()


async def open_server(
    stack: contextlib.AsyncExitStack,
    server: McpServer,
    sandbox: Sandbox,
    secrets: list[tuple[str, str]],
) -> ServerSession:
    """Start or connect to ``server`` and initialize it, within its startup timeout."""
    from mcp.client.session import ClientSession

    errlog: StderrTail | HttpStatus | None = None
    program = server_program(server, sandbox) if server.command is not None else None
    try:
        if program is not None:
            errlog = StderrTail()
            stack.callback(errlog.started)
            cap = stack.enter_context(server_cap(sandbox))
            stdio = stdio_transport(server, program, sandbox, errlog, secrets, cap)
            streams = await stack.enter_async_context(stdio)
            errlog.started()
        else:
            errlog = HttpStatus()
            streams = await stack.enter_async_context(http_transport(server, secrets, errlog))
        session = await stack.enter_async_context(ClientSession(streams[0], streams[1]))
    except (OSError, ValueError) as exc:
        raise McpServerError(f"MCP server {server.name!r} did not start: {exc}") from None
    opened = ServerSession(server, session, errlog)
    try:
        await bounded_request(opened, session.initialize(), "initialize", server.startup_timeout_s)
    except McpServerError as exc:
        if program is None or opened.broken is None or not sandbox.sandboxed:
            raise
        # It exited at start: a file it needs may lie where the sandbox does not look.
        shown = described(sandbox, program.mounts)
        raise McpServerError(f"{exc.message} (the sandbox shows {shown})") from None
    return opened


async def bounded_request(opened: ServerSession, call: Any, what: str, timeout_s: float) -> Any:
    """``call`` awaited within ``timeout_s``; McpServerError naming the server and the cause
    when it times out or the connection fails."""
    from mcp.shared.exceptions import MCPError
    from mcp_types import CONNECTION_CLOSED

    name = opened.server.name
    try:
        return await asyncio.wait_for(call, timeout_s)
    except asyncio.TimeoutError:
        raise McpServerError(
            f"MCP server {name!r}: {what} did not finish within {timeout_s:g} s"
            f"{opened.stderr_tail()}"
        ) from None
    except MCPError as exc:
        if opened.stopped is not None:  # on purpose: a shared server past a disk limit
            raise McpServerError(opened.stopped) from None
        said = (
            f"MCP server {name!r}: {what} failed: {exc} (the server may have exited)"
            f"{opened.stderr_tail()}"
        )
        if exc.code == CONNECTION_CLOSED:
            opened.broken = said
        raise McpServerError(said) from None


async def list_tools(opened: ServerSession) -> list[Any]:
    """The server's tools (``tools/list``, once per session), within its startup timeout."""
    timeout_s = opened.server.startup_timeout_s
    listing = await bounded_request(opened, opened.session.list_tools(), "tools/list", timeout_s)
    return list(listing.tools)
