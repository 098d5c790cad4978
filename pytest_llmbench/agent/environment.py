"""Stateful tool environments (a ``kind: agent`` file's ``environment:``), the parent's side.

An environment is a Python module whose public functions taking ``state`` first are tools that
read and change a per-item state (a JSON document, or a SQLite database, in the item's
workdir), or a stdio MCP server whose tools change that file. The module never runs in the
pytest process: :mod:`.environment_runner` imports it in a child confined by the item's
sandbox as an MCP server is (:func:`.mcp_launch.server_process`), and serves its tools over
JSON lines on stdin/stdout. The state file is the truth: the runner reads it before each call
and writes it back after, so what the tools did is in the workdir whatever happens next.

Its failures are the item's errors of kind ``environment`` (:class:`~..models.EnvError`),
never a failed score: a module that raises when loaded, a state that is not JSON-serialisable
after a tool, a state file a tool corrupted, a process that died. A tool that raises is the
model's to read (``error: ...``), as tau2-bench shows it to the agent.

The state file is read here without following links and only when it is a regular file:
what an agent's command left there (a link to a host file, a pipe) is an EnvError, never read;
so is a JSON state holding ``NaN`` or ``Infinity``, or nested deeper than the runner walks. No
SQL of the eval file runs here: a SQLite seed is written by a confined runner, and the
database an agent could have changed is read only, its schema untrusted (``trusted_schema``
off) and ``ATTACH`` refused. A SQLite state reads as ``{table: [rows as objects]}``, tables and
rows sorted (a ``bytes`` value as its hex text), so that two states compare as JSON values do.

The state file as seeded (whatever put it there: the seed, the case's ``state:``, or a file of
its ``files:``) is kept as :class:`SeededState`, the bytes a replay of the expected actions
starts from. The child's side is
:mod:`.environment_runner`; starting it and the item's combined toolbox, :mod:`.environment_process`.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import hashlib
import json
import os
import sqlite3
import stat
import tempfile
import urllib.parse
from collections.abc import AsyncIterator, Coroutine, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from ..models import EnvError
from .environment_process import (
    TOOL_TIMEOUT_S,
    EnvironmentToolbox,
    seed_confined,
    start_environment,
)
from .environment_runner import json_state, no_attach, non_json, quoted

if TYPE_CHECKING:
    from .loop import AsyncToolboxLike, ToolboxLike
    from .sandbox import Sandbox


class Environment(Protocol):
    """What the runtime needs of an environment (``spec.resolved.Environment``; the spec
    stage comes after this one)."""

    @property
    def module(self) -> Path | None: ...
    @property
    def server(self) -> str | None: ...
    @property
    def state_file(self) -> str: ...  # relative to the workdir
    @property
    def tool_names(self) -> tuple[str, ...]: ...  # what collection read in the module
    @property
    def sqlite(self) -> bool: ...


class ExpectedAction(Protocol):
    """What a replay needs of an expected action (``spec.resolved.ExpectedAction``)."""

    @property
    def name(self) -> str: ...
    @property
    def arguments(self) -> Mapping[str, Any]: ...
    @property
    def line(self) -> int: ...


T = TypeVar("T")
#: The largest state file read back (a tool's file may be at most ``max_file_mb``, 64 MB).
MAX_STATE_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True)
class StateSnapshot:
    """The states of one item's environment: as seeded, as the agent left it, and as the
    case's ``expected_actions`` leave the seed (None: not asked for, or no actions)."""

    initial: Any  #: the seed as a JSON value (SQLite: ``{table: [rows]}``)
    final: Any  #: the state file after the run, read the same way
    expected: Any = None  #: the seed after replaying ``expected_actions`` (tau-bench's rule)


@dataclass(frozen=True)
class SeededState:
    """An item's state file as seeded, before the agent starts."""

    content: bytes  #: the file's bytes: what a replay of the expected actions starts from
    value: Any  #: the file read as a JSON value (:func:`read_state`)

    @property
    def digest(self) -> str:
        """The SHA-256 of :attr:`content`: two items seeded alike replay alike."""
        return hashlib.sha256(self.content).hexdigest()


# --- the state file ------------------------------------------------------------------------------


def _state_path(environment: Environment, workdir: Path) -> Path:
    """The state file's path, inside ``workdir`` (EnvError when it would lead out)."""
    root = workdir.resolve()
    path = Path(os.path.normpath(root / environment.state_file))
    if not path.is_relative_to(root) or path == root:
        raise EnvError(f"the state file {environment.state_file!r} is not inside the workdir")
    return path


