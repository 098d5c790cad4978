"""MCP servers as an agent's tool source: one session per server, for one item.

:func:`open_mcp_tools` starts each server an agent file names (``command``: a stdio server in
the item's sandbox) or connects to it (``url``: streamable HTTP), initializes it, lists its
tools once, selects them by the file's ``mcp:SERVER/GLOB`` entries, and yields an
:class:`McpToolbox`: the item's built-in tools and the selected MCP tools behind one async
:meth:`McpToolbox.acall`. The model sees an MCP tool as ``SERVER__TOOL`` (OpenAI tool names
allow ``[A-Za-z0-9_-]``); records name it ``mcp:SERVER/TOOL``. Every session is closed when the
item ends, also when it errors or is cancelled. A server declared ``shared: true`` is started
once per process instead (:mod:`.mcp_pool`) and its session reused by the items of the process.

One server's session is :mod:`.mcp_session`'s; a stdio server is started confined by
:mod:`.mcp_launch`, its program shown to the sandbox by its install prefix (:mod:`.programs`);
a command the sandbox cannot show is the item's error, saying what it shows.

A server that does not start, dies, fails ``initialize`` or outlasts ``startup_timeout_s`` or
``tool_timeout_s``, or a glob that matches none of its tools, raises :class:`McpServerError`:
the item's error (kind ``tool``), never a failed score. A tool's own error result
(``isError``) is a result the model reads. ``${VAR}`` in ``env:`` and ``headers:`` is read
from the environment when the server starts; the values never reach a result or message.
The SDK (``mcp``) is imported by these modules only, when an item has MCP servers.
"""

from __future__ import annotations

import asyncio
import contextlib
import fnmatch
import json
import re
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from ..models import ItemError
from ..redact import Redactor
from .mcp_io import DiskWatch
from .mcp_launch import McpServer, McpServerError
from .mcp_session import ServerSession, bounded_request, list_tools, open_server
from .sandbox import Sandbox
from .tools import ERROR_PREFIX, Toolbox, ToolSpec

#: ``SERVER__TOOL``: how the model sees an MCP tool.
NAME_SEPARATOR = "__"
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")
_MODEL_NAME_MAX = 64  # OpenAI's limit on a function name


class ServerPool(Protocol):
    """This process's shared servers and running bound (``agent.mcp_pool.McpPool``)."""

    def slot(self) -> contextlib.AbstractAsyncContextManager[None]: ...
    async def shared(
        self, server: McpServer, sandbox: Sandbox, secrets: list[tuple[str, str]]
    ) -> tuple[ServerSession, list[Any]]: ...


@dataclass(frozen=True)
class McpTool:
    """One selected tool of a server: what the model is told, and where calls go."""

    server: str
    name: str  #: the server's own name of the tool
    spec: ToolSpec  #: under the name the model sees (:func:`model_name`)
    timeout_s: float  #: the server's ``tool_timeout_s``

    @property
    def canonical(self) -> str:
        """``mcp:SERVER/TOOL``, the name records and assertions use."""
        return f"mcp:{self.server}/{self.name}"


def model_name(server: str, tool: str) -> str:
    """The name the model sees for ``tool`` of ``server``: ``SERVER__TOOL``, made safe."""
    return _UNSAFE.sub("_", f"{server}{NAME_SEPARATOR}{tool}")[:_MODEL_NAME_MAX]


def _select(server: McpServer, tools: Sequence[Any], globs: Sequence[str]) -> list[McpTool]:
    """The ``tools`` that ``globs`` select, in listing order; a glob that selects none is an
    error naming the tools there are."""
    names = [tool.name for tool in tools]
    for glob in globs:
        if not fnmatch.filter(names, glob):
            there = ", ".join(names) or "none"
            raise McpServerError(
                f"MCP server {server.name!r}: mcp:{server.name}/{glob} matches none of its "
                f"tools ({there})"
            )
    chosen = [tool for tool in tools if any(fnmatch.fnmatchcase(tool.name, g) for g in globs)]
    return [
        McpTool(
            server.name,
            tool.name,
            ToolSpec(
                model_name(server.name, tool.name),
                tool.description or tool.title or tool.name,
                dict(tool.input_schema),
            ),
            server.tool_timeout_s,
        )
        for tool in chosen
    ]


