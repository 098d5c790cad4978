"""A ``kind: agent`` file's ``environment:`` and its cases' ``state:`` and ``expected_actions:``,
resolved at collection.

:func:`resolve_environment` turns the file's ``environment:`` into an
:class:`~.resolved.Environment`: the module's tools are read from its source with :mod:`ast`,
never imported (it runs only in the item's sandbox), so that a case's ``expected_actions`` are
checked against their names and parameters before any item runs; its seed is read once. This
is the one rule of what a tool is: the runner serves exactly the names read here (and fails,
naming it, on one it cannot serve); a name that is another tool's of the file (a built-in, a
``module:function``) is an error here, at the environment's line.
:func:`with_case_state` gives each case (inline, or a dataset row's ``state`` and
``expected_actions`` columns) its starting state and expected actions. The state assertions
(``state-equals``, ``state-subset``) are checked, and their ``file://`` values read, by
:mod:`.state_checks`. Every problem is an :class:`~.resolved.EvalFileError` at the key at fault.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .file_kinds import file_kind, kinds_allowing
from .paths import PathRefused, resolve_eval_path, workdir_path
from .resolved import SQLITE_SUFFIXES, Environment, EnvironmentTool, EvalFileError, ExpectedAction
from .schema import BUILTIN_TOOL_NAMES

if TYPE_CHECKING:
    from .datasets import DatasetRow
    from .expand_place import Place
    from .resolved import EvalCase
    from .schema import CaseSpec, EnvironmentSpec, EvalSpec
    from .yamlsource import LocatedDocument

#: The state file suffixes: a JSON document, else one of :data:`SQLITE_SUFFIXES`.
STATE_SUFFIXES = (".json", *SQLITE_SUFFIXES)
#: The suffix of a SQLite seed given as SQL text (``seed: file://seed.sql``).
SQL_SUFFIX = ".sql"


def resolve_environment(
    spec: EvalSpec, path: Path, document: LocatedDocument, roots: Sequence[Path] = ()
) -> Environment | None:
    """The file's ``environment:``, resolved; None without one."""
    written = spec.environment
    if written is None:
        return None
    if not file_kind(spec.kind).agent:
        needs = kinds_allowing(lambda kind: kind.agent)
        raise EvalFileError(
            path, document.line_of(("environment",)), f"'environment' needs {needs}"
        )

    def error(message: str, *key: str) -> EvalFileError:
        line = document.line_of(("environment", *key)) or document.line_of(("environment",))
        return EvalFileError(path, line, f"environment: {message}")

    if (written.module is None) == (written.server is None):
        raise error("give exactly one of `module` (a Python file) and `server` (an MCP server)")
    state_file = _state_file(written.state, error)
    sqlite = state_file.lower().endswith(SQLITE_SUFFIXES)
    try:
        seed = read_state_value(written.seed, sqlite, path.parent, roots)
    except ValueError as exc:
        raise error(f"seed: {exc}", "seed") from None
    if written.server is not None:
        _check_server(spec, written, error)
        return Environment(None, written.server, state_file, seed)
    module = _module_path(written, path.parent, roots, error)
    tools = read_module_tools(module)
    if not tools:
        raise error(f"module: {written.module} defines no tool: a tool is a public top-level "
                    "function whose first parameter is `state`", "module")  # fmt: skip
    _check_names(spec, tools, module, error)
    names = tuple(tool.name for tool in tools)
    return Environment(module, None, state_file, seed, names, tools)


def _check_names(
    spec: EvalSpec, tools: Sequence[EnvironmentTool], module: Path, error: Any
) -> None:
    """No tool of the module may have the name of a built-in tool or of the file's custom
    (``module:function``) tools: the model would see two tools of one name."""
    written = spec.tools if isinstance(spec.tools, list) else []
    custom = {
        name.partition(":")[2]: name
        for name in written
        if isinstance(name, str) and ":" in name and not name.startswith("mcp:")
    }
    for tool in tools:
        if tool.name in BUILTIN_TOOL_NAMES:
            other = "a built-in tool's"
        elif tool.name in custom:
            other = f"the file's tool {custom[tool.name]}'s"
        else:
            continue
        raise error(f"module: {module.name} defines the tool {tool.name!r} (line {tool.line}), "
                    f"which is {other} name: rename one of them")  # fmt: skip


def _state_file(name: str, error: Any) -> str:
    """The state file's name inside the workdir, of a known format."""
    try:
        workdir_path(name)
    except ValueError as exc:
        raise error(f"state: {exc}", "state") from None
    if not name.lower().endswith(STATE_SUFFIXES):
        raise error(f"state: {name!r} is a .json file (a JSON document), or "
                    ".db/.sqlite/.sqlite3 (a SQLite database)", "state")  # fmt: skip
    return name


