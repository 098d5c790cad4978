"""This process's MCP servers beyond one item: ``shared: true`` servers, and how many of the
items' own stdio servers run at once.

A server declared ``shared: true`` is started (or connected to) once per process, the first
time an item needs it: once per pytest-xdist worker. Its ``tools/list`` is read once, and its
session serves the calls of every item of the process, concurrently. A task of the engine's
event loop holds it open (the SDK's task groups are entered and left by one task) until
:meth:`McpPool.close`, at the end of the session, stops it.

A shared stdio server cannot run in one item's workdir: it runs in a scratch folder of its own
(``mcp-NAME*`` in pytest's temporary folder, beside the items' workdirs), under the same
sandbox as an item's server: bubblewrap, the limits, the clean environment and ``env:``. It
sees no item's workdir, and items do not see its folder.

A shared server that fails to start is the error (kind ``tool``) of every item that uses it;
one that exits later errors the items that call it afterwards. It is not restarted: a server
that dies once in a run is a finding, and a restart would hide it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator, Callable, Hashable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .mcp import gone, start_failure
from .mcp_io import DiskWatch
from .mcp_launch import McpServer, McpServerError
from .mcp_session import list_tools, open_server

if TYPE_CHECKING:
    from .mcp_session import ServerSession
    from .sandbox import Sandbox

#: How many items' own stdio servers may run at once in a process, by default.
MAX_RUNNING = max(2, 2 * (os.cpu_count() or 1))
#: How long closing waits for the shared servers to stop (the SDK gives a server 2 s to exit
#: once its stdin is closed, then kills it).
_CLOSE_S = 6.0

_Opened = tuple["ServerSession", list[Any], tuple[tuple[str, str], ...]]


class _Shared:
    """One shared server, held open by a task of its own until :attr:`stop` is set."""

    def __init__(self, server: McpServer, sandbox: Sandbox) -> None:
        loop = asyncio.get_running_loop()
        #: the session, its tools and the ``${VAR}`` values read, once it is up
        self.ready: asyncio.Future[_Opened] = loop.create_future()
        self.stop = asyncio.Event()
        self.task = loop.create_task(self._hold(server, sandbox))

    async def _hold(self, server: McpServer, sandbox: Sandbox) -> None:
        secrets: list[tuple[str, str]] = []
        try:
            async with contextlib.AsyncExitStack() as stack:
                opened = await open_server(stack, server, sandbox, secrets)
                tools = await list_tools(opened)
                self.ready.set_result((opened, tools, tuple(secrets)))
                await self._serve(opened, sandbox)
        except asyncio.CancelledError:
            if not self.ready.done():
                self.ready.cancel()
            raise
        except Exception as exc:  # closing a server that died: nothing left to tell
            if not self.ready.done():
                self.ready.set_exception(start_failure(exc, server.name, secrets))

    async def _serve(self, opened: ServerSession, sandbox: Sandbox) -> None:
        """Until :attr:`stop`; a stdio server's scratch folder is watched meanwhile, and
        a server past a disk limit is stopped (then ``broken``: its calls are errors)."""
        if opened.server.command is None or not sandbox.writable:
            await self.stop.wait()
            return
        watch = DiskWatch(sandbox)
        waits = {asyncio.ensure_future(self.stop.wait()), asyncio.ensure_future(watch.run())}
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiting in waits:
                waiting.cancel()
        if watch.overrun is not None:
            past = watch.overrun.replace("the workdir", "its scratch folder")
            why = f"MCP server {opened.server.name!r}: {past}, the sandbox's limit; it was stopped"
            opened.stopped = opened.broken = why


class McpPool:
    """The shared MCP servers of this process, and the bound on the items' own stdio servers
    (the sandbox's command slots bound commands, which end; servers live as long as items).

    ``scratch(name)`` makes the folder a shared stdio server runs in. Its coroutines run on the
    engine's loop; :meth:`close` is called from another thread.
    """

    def __init__(self, scratch: Callable[[str], Path], max_running: int = MAX_RUNNING) -> None:
        self._scratch = scratch
        self._max_running = max_running
        self._slots: asyncio.Semaphore | None = None
        self._servers: dict[Hashable, _Shared] = {}
        self._loop: asyncio.AbstractEventLoop | None = None

    @contextlib.asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        """Held while an item's own stdio servers run (one slot per item, however many)."""
        if self._slots is None:
            self._slots = asyncio.Semaphore(self._max_running)
        async with self._slots:
            yield

    async def shared(
        self, server: McpServer, sandbox: Sandbox, secrets: list[tuple[str, str]]
    ) -> tuple[ServerSession, list[Any]]:
        """The process's session with ``server`` and its tools, started on first use; its
        ``${VAR}`` values are added to ``secrets`` (the item redacts them too)."""
        key = (server, sandbox.mode)
        held = self._servers.get(key)
        if held is None:
            self._loop = asyncio.get_running_loop()
            held = _Shared(server, self._sandbox(server, sandbox))
            self._servers[key] = held
        try:
            opened, tools, read = await asyncio.shield(held.ready)
        except McpServerError as exc:  # a fresh error per item: each has its own traceback
            raise McpServerError(exc.message) from None
        secrets.extend(read)
        if opened.broken is not None:
            raise McpServerError(f"{gone(server.name)} ({opened.broken})")
        return opened, tools

    def _sandbox(self, server: McpServer, sandbox: Sandbox) -> Sandbox:
        """Where a shared stdio server runs: the item's sandbox moved to a scratch folder."""
        if server.command is None:
            return sandbox  # an HTTP server: nothing runs here
        return sandbox.elsewhere(self._scratch(f"mcp-{server.name}"))

    def close(self) -> None:
        """Stop every shared server (from a thread other than the loop's), waiting a bounded
        time; the loop's own shutdown cancels what is left."""
        loop, held = self._loop, list(self._servers.values())
        if loop is None or loop.is_closed() or not held:
            return

        async def stop_all() -> None:
            for server in held:
                server.stop.set()
            await asyncio.wait([server.task for server in held], timeout=_CLOSE_S)

        with contextlib.suppress(Exception):  # closing is tidiness; the loop cancels the rest
            asyncio.run_coroutine_threadsafe(stop_all(), loop).result(_CLOSE_S + 1)
