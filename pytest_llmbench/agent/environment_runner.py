"""The child that serves a stateful environment's tools: run as a script, confined, in the
item's workdir (``python environment_runner.py MODULE STATE TOOL...``), as a stdio MCP server
is; or that seeds a SQLite state (``python environment_runner.py --seed STATE``), so that no
SQL of the eval file runs in the pytest process.

It imports the environment module (a file path) and serves exactly the tools it is named
(collection read them from the module's source: :func:`spec.expand_environment.read_module_tools`
is the one rule of what a tool is); a name it cannot serve as a tool (an ``async def``, a
decorator that left no function taking ``state`` first) is Fatal, named. It answers JSON lines
on stdin/stdout: first a handshake, ``{"tools": [OpenAI function tools]}`` or
``{"fatal": why}``; then, for each ``{"name", "arguments"}`` line, ``{"result": text}``,
``{"error": "Type: message"}`` (the tool raised: the model reads it) or ``{"fatal": why}`` (the
environment failed: the item's error). Seeding reads one ``{"seed": SQL text or {table: [rows]}}``
line and answers ``{"seeded": true}`` or ``{"fatal": why}``; the seed's SQL may not ``ATTACH``
another database (nor ``VACUUM INTO`` one): it writes the state file and nothing else.

Each call reads the state file (JSON: ``json.load``; SQLite: a connection, committed after the
call and checked), runs the tool, checks a JSON state is still JSON and writes it back
atomically. A tool that wrote the JSON state file itself is taken at its word, if the file
still reads. What a tool prints goes to stderr: stdout is the protocol's alone.

Standard library only, nothing of pytest_llmbench: it starts in a few tens of milliseconds and
runs wherever the Python does (under bubblewrap, or unconfined with ``sandbox: off``).
"""

from __future__ import annotations

import importlib.util
import inspect
import json
import math
import os
import sqlite3
import sys
import traceback
import types
import typing
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TextIO

#: The suffixes of a SQLite state file (as ``spec.resolved.SQLITE_SUFFIXES``).
SQLITE_SUFFIXES = (".db", ".sqlite", ".sqlite3")
#: The most characters of a result sent back (the agent loop cuts further).
MAX_RESULT_CHARS = 100_000
_SCALARS: dict[Any, str] = {str: "string", int: "integer", float: "number", bool: "boolean"}
_MAX_DEPTH = 64  # of a state walked for a value that is not JSON


class Fatal(Exception):
    """The environment cannot go on: the item's error, said in a sentence."""


# --- the tools' schemas --------------------------------------------------------------------------


def served_tools(module: types.ModuleType, names: list[str]) -> dict[str, Callable[..., Any]]:
    """The functions of ``module`` named ``names`` (the tools collection found in its source),
    by name; Fatal naming the first one that cannot be served as a tool."""
    found: dict[str, Callable[..., Any]] = {}
    for name in names:
        value = vars(module).get(name)
        problem = _unservable(value)
        if problem is not None:
            raise Fatal(f"tool {name} cannot be served: {problem}")
        assert value is not None
        found[name] = value
    return found


def _unservable(value: Any) -> str | None:
    """Why ``value`` (a module's attribute once imported) is no tool, or None."""
    if value is None:
        return "the module defines no such function once imported"
    if inspect.iscoroutinefunction(value) or inspect.isasyncgenfunction(value):
        return "it is an `async def`; a tool is a plain function"
    if not inspect.isfunction(value):
        return f"its decorators left {type(value).__name__}, not a function"
    try:
        params = list(inspect.signature(value).parameters)
    except (TypeError, ValueError) as exc:
        return f"its signature cannot be read: {exc}"
    if not params or params[0] != "state":
        return "after its decorators, its first parameter is not `state`"
    return None


def tool_schema(name: str, function: Callable[..., Any]) -> dict[str, Any]:
    """The OpenAI function-tool format of ``function``: its docstring, and a JSON schema of its
    parameters after ``state`` (those with defaults are optional); Fatal for a parameter that
    cannot be a JSON argument."""
    try:
        hints = typing.get_type_hints(function)
    except Exception as exc:
        raise Fatal(f"tool {name}: unreadable annotations: {type(exc).__name__}: {exc}") from None
    properties: dict[str, Any] = {}
    required = []
    for param in list(inspect.signature(function).parameters.values())[1:]:
        if param.kind not in (param.POSITIONAL_OR_KEYWORD, param.KEYWORD_ONLY):
            raise Fatal(f"tool {name}: parameter {param.name!r} cannot be a named argument")
        hint = hints.get(param.name, Any)
        try:
            properties[param.name] = json_schema(hint)
        except TypeError as exc:
            raise Fatal(f"tool {name}: parameter {param.name!r}: {exc}") from None
        if param.default is param.empty:
            required.append(param.name)
    parameters = {"type": "object", "properties": properties, "required": required}
    description = inspect.getdoc(function) or name
    function_spec = {"name": name, "description": description, "parameters": parameters}
    return {"type": "function", "function": function_spec}