def _check_server(spec: EvalSpec, written: EnvironmentSpec, error: Any) -> None:
    """The server must be a declared stdio server that is not shared between items: the state
    file it changes is the item's."""
    server = spec.mcp_servers.get(str(written.server))
    if server is None:
        declared = ", ".join(spec.mcp_servers) or "none are declared in `mcp_servers:`"
        raise error(f"server: {written.server!r} is no MCP server of the file ({declared})",
                    "server")  # fmt: skip
    if server.command is None:
        raise error(f"server: {written.server!r} must be a stdio server (`command:`): it "
                    "works on the item's state file in its workdir", "server")  # fmt: skip
    if server.shared:
        raise error(f"server: {written.server!r} is `shared`, but each item has its own "
                    "state: drop `shared`", "server")  # fmt: skip


def _module_path(written: EnvironmentSpec, folder: Path, roots: Sequence[Path], error: Any) -> Path:
    """The module file next to the eval file (or under the allowed roots), which must exist."""
    name = str(written.module)
    try:
        module = resolve_eval_path(name, folder, roots)
    except PathRefused as exc:
        raise error(f"module: {exc}", "module") from None
    if module.suffix != ".py" or not module.is_file():
        raise error(f"module: {name!r} is not a Python file (.py) next to the eval file",
                    "module")  # fmt: skip
    return module


def read_module_tools(module: Path) -> tuple[EnvironmentTool, ...]:
    """The tools ``module`` defines, read from its source without running it: its public
    top-level functions (``def``, decorated or not) whose first parameter is ``state``, in the
    order written. A module that does not parse, or whose tool is an ``async def`` (the runner
    calls tools one at a time, synchronously), is an error at its own file and line."""
    try:
        source = module.read_text(encoding="utf-8")
        tree = ast.parse(source, filename=str(module))
    except SyntaxError as exc:
        raise EvalFileError(module, exc.lineno, f"environment module: {exc.msg}") from None
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise EvalFileError(module, None, f"environment module cannot be read: {exc}") from None
    defined = (ast.FunctionDef, ast.AsyncFunctionDef)
    found = [(node, _tool(node)) for node in tree.body if isinstance(node, defined)]
    for node, tool in found:
        if tool is not None and isinstance(node, ast.AsyncFunctionDef):
            raise EvalFileError(module, node.lineno, f"environment tool {node.name!r} is an "
                                "`async def`: write it as a plain `def`")  # fmt: skip
    # A name defined twice is the last definition, as Python binds it and the runner serves it.
    tools = {tool.name: tool for _, tool in found if tool is not None}
    return tuple(tools.values())


def _tool(node: ast.FunctionDef | ast.AsyncFunctionDef) -> EnvironmentTool | None:
    """The tool ``node`` defines, or None: a private function, or one not taking ``state``."""
    args = node.args
    positional = [*args.posonlyargs, *args.args]
    if node.name.startswith("_") or not positional or positional[0].arg != "state":
        return None
    rest = positional[1:]
    first_default = len(positional) - len(args.defaults)  # the last ones have defaults
    required = [arg.arg for index, arg in enumerate(positional) if 0 < index < first_default]
    required += [
        arg.arg
        for arg, default in zip(args.kwonlyargs, args.kw_defaults, strict=True)
        if default is None
    ]
    names = tuple(arg.arg for arg in [*rest, *args.kwonlyargs])
    return EnvironmentTool(node.name, names, tuple(required), args.kwarg is not None, node.lineno)


def read_state_value(raw: Any, sqlite: bool, folder: Path, roots: Sequence[Path] = ()) -> Any:
    """A seed or a case's ``state:`` as written: None; a mapping (a JSON object; for SQLite
    ``{table: [rows as objects]}``); ``file://NAME`` (JSON, or SQL text from a ``.sql`` file
    for SQLite); SQL text itself for SQLite. ValueError says what is wrong."""
    if raw is None:
        return None
    if isinstance(raw, str) and raw.startswith("file://"):
        return _state_file_value(raw.removeprefix("file://"), sqlite, folder, roots)
    if isinstance(raw, str):
        if sqlite and raw.strip():
            return raw
        raise ValueError("a mapping, or file://NAME (a JSON file" + (", or .sql" if sqlite else "")
                         + f"), not {_shown(raw)}")  # fmt: skip
    return _checked_state(raw, sqlite)


def _state_file_value(name: str, sqlite: bool, folder: Path, roots: Sequence[Path]) -> Any:
    path = resolve_eval_path(name, folder, roots)  # PathRefused is a ValueError
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"cannot read {name!r}: {getattr(exc, 'strerror', None) or exc}") from None
    if sqlite and path.suffix.lower() == SQL_SUFFIX:
        return text
    from ..yamlguard import ValueLimitError, json_value

    try:
        value = json_value(text)
    except (json.JSONDecodeError, ValueLimitError) as exc:
        raise ValueError(f"{name!r} is no JSON: {exc}") from None
    return _checked_state(value, sqlite)


def _checked_state(value: Any, sqlite: bool) -> Any:
    """``value`` when it is a JSON object (for SQLite, of lists of row objects)."""
    from ..yamlguard import json_text

    if not isinstance(value, Mapping):
        raise ValueError(f"a state is a JSON object (a mapping), not {_shown(value)}")
    try:
        json_text(value)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"the state is not JSON: {exc}") from None
    if sqlite:
        bad = [key for key, rows in value.items() if not _rows(rows)]
        if bad:
            raise ValueError(f"a SQLite state as JSON is {{table: [rows as objects]}}; table "
                             f"{bad[0]!r} is not a list of objects")  # fmt: skip
    return dict(value)