def seed_state(
    environment: Environment, seed: Any, workdir: Path, sandbox: Sandbox | None = None
) -> None:
    """Write ``seed`` as the item's state file in ``workdir``, before the agent starts.

    JSON state: ``seed`` is a mapping (None: ``{}``). SQLite: SQL text run as a script, or a
    mapping ``{table: [row objects]}`` (a table of untyped columns, the rows' keys), or None
    (an empty database), written by a runner confined by ``sandbox`` (by default, one in
    ``workdir`` in the ``auto`` mode). With no seed, a state file the case's ``files:`` put
    there is kept. An unusable seed is an EnvError.
    """
    path = _state_path(environment, workdir)
    if seed is None and os.path.lexists(path):
        return
    if environment.sqlite:
        _blocking(seed_confined(environment.state_file, seed, sandbox or _default_box(workdir)))
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.seed.tmp")
    with contextlib.suppress(FileNotFoundError):
        temporary.unlink()
    try:
        temporary.write_text(_seed_json(seed), encoding="utf-8")
        os.replace(temporary, path)  # a link planted at the path is replaced, not followed
    except OSError as exc:
        raise EnvError(f"cannot write the state file {environment.state_file}: {exc}") from None
    finally:
        with contextlib.suppress(FileNotFoundError):
            temporary.unlink()


def _default_box(workdir: Path) -> Sandbox:
    from .limits import SandboxLimits
    from .sandbox import Sandbox

    return Sandbox(workdir, SandboxLimits())


def _seed_json(seed: Any) -> str:
    if seed is None:
        seed = {}
    if not isinstance(seed, Mapping):
        raise EnvError(f"a JSON state's seed is a mapping, not {type(seed).__name__}")
    problem = non_json(dict(seed))
    if problem is not None:
        raise EnvError(f"the seed is not JSON: {problem}")
    return json.dumps(seed, ensure_ascii=False, indent=1)


def read_state(environment: Environment, workdir: Path, last_tool: str | None = None) -> Any:
    """The state file in ``workdir`` as a JSON value (SQLite: ``{table: [rows as objects]}``,
    rows sorted): an EnvError naming the file, and ``last_tool`` (the tool called last), when
    it cannot be read (a corrupted state)."""
    with _reading(environment, workdir, last_tool) as path:
        return _read_sqlite(path) if environment.sqlite else json_state(_file_bytes(path))


def read_seeded(environment: Environment, workdir: Path) -> SeededState:
    """The state file in ``workdir`` as seeded: its bytes and its value (EnvError as
    :func:`read_state`)."""
    with _reading(environment, workdir, None) as path:
        content = _file_bytes(path)
        value = _read_sqlite(path) if environment.sqlite else json_state(content)
        return SeededState(content, value)


@contextlib.contextmanager
def _reading(environment: Environment, workdir: Path, last_tool: str | None) -> Iterator[Path]:
    """The state file's path, when it is a regular file of a readable size; what goes wrong
    reading it, an EnvError naming the file and ``last_tool``."""
    path = _state_path(environment, workdir)
    after = f" (the last tool called: {last_tool})" if last_tool else ""
    name = environment.state_file
    try:
        found = os.lstat(path)
    except OSError as exc:
        raise EnvError(f"the state file {name} is gone{after}: {exc.strerror}") from None
    if not stat.S_ISREG(found.st_mode) or path.resolve() != path:
        raise EnvError(f"the state file {name} is no longer a regular file{after}: not read")
    if found.st_size > MAX_STATE_BYTES:
        raise EnvError(f"the state file {name} is larger than {MAX_STATE_BYTES} bytes{after}")
    try:
        yield path
    except (OSError, ValueError, RecursionError, sqlite3.Error) as exc:
        raise EnvError(
            f"the state file {name} cannot be read{after} (corrupted?): {type(exc).__name__}: {exc}"
        ) from None


def _file_bytes(path: Path) -> bytes:
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as file:
        if not stat.S_ISREG(os.fstat(file.fileno()).st_mode):
            raise ValueError("not a regular file")
        return file.read(MAX_STATE_BYTES + 1)