def json_schema(hint: Any) -> dict[str, Any]:
    """The JSON schema of an annotation: str, int, float, bool, list[X], dict[str, X],
    Optional[X] (X | None), Literal[...], Any; TypeError for anything else."""
    if hint is Any or hint is inspect.Parameter.empty:
        return {}
    if hint in _SCALARS:
        return {"type": _SCALARS[hint]}
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is typing.Literal:
        return {"enum": list(args)}
    if origin in (typing.Union, types.UnionType):
        kept = [arg for arg in args if arg is not type(None)]
        if len(kept) == 1:
            return json_schema(kept[0])
        return {"anyOf": [json_schema(arg) for arg in kept]}
    if hint is list or origin is list:
        return {"type": "array", **({"items": json_schema(args[0])} if args else {})}
    if hint is dict or origin is dict:
        values = {"additionalProperties": json_schema(args[1])} if len(args) == 2 else {}
        return {"type": "object", **values}
    raise TypeError(
        f"{hint!r} is not a JSON type (str, int, float, bool, list[...], dict[...], Optional)"
    )


# --- the module ----------------------------------------------------------------------------------


def load_module(path: Path) -> types.ModuleType:
    """The environment module at ``path`` (its folder first on sys.path, for its siblings);
    Fatal naming the exception and where in the module it was raised."""
    sys.path.insert(0, str(path.parent))
    spec = importlib.util.spec_from_file_location(f"llmbench_env_{path.stem}", path)
    if spec is None or spec.loader is None:
        raise Fatal(f"{path.name} cannot be imported as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException as exc:  # SystemExit and KeyboardInterrupt too: the module's own
        raise Fatal(f"{path.name} raised when imported: {_raised(exc, path)}") from None
    return module


def _raised(exc: BaseException, path: Path) -> str:
    """``Type: message``, with the last line of ``path`` the traceback went through."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == str(path)]
    where = f" (line {frames[-1].lineno})" if frames else ""
    return f"{type(exc).__name__}: {exc}{where}"


# --- the state -----------------------------------------------------------------------------------


def json_state(text: str | bytes) -> Any:
    """A state file's text as a JSON value; ValueError for what is not JSON, a ``NaN`` or an
    ``Infinity``, and a value nested deeper than :func:`non_json` walks."""

    def refused(constant: str) -> Any:
        raise ValueError(f"{constant} is not a JSON value")

    try:
        value = json.loads(text, parse_constant=refused)
    except RecursionError:
        raise ValueError(f"nested deeper than {_MAX_DEPTH} levels") from None
    problem = non_json(value)
    if problem is not None:
        raise ValueError(problem)
    return value


def non_json(value: Any, path: str = "", depth: int = 0) -> str | None:
    """Where ``value`` holds what JSON cannot (``orders/W1/tags: a set``), or None."""
    if depth > _MAX_DEPTH:
        return f"{path or '(top)'}: nested deeper than {_MAX_DEPTH} levels (or a cycle)"
    if value is None or isinstance(value, (str, bool, int)):
        return None
    if isinstance(value, float):
        return None if math.isfinite(value) else f"{path or '(top)'}: the float {value}"
    if isinstance(value, (list, tuple)):
        items: Iterator[tuple[str, Any]] = ((str(i), v) for i, v in enumerate(value))
    elif isinstance(value, dict):
        bad_key = next((k for k in value if not isinstance(k, str)), None)
        if bad_key is not None:
            return f"{path or '(top)'}: a key of type {type(bad_key).__name__} ({bad_key!r})"
        items = iter(value.items())
    else:
        return f"{path or '(top)'}: a value of type {type(value).__name__}"
    for key, item in items:
        found = non_json(item, f"{path}/{key}" if path else key, depth + 1)
        if found is not None:
            return found
    return None


def _signature(path: Path) -> tuple[int, int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns)


class JsonState:
    """A JSON state file: read before each call, written back after it."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.last: str | None = None  #: the tool called last, named when the file breaks

    def read(self, last: str | None) -> Any:
        try:
            with open(self.path, "rb") as file:
                return json_state(file.read())
        except (OSError, ValueError) as exc:
            after = f" after the tool {last}" if last else ""
            raise Fatal(
                f"the state file {self.path.name} cannot be read{after} (corrupted?): "
                f"{type(exc).__name__}: {exc}"
            ) from None

    def call(self, name: str, function: Callable[..., Any], arguments: dict[str, Any]) -> Any:
        state = self.read(self.last)
        self.last = name
        before = _signature(self.path)
        result = function(state, **arguments)  # raising, it changes nothing
        if _signature(self.path) != before:  # the tool wrote the file itself: it must read
            self.read(name)
            return result
        problem = non_json(state)
        if problem is not None:
            raise Fatal(f"the tool {name} left a state that is not JSON-serialisable: {problem}")
        temporary = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        with open(temporary, "w", encoding="utf-8") as file:
            json.dump(state, file, ensure_ascii=False, indent=1)
        os.replace(temporary, self.path)
        return result


class SqliteState:
    """A SQLite state file: a connection per call, committed after it, then checked."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.last: str | None = None  #: the tool called last, named when the file breaks

    def call(self, name: str, function: Callable[..., Any], arguments: dict[str, Any]) -> Any:
        connection = self._connect(self.last)
        self.last = name
        # A tool that raises changes nothing, even what it committed itself (a commit(), an
        # executescript, a CREATE outside the transaction): the file is put back as it was.
        kept = self.path.read_bytes()
        try:
            result = function(connection, **arguments)
            connection.commit()
        except BaseException:
            connection.rollback()
            connection.close()
            temporary = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
            temporary.write_bytes(kept)
            os.replace(temporary, self.path)
            raise
        finally:
            connection.close()
        self._check(name)
        return result

    def _connect(self, last: str | None) -> sqlite3.Connection:
        try:
            connection = sqlite3.connect(self.path)
            connection.execute("SELECT count(*) FROM sqlite_master").fetchone()
        except sqlite3.Error as exc:
            after = f" after the tool {last}" if last else ""
            raise Fatal(
                f"the state file {self.path.name} cannot be read{after} (corrupted?): "
                f"{type(exc).__name__}: {exc}"
            ) from None
        return connection

    def _check(self, last: str) -> None:
        connection = self._connect(last)
        try:
            verdict = connection.execute("PRAGMA quick_check").fetchone()
        except sqlite3.Error as exc:
            verdict = (f"{type(exc).__name__}: {exc}",)
        finally:
            connection.close()
        if verdict is None or verdict[0] != "ok":
            said = verdict[0] if verdict else "no answer"
            raise Fatal(f"the tool {last} left the state file {self.path.name} corrupted: {said}")


# --- seeding a SQLite state ----------------------------------------------------------------------


def seed_sqlite(path: Path, seed: Any) -> None:
    """Write ``seed`` (SQL text run as a script, ``{table: [row objects]}``, or None: an empty
    database) as the SQLite file ``path``, replacing what is there (a link too, not followed);
    Fatal when it fails or would ``ATTACH`` another database."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.seed.tmp")
    if os.path.lexists(temporary):
        os.unlink(temporary)
    try:
        connection = sqlite3.connect(temporary)
        try:
            connection.set_authorizer(no_attach)
            if isinstance(seed, str):
                connection.executescript(seed)
            elif isinstance(seed, dict):
                _insert_tables(connection, seed)
            elif seed is not None:
                raise Fatal(f"a SQLite state's seed is SQL text or {{table: [rows]}}, "
                            f"not {type(seed).__name__}")  # fmt: skip
            connection.commit()
        finally:
            connection.close()
        os.replace(temporary, path)
    except sqlite3.Error as exc:
        raise Fatal(f"the SQLite seed fails: {type(exc).__name__}: {exc}") from None
    except OSError as exc:
        raise Fatal(f"cannot write the state file {path.name}: {exc}") from None
    finally:
        if os.path.lexists(temporary):
            os.unlink(temporary)


