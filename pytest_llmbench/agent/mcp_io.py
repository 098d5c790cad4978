"""What comes of an MCP server besides its answers: its stderr (the end kept), an HTTP
server's error status, lines on its stdout that are not JSON-RPC, and what it writes into the
item's workdir (watched against the sandbox's disk limits while it runs)."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import threading
import time
from collections.abc import Awaitable
from typing import Any, TextIO, TypeVar

from .limits import disk_overrun
from .sandbox import Sandbox

T = TypeVar("T")
_STDERR_TAIL = 400  # characters of a failed server's stderr kept in the error
#: Bytes of a stdio server's stderr kept (its end); the rest is read and dropped.
STDERR_KEPT = 64 * 1024
_PARSE_ERRORS_LOGGED = 20  # lines of garbage on a server's stdout logged, per process
_STDERR_DRAIN_S = 0.3  # how long an error waits for a just-exited server's last words
#: How often the workdir is measured while servers run: often while that is cheap, less
#: often (up to 0.5 s) as it grows, as the sandbox does for a command.
_DISK_POLL_S = 0.05
_DISK_POLL_MAX_S = 0.5


class StderrTail:
    """A stdio server's stderr: a pipe read on a thread of its own, keeping its last
    :data:`STDERR_KEPT` bytes (a server that floods stderr neither blocks nor fills a disk)."""

    def __init__(self) -> None:
        read_end, write_end = os.pipe()
        #: the end the server writes (our copy is closed once it started)
        self.writer: TextIO = os.fdopen(write_end, "w")
        self._kept = bytearray()
        self._lock = threading.Lock()
        self._reader = threading.Thread(target=self._read, args=(read_end,), daemon=True)
        self._reader.start()

    def _read(self, fd: int) -> None:
        with open(fd, "rb", buffering=0) as stream:
            while chunk := stream.read(65536):
                with self._lock:
                    self._kept += chunk
                    del self._kept[:-STDERR_KEPT]

    def started(self) -> None:
        """The server has its copy of the pipe: drop ours, so that its exit ends the reader."""
        with contextlib.suppress(OSError):
            self.writer.close()

    def text(self) -> str:
        """What is kept, decoded (after a moment for a server that just exited)."""
        self.started()
        self._reader.join(_STDERR_DRAIN_S)
        with self._lock:
            return self._kept.decode("utf-8", errors="replace")

    def cause(self) -> str:
        """The end of what the server wrote, as the cause of an error ('' when nothing)."""
        said = self.text().strip()
        return f"; it said: {said[-_STDERR_TAIL:]}" if said else ""


class HttpStatus:
    """The last error status an HTTP server answered (the SDK's errors do not say it)."""

    def __init__(self) -> None:
        self.last = ""

    async def seen(self, response: Any) -> None:
        """An httpx response hook."""
        if response.status_code >= 400:
            self.last = f"HTTP {response.status_code} {response.reason_phrase}".strip()

    def cause(self) -> str:
        """The status, as the cause of an error ('' when none was an error)."""
        return f"; the server answered {self.last}" if self.last else ""


class _ParseErrors(logging.Filter):
    """The SDK logs each stdout line of a server that is not JSON-RPC with a traceback: keep a
    line for each of the first few, without the traceback, and drop the rest (a server that
    floods garbage would otherwise fill pytest's captured logs)."""

    def __init__(self, kept: int) -> None:
        super().__init__()
        self._left = kept

    def filter(self, record: logging.LogRecord) -> bool:
        if not record.getMessage().startswith("Failed to parse JSONRPC"):
            return True
        self._left -= 1
        record.exc_info = record.exc_text = None
        if self._left == 0:
            record.msg = f"{record.msg} (further ones are not logged)"
        return self._left >= 0


@functools.cache
def quiet_parse_errors() -> None:
    logging.getLogger("mcp.client.stdio").addFilter(_ParseErrors(_PARSE_ERRORS_LOGGED))


class DiskWatch:
    """Measures an item's workdir while its stdio servers run; once it passes the sandbox's
    ``max_disk_mb`` or ``max_entries``, :meth:`bounded` stops the call running and refuses
    the next ones (the item's error; its servers are then stopped with it)."""

    def __init__(self, sandbox: Sandbox) -> None:
        self._sandbox = sandbox
        self._tripped = asyncio.Event()
        #: the limit passed, once it was
        self.overrun: str | None = None

    async def run(self) -> None:
        """Measure until a limit is passed (cancelled when the item's servers stop)."""
        poll_s = _DISK_POLL_S
        while True:
            started = time.monotonic()
            sandbox = self._sandbox
            found = await asyncio.to_thread(disk_overrun, sandbox.workdir, sandbox.limits)
            if found is not None:
                self.overrun = found
                self._tripped.set()
                return
            spent = time.monotonic() - started
            poll_s = min(_DISK_POLL_MAX_S, max(_DISK_POLL_S, 4 * spent))
            await asyncio.sleep(poll_s)

    async def bounded(self, call: Awaitable[T]) -> T | None:
        """``call``'s result, or None when the workdir passed a limit first (the call is
        cancelled then); None at once when it already had."""
        if self.overrun is not None:
            if asyncio.iscoroutine(call):
                call.close()
            return None
        work = asyncio.ensure_future(call)
        tripped = asyncio.ensure_future(self._tripped.wait())
        try:
            await asyncio.wait({work, tripped}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            tripped.cancel()
            if not work.done():
                work.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await work
        return work.result() if not work.cancelled() else None