def _read_sqlite(path: Path) -> dict[str, list[dict[str, Any]]]:
    """The database's tables, read only: its schema untrusted (a view or trigger an agent
    planted calls no function with side effects), ``ATTACH`` refused."""
    uri = f"file:{urllib.parse.quote(str(path))}?mode=ro"
    connection = sqlite3.connect(uri, uri=True)
    try:
        connection.execute("PRAGMA trusted_schema = OFF")
        connection.execute("PRAGMA query_only = ON")
        connection.set_authorizer(no_attach)
        listed = connection.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' "
            "ORDER BY name"
        ).fetchall()
        tables = {table: _rows(connection, table) for (table,) in listed}
    finally:
        connection.close()
    problem = non_json(tables)
    if problem is not None:
        raise ValueError(problem)
    return tables


def _rows(connection: sqlite3.Connection, table: str) -> list[dict[str, Any]]:
    cursor = connection.execute(f"SELECT * FROM {quoted(table)}")
    columns = [column[0] for column in cursor.description]
    rows = [
        {c: (v.hex() if isinstance(v, bytes) else v) for c, v in zip(columns, row, strict=True)}
        for row in cursor.fetchall()
    ]
    return sorted(rows, key=lambda row: json.dumps(row, sort_keys=True, default=str))


# --- the tools ------------------------------------------------------------------------------------


@contextlib.asynccontextmanager
async def open_environment(
    environment: Environment,
    workdir: Path,
    sandbox: Sandbox,
    inner: ToolboxLike | AsyncToolboxLike,
    *,
    timeout_s: float = TOOL_TIMEOUT_S,
) -> AsyncIterator[AsyncToolboxLike]:
    """The item's tools: ``environment``'s (its runner started confined by ``sandbox``, on the
    state file in ``workdir``, serving the tools collection found) and ``inner``'s (the file's
    other tools), one toolbox; the runner stopped on the way out. A runner that cannot start,
    or cannot serve one of the tools, is an EnvError; each call is bounded by ``timeout_s``
    (an MCP server's ``tool_timeout_s`` default)."""
    module = _module(environment)
    _state_path(environment, workdir)
    names = environment.tool_names
    async with start_environment(module, environment.state_file, names, sandbox) as running:
        yield EnvironmentToolbox(running, inner, sandbox, timeout_s)


def _module(environment: Environment) -> Path:
    if environment.module is None:
        raise EnvError(
            f"the environment of MCP server {environment.server!r} has no module to run: its "
            "tools come from the server"
        )
    return environment.module


def replay_actions(
    environment: Environment,
    seeded: bytes,
    actions: Sequence[ExpectedAction],
    sandbox: Sandbox,
    *,
    timeout_s: float = TOOL_TIMEOUT_S,
) -> Any:
    """The state the item's state file as seeded (``seeded``, its bytes:
    :attr:`SeededState.content`) becomes when ``actions`` run in order on a copy of it (in a
    scratch folder, confined as the item's tools are): tau-bench's expected state. An action
    that fails (an unknown tool, a tool that raises) is an EnvError naming it."""
    with tempfile.TemporaryDirectory(prefix="llmbench-replay-") as folder:
        scratch = Path(folder)
        path = _state_path(environment, scratch)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(seeded)
        box = sandbox.elsewhere(scratch)
        _blocking(_replay(environment, actions, box, timeout_s))
        return read_state(environment, scratch)


async def _replay(
    environment: Environment, actions: Sequence[ExpectedAction], box: Sandbox, timeout_s: float
) -> None:
    module = _module(environment)
    names = environment.tool_names
    async with start_environment(module, environment.state_file, names, box) as running:
        for number, action in enumerate(actions, 1):
            where = f"expected action {number} ({action.name}" + (
                f", line {action.line})" if action.line else ")"
            )
            if action.name not in running.names:
                raise EnvError(
                    f"{where} names no tool of the environment {module.name} "
                    f"(its tools: {', '.join(running.names)})"
                )
            said = await running.answer(action.name, action.arguments, timeout_s)
            if "error" in said:  # the tool raised (a text it returned may say anything)
                raise EnvError(f"{where} failed when replayed: {said['error']}")


def _blocking(work: Coroutine[Any, Any, T]) -> T:
    """``work`` run to its end on an event loop of its own (a thread's: the caller may be
    inside one)."""
    with concurrent.futures.ThreadPoolExecutor(1, "llmbench-environment") as pool:
        return pool.submit(asyncio.run, work).result()


__all__ = [
    "SeededState",
    "StateSnapshot",
    "open_environment",
    "read_seeded",
    "read_state",
    "replay_actions",
    "seed_state",
]