def no_attach(action: int, *_: Any) -> int:
    """A SQLite authorizer that refuses ``ATTACH`` (and so ``VACUUM INTO``): a statement may
    read and write its own database, no other file."""
    return sqlite3.SQLITE_DENY if action == sqlite3.SQLITE_ATTACH else sqlite3.SQLITE_OK


def _insert_tables(connection: sqlite3.Connection, tables: dict[str, Any]) -> None:
    """Each ``{table: [row objects]}`` as a table of the rows' keys (untyped columns)."""
    for table, rows in tables.items():
        if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
            raise Fatal(f"the seed's table {table!r} is not a list of row objects")
        columns = list(dict.fromkeys(key for row in rows for key in row))
        if not columns:
            raise Fatal(f"the seed's table {table!r} has no rows to take its columns from")
        names = ", ".join(quoted(c) for c in columns)
        connection.execute(f"CREATE TABLE {quoted(table)} ({names})")
        marks = ", ".join("?" for _ in columns)
        insert = f"INSERT INTO {quoted(table)} ({names}) VALUES ({marks})"
        connection.executemany(insert, [[_cell(row.get(c)) for c in columns] for row in rows])


def quoted(name: str) -> str:
    """``name`` as a SQLite identifier."""
    return '"' + str(name).replace('"', '""') + '"'