def _rows(rows: Any) -> bool:
    return isinstance(rows, list) and all(isinstance(row, Mapping) for row in rows)


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


# --- a case's state and expected actions ------------------------------------------------------


def with_case_state(
    case: EvalCase, environment: Environment | None, written: CaseSpec, place: Place
) -> EvalCase:
    """An inline case with its starting state (``state:``, else the seed) and its
    ``expected_actions``, checked against the environment's tools."""
    if environment is None:
        for key in ("state", "expected_actions"):
            if getattr(written, key) is not None:
                raise place.error(f"case {case.id!r}: `{key}` needs the file's `environment:`"
                                  " (kind: agent)", key)  # fmt: skip
        return case
    try:
        seed = read_state_value(written.state, environment.sqlite, place.path.parent, place.roots)
    except ValueError as exc:
        raise place.error(f"case {case.id!r}: state: {exc}", "state") from None
    if written.expected_actions is None:
        return _stated(case, environment, seed, None)
    actions = []
    for index, action in enumerate(written.expected_actions):
        line = place.document.line_of((*place.loc, "expected_actions", index)) or place.line
        found = ExpectedAction(action.name, dict(action.arguments), line)
        problem = action_problem(environment, found)
        if problem is not None:
            raise EvalFileError(place.path, line, f"case {case.id!r}: expected_actions: {problem}")
        actions.append(found)
    return _stated(case, environment, seed, tuple(actions))


def with_row_state(
    case: EvalCase, environment: Environment | None, row: DatasetRow, place: Place, where: str
) -> EvalCase:
    """A dataset row's case with its ``state`` and ``expected_actions`` columns (JSON text in
    a CSV cell); the columns are plain data in a file without an environment."""
    if environment is None:
        return case
    state, actions = row.vars.get("state"), row.vars.get("expected_actions")
    try:
        seed = read_state_value(_cell(state, "state"), environment.sqlite,
                                place.path.parent, place.roots)  # fmt: skip
        found = _row_actions(_cell(actions, "expected_actions"), row.line or 0)
    except ValueError as exc:
        raise place.error(f"{where}: {exc}") from None
    for action in found or ():
        problem = action_problem(environment, action)
        if problem is not None:
            raise place.error(f"{where}: expected_actions: {problem}")
    return _stated(case, environment, seed, found)


def _stated(
    case: EvalCase,
    environment: Environment,
    seed: Any,
    actions: tuple[ExpectedAction, ...] | None,
) -> EvalCase:
    start = environment.seed if seed is None else seed
    return replace(case, state_seed=start, expected_actions=actions)


def _cell(value: Any, column: str) -> Any:
    """A cell that holds JSON text (a CSV's) as its value; a file:// or SQL text as it is."""
    if not isinstance(value, str) or not value.strip():
        return value if value != "" else None
    text = value.strip()
    if text[0] not in "[{":
        return value
    from ..yamlguard import ValueLimitError, json_value

    try:
        return json_value(text)
    except (json.JSONDecodeError, ValueLimitError) as exc:
        raise ValueError(f"column {column!r} is no JSON: {exc}") from None


def _row_actions(value: Any, line: int) -> tuple[ExpectedAction, ...] | None:
    """A row's ``expected_actions``: a list of ``{name, arguments}`` (or ``kwargs``); None when
    the row gives none."""
    if value is None:
        return None
    if not isinstance(value, list):
        raise ValueError(f"expected_actions is a list of {{name, arguments}}, not {_shown(value)}")
    actions = []
    for item in value:
        arguments = item.get("arguments", item.get("kwargs", {})) if isinstance(item, dict) else 0
        name = item.get("name") if isinstance(item, dict) else None
        extra = set(item) - {"name", "arguments", "kwargs"} if isinstance(item, dict) else set()
        if not isinstance(name, str) or not isinstance(arguments, dict) or extra:
            raise ValueError(f"an expected action is {{name, arguments}}, not {_shown(item)}")
        actions.append(ExpectedAction(name, arguments, line))
    return tuple(actions)


def action_problem(environment: Environment, action: ExpectedAction) -> str | None:
    """Why ``action`` cannot call the module's tools (an unknown tool, an unknown or missing
    argument), or None; a server's tools are known only when it runs."""
    if environment.module is None:
        return None
    tool = environment.tool(action.name)
    if tool is None:
        known = ", ".join(environment.tool_names)
        return f"{action.name!r} is not a tool of {environment.module.name} ({known})"
    unknown = [key for key in action.arguments if key not in tool.parameters]
    if unknown and not tool.any_keyword:
        takes = ", ".join(tool.parameters) or "no argument but state"
        return f"{action.name} takes no argument {unknown[0]!r} (it takes {takes})"
    missing = [key for key in tool.required if key not in action.arguments]
    if missing:
        return f"{action.name} needs the argument {missing[0]!r}"
    return None