def result_text(result: Any) -> str:
    """What the model reads of a ``tools/call`` result: its text parts (others summarised),
    ``"error: "`` first when the tool reported an error."""
    parts = []
    for block in result.content:
        if block.type == "text":
            parts.append(block.text)
        else:
            kind = getattr(block, "mime_type", None) or block.type
            parts.append(f"[{block.type} content: {kind}]")
    if not parts and result.structured_content is not None:
        parts.append(json.dumps(result.structured_content, ensure_ascii=False))
    text = "\n".join(parts) or "(no content)"
    return f"{ERROR_PREFIX}{text}" if result.is_error else text


# --- the item's toolbox --------------------------------------------------------------------------


class McpToolbox:
    """An item's built-in tools and its MCP tools, called through one :meth:`acall`."""

    def __init__(
        self,
        local: Toolbox,
        tools: Sequence[McpTool],
        sessions: Mapping[str, ServerSession],
        watch: DiskWatch | None = None,
    ) -> None:
        self._local = local
        self._tools = {tool.spec.name: tool for tool in tools}
        self._sessions = dict(sessions)
        self._redactor = Redactor(())
        self._watch = watch  #: the workdir's, while the item's own stdio servers run

    def hide(self, secrets: Sequence[tuple[str, str]]) -> None:
        """Keep the resolved ``${VAR}`` values out of every result and error."""
        self._redactor = _redactor(secrets)

    @property
    def names(self) -> list[str]:
        """The names the model sees: the built-ins' then the MCP tools'."""
        return [*self._local.names, *self._tools]

    def schemas(self) -> list[dict[str, Any]]:
        """Every tool in the OpenAI function-tool format."""
        return [*self._local.schemas(), *(tool.spec.schema() for tool in self._tools.values())]

    def recorded_name(self, name: str) -> str:
        """How records name the tool the model called ``name`` (``mcp:SERVER/TOOL``)."""
        tool = self._tools.get(name)
        return tool.canonical if tool is not None else name

    async def acall(self, name: str, arguments: Mapping[str, Any]) -> str:
        """Run a call: an MCP tool on its server, a built-in in a thread (it blocks). A
        server that fails raises :class:`McpServerError`; a tool's refusal is its result."""
        tool = self._tools.get(name)
        if tool is None:
            return await asyncio.to_thread(self._local.call, name, arguments)
        opened = self._sessions[tool.server]
        if opened.broken is not None:  # a shared server that exited: it is not restarted
            said = f"{gone(tool.server)}; the call of {tool.name} was not made ({opened.broken})"
            raise McpServerError(self._redactor.text(said))
        call = opened.session.call_tool(tool.name, dict(arguments))
        what = f"the call of {tool.name}"
        bounded = bounded_request(opened, call, what, tool.timeout_s)
        try:
            result = await (self._watch.bounded(bounded) if self._watch else bounded)
        except McpServerError as exc:
            raise McpServerError(self._redactor.text(exc.message)) from None
        if result is None:  # the workdir passed a disk limit: the servers go with the item
            assert self._watch is not None
            raise McpServerError(
                f"MCP server {tool.server!r}: {self._watch.overrun}, the sandbox's limit; "
                f"the call of {tool.name} was stopped"
            )
        return self._redactor.text(result_text(result))


@contextlib.asynccontextmanager
async def open_mcp_tools(
    servers: Sequence[McpServer],
    selections: Sequence[tuple[str, str]],
    local: Toolbox,
    pool: ServerPool | None = None,
) -> AsyncIterator[McpToolbox]:
    """The item's toolbox with the tools ``selections`` pick from ``servers`` (those no
    selection names are not started); every session is closed on the way out. ``pool``
    (this process's) holds the ``shared: true`` servers and bounds the stdio servers running
    at once; without it, every server is the item's own.

    The SDK's task groups wrap what fails inside them in exception groups: a
    :class:`~..models.ItemError` among them (a server's, or the model's) comes out alone, and any
    other failure while a server starts (a refused connection, say) is that server's
    :class:`McpServerError`.
    """
    progress = _Progress()
    try:
        async with _sessions(servers, selections, local, progress, pool) as toolbox:
            yield toolbox
    except Exception as exc:
        error = _item_error(exc, progress)
        if error is exc:
            raise
        raise error from None


