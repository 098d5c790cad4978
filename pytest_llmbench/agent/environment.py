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

SKELETON: the interface every part of issue 42 codes against; bodies come with the runtime.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..spec import Environment, ExpectedAction
    from .loop import AsyncToolboxLike, ToolboxLike
    from .sandbox import Sandbox


@dataclass(frozen=True)
class StateSnapshot:
    """The states of one item's environment: as seeded, as the agent left it, and as the
    case's ``expected_actions`` leave the seed (None: not asked for, or no actions)."""

    initial: Any  #: the seed as a JSON value (SQLite: ``{table: [rows]}``)
    final: Any  #: the state file after the run, read the same way
    expected: Any = None  #: the seed after replaying ``expected_actions`` (tau-bench's rule)


def seed_state(environment: Environment, seed: Any, workdir: Path) -> None:
    """Write ``seed`` (a JSON value; SQL text for SQLite) as the item's state file in
    ``workdir``, before the agent starts. An unusable seed is an EnvError."""
    raise NotImplementedError


def read_state(environment: Environment, workdir: Path) -> Any:
    """The state file in ``workdir`` as a JSON value (SQLite: ``{table: [rows as objects]}``,
    rows sorted): an EnvError naming the file when it cannot be read (a corrupted state)."""
    raise NotImplementedError


@contextlib.asynccontextmanager
async def open_environment(
    environment: Environment,
    workdir: Path,
    sandbox: Sandbox,
    inner: ToolboxLike | AsyncToolboxLike,
) -> AsyncIterator[AsyncToolboxLike]:
    """The item's tools: ``environment``'s (its runner started confined by ``sandbox``, on the
    state file in ``workdir``) and ``inner``'s (the file's other tools), one toolbox; the
    runner stopped on the way out. A runner that cannot start is an EnvError."""
    raise NotImplementedError
    yield  # pragma: no cover


def replay_actions(
    environment: Environment,
    seed: Any,
    actions: Sequence[ExpectedAction],
    sandbox: Sandbox,
) -> Any:
    """The state ``seed`` becomes when ``actions`` run in order on a fresh copy (in a scratch
    folder, confined as the item's tools are): tau-bench's expected state. An action that
    fails (an unknown tool, a tool that raises) is an EnvError naming it."""
    raise NotImplementedError


def environment_tools(environment: Environment) -> Mapping[str, Any]:
    """The module's tools as the model is offered them, by name (for docs and checks)."""
    raise NotImplementedError