def _cell(value: Any) -> Any:
    """A seed's value as SQLite stores it: nested values as their JSON text."""
    return json.dumps(value) if isinstance(value, (list, dict)) else value


def seed(state_path: Path, protocol: TextIO) -> int:
    """Read the seed line, write the state file, answer whether it worked."""
    try:
        request = json.loads(sys.stdin.readline() or "{}")
        seed_sqlite(state_path, request.get("seed"))
    except (Fatal, ValueError, AttributeError) as exc:
        _send(protocol, {"fatal": str(exc) if isinstance(exc, Fatal) else f"a bad seed: {exc}"})
        return 1
    _send(protocol, {"seeded": True})
    return 0


# --- serving -------------------------------------------------------------------------------------


def _send(protocol: TextIO, message: dict[str, Any]) -> None:
    protocol.write(json.dumps(message, ensure_ascii=False) + "\n")
    protocol.flush()


def shown(value: Any) -> str:
    """What the model reads of a tool's return value: text as is, anything else as JSON."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    if len(text) > MAX_RESULT_CHARS:
        text = text[:MAX_RESULT_CHARS] + f"\n[... {len(text) - MAX_RESULT_CHARS} more cut]"
    return text


def answer(
    tools: dict[str, Callable[..., Any]], state: JsonState | SqliteState, line: str
) -> dict[str, Any]:
    """The answer to one request line (Fatal when the environment cannot go on)."""
    request = json.loads(line)
    name, arguments = request.get("name"), request.get("arguments") or {}
    function = tools.get(name)
    if function is None:
        return {"error": f"unknown tool {name!r}; the tools are {', '.join(tools)}"}
    if not isinstance(arguments, dict) or "state" in arguments:
        return {"error": "the arguments must be a JSON object of the tool's named parameters"}
    try:
        inspect.signature(function).bind(None, **arguments)
    except TypeError as exc:
        return {"error": f"TypeError: {exc}"}
    try:
        return {"result": shown(state.call(name, function, arguments))}
    except Fatal:
        raise
    except Exception as exc:  # the tool's own failure: the model reads it (tau2-bench's rule)
        return {"error": shown(f"{type(exc).__name__}: {exc}")}  # cut as a result is


def serve(module_path: Path, state_path: Path, names: list[str], protocol: TextIO) -> int:
    """The handshake, then one answer per request line until stdin closes."""

    def send(message: dict[str, Any]) -> None:
        _send(protocol, message)

    try:
        module = load_module(module_path)
        if not names:
            raise Fatal(
                f"{module_path.name} has no tools: a tool is a top-level public function whose "
                "first parameter is named `state`"
            )
        tools = served_tools(module, names)
        schemas = [tool_schema(name, function) for name, function in tools.items()]
    except Fatal as exc:
        send({"fatal": str(exc)})
        return 1
    state: JsonState | SqliteState = (
        SqliteState(state_path)
        if state_path.name.lower().endswith(SQLITE_SUFFIXES)
        else JsonState(state_path)
    )
    send({"tools": schemas})
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            send(answer(tools, state, line))
        except Fatal as exc:
            send({"fatal": str(exc)})
            return 1
    return 0


def main(argv: list[str]) -> int:
    # The protocol keeps the real stdout; fd 1 (a tool's print, a C library's write) is stderr.
    protocol = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    if argv[1] == "--seed":
        return seed(Path(argv[2]), protocol)
    return serve(Path(argv[1]), Path(argv[2]), argv[3:], protocol)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