class _Progress:
    """Where opening the sessions is: the server starting (None once all are up), and the
    values read for ``${VAR}`` so far."""

    def __init__(self) -> None:
        self.opening: str | None = None
        self.secrets: list[tuple[str, str]] = []


def _item_error(error: Exception, progress: _Progress) -> BaseException:
    """What ``error`` is for the item: the :class:`~..models.ItemError` in it, a failure of the server
    being started as its :class:`McpServerError`, else ``error`` itself."""
    found = _inner_item_error(error)
    if isinstance(found, ItemError) or progress.opening is None:
        return found
    cause = f"{type(found).__name__}: {found}"
    said = f"MCP server {progress.opening!r} did not start: {cause}"
    return McpServerError(_redactor(progress.secrets).text(said))


def gone(server: str) -> str:
    """The start of the error of a call to a shared server that exited earlier."""
    return f"MCP server {server!r} (shared) exited earlier in this process and is not restarted"


def start_failure(
    error: Exception, server: str, secrets: Sequence[tuple[str, str]]
) -> BaseException:
    """What ``error``, raised while ``server`` started, is for the items that use it: an
    :class:`McpServerError` (its message redacted), or the item error in it."""
    progress = _Progress()
    progress.opening, progress.secrets = server, list(secrets)
    found = _item_error(error, progress)
    if isinstance(found, McpServerError):
        return McpServerError(_redactor(secrets).text(found.message))
    return found


def _inner_item_error(error: BaseException) -> BaseException:
    """``error``, or the first item error inside it when it is an exception group
    (``exceptiongroup``'s on Python 3.10 too: read by its ``exceptions``); else the first
    exception the group holds."""
    inner = list(getattr(error, "exceptions", ()))
    found = [_inner_item_error(exc) for exc in inner]
    errors = [exc for exc in found if isinstance(exc, ItemError)]
    return errors[0] if errors else (found[0] if found else error)


@contextlib.asynccontextmanager
async def _sessions(
    servers: Sequence[McpServer],
    selections: Sequence[tuple[str, str]],
    local: Toolbox,
    progress: _Progress,
    pool: ServerPool | None,
) -> AsyncIterator[McpToolbox]:
    globs: dict[str, list[str]] = {}
    for server_name, glob in selections:
        globs.setdefault(server_name, []).append(glob)
    used = [server for server in servers if server.name in globs]
    secrets = progress.secrets
    async with contextlib.AsyncExitStack() as stack:
        if pool is not None and any(s.command and not s.shared for s in used):
            await stack.enter_async_context(pool.slot())  # the item's own stdio servers
        sessions: dict[str, ServerSession] = {}
        tools: list[McpTool] = []
        for server in used:
            progress.opening = server.name
            try:
                opened, listing = await _session(stack, server, local.sandbox, secrets, pool)
            except McpServerError as exc:
                raise McpServerError(_redactor(secrets).text(exc.message)) from None
            sessions[server.name] = opened
            tools += _select(server, listing, globs[server.name])
        progress.opening = None
        watch = None
        if local.sandbox.writable and any(s.command and not s.shared for s in used):
            watch = DiskWatch(local.sandbox)
            stack.callback(asyncio.get_running_loop().create_task(watch.run()).cancel)
        toolbox = McpToolbox(local, tools, sessions, watch)
        toolbox.hide(secrets)
        yield toolbox


async def _session(
    stack: contextlib.AsyncExitStack,
    server: McpServer,
    sandbox: Sandbox,
    secrets: list[tuple[str, str]],
    pool: ServerPool | None,
) -> tuple[ServerSession, list[Any]]:
    """The item's session with ``server`` and its tools: the process's for a shared server,
    else one started (and closed by ``stack``) for the item."""
    if server.shared and pool is not None:
        return await pool.shared(server, sandbox, secrets)
    opened = await open_server(stack, server, sandbox, secrets)
    return opened, await list_tools(opened)


def _redactor(secrets: Sequence[tuple[str, str]]) -> Redactor:
    """Replaces the resolved values (longest first, as :class:`Redactor` wants them)."""
    found = dict(value for value in secrets if value[0])
    return Redactor(tuple(sorted(found.items(), key=lambda pair: -len(pair[0]))))
