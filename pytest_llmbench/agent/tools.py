"""The tools an agent may call, confined to its workdir.

Built-ins: ``read_file(path)``, ``write_file(path, content)``, ``list_dir(path)`` and
``run_command(command)``; custom tools are ``module:function`` references. A :class:`Toolbox`
offers a case's tools to the model (:meth:`Toolbox.schemas`, the OpenAI function-tool format)
and runs its calls (:meth:`Toolbox.call`). A call never raises: a refusal or failure comes back
as a result starting with ``"error: "``, which the model reads and can act on.
"""

from __future__ import annotations

import inspect
import json
import os
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from .process import CommandResult
from .sandbox import Sandbox

READ_CAP_BYTES = 200_000
WRITE_CAP_BYTES = 1_000_000
LIST_CAP_ENTRIES = 500
ERROR_PREFIX = "error: "
_JSON_TYPES: dict[Any, str] = {str: "string", int: "integer", float: "number", bool: "boolean"}


class ToolRefusal(Exception):
    """A refusal the model sees as the tool's result: the message says what went wrong."""


@dataclass(frozen=True)
class ToolSpec:
    """What the model is told about a tool."""

    name: str
    description: str
    parameters: dict[str, Any]  #: a JSON schema object: properties, required

    def schema(self) -> dict[str, Any]:
        """The OpenAI function-tool format."""
        function = {"name": self.name, "description": self.description}
        return {"type": "function", "function": {**function, "parameters": self.parameters}}


@dataclass(frozen=True)
class CustomTool:
    """A ``module:function`` tool: its spec and the function, called with keyword arguments."""

    spec: ToolSpec
    function: Callable[..., Any]


# --- paths ------------------------------------------------------------------------------------


def resolve_inside(workdir: Path, raw: str) -> Path:
    """The path ``raw`` names inside ``workdir``, symlinks resolved; ToolRefusal if it leaves."""
    if not isinstance(raw, str) or not raw.strip():
        raise ToolRefusal("the path is empty: name a file inside the workdir, e.g. 'notes.txt'")
    if "\x00" in raw:
        raise ToolRefusal(f"path {raw!r} contains a NUL byte")
    if PurePosixPath(raw).is_absolute():
        raise ToolRefusal(f"path {raw!r} is absolute: tools only reach files inside the workdir")
    root = workdir.resolve()
    if not Path(os.path.normpath(root / raw)).is_relative_to(root):
        raise ToolRefusal(f"path {raw!r} leads out of the workdir through '..'")
    resolved = (root / raw).resolve()
    if not resolved.is_relative_to(root):
        raise ToolRefusal(f"path {raw!r} goes through a symlink that points outside the workdir")
    return resolved


# --- the built-ins ----------------------------------------------------------------------------


def read_file(workdir: Path, path: str) -> str:
    """The text of a file in the workdir (the first 200 kB; invalid UTF-8 replaced)."""
    target = resolve_inside(workdir, path)
    if target.is_dir():
        raise ToolRefusal(f"{path!r} is a directory: use list_dir")
    if not target.is_file():
        raise ToolRefusal(f"no such file: {path!r}")
    with target.open("rb") as file:
        data = file.read(READ_CAP_BYTES + 1)
    text = data[:READ_CAP_BYTES].decode("utf-8", errors="replace")
    if len(data) > READ_CAP_BYTES:
        size = target.stat().st_size
        text += f"\n[... file truncated at {READ_CAP_BYTES} bytes of {size}]"
    return text


def write_file(workdir: Path, path: str, content: str) -> str:
    """Create or replace a file in the workdir, with its parent directories."""
    data = content.encode("utf-8")
    if len(data) > WRITE_CAP_BYTES:
        raise ToolRefusal(
            f"content is {len(data)} bytes; write_file takes at most {WRITE_CAP_BYTES}"
        )
    target = resolve_inside(workdir, path)
    if Path(os.path.normpath(workdir.resolve() / path)).is_symlink():
        raise ToolRefusal(f"{path!r} is a symlink: write_file does not write through symlinks")
    if target.is_dir():
        raise ToolRefusal(f"{path!r} is a directory")
    target.parent.mkdir(parents=True, exist_ok=True)
    # O_NOFOLLOW: a symlink planted after the check above is refused, not followed
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
    with os.fdopen(fd, "wb") as file:
        file.write(data)
    return f"wrote {len(data)} bytes to {path}"


def list_dir(workdir: Path, path: str = ".") -> str:
    """The entries of a workdir directory, sorted, one a line; directories end with '/'."""
    target = resolve_inside(workdir, path)
    if not target.is_dir():
        raise ToolRefusal(f"no such directory: {path!r}")
    entries = sorted(target.iterdir(), key=lambda entry: entry.name)
    names = [e.name + ("/" if e.is_dir() and not e.is_symlink() else "") for e in entries]
    if not names:
        return "(empty directory)"
    more = len(names) - LIST_CAP_ENTRIES
    shown = names[:LIST_CAP_ENTRIES] + ([f"[... and {more} more entries]"] if more > 0 else [])
    return "\n".join(shown)


def run_command(sandbox: Sandbox, command: str) -> str:
    """Run a shell command in the sandbox; its exit code, output and any limit it hit."""
    return format_command_result(sandbox.run(command), sandbox)


def format_command_result(result: CommandResult, sandbox: Sandbox) -> str:
    """What the model reads: "error: " first when the command could not run or was stopped."""
    limits = sandbox.limits
    if result.error is not None:
        return f"{ERROR_PREFIX}could not run the command: {result.error}"
    stops = []
    if result.timed_out:
        stops.append(f"timed out after {limits.timeout_s:g} s and was killed")
    if result.truncated:
        stops.append(f"printed more than {limits.max_output_bytes} bytes and was killed")
    if result.process_limit_hit:
        stops.append(f"hit the limit of {limits.max_processes} processes")
    if result.disk_limit_hit is not None:
        stops.append(f"was stopped: {result.disk_limit_hit} (the limit)")
    head = f"exit code: {result.exit_code}" if result.exit_code is not None else "exit code: none"
    lines = [f"{ERROR_PREFIX}the command {'; '.join(stops)}"] if stops else []
    lines.append(head)
    for name, text in (("stdout", result.stdout), ("stderr", result.stderr)):
        if text:
            lines += [f"{name}:", text.rstrip("\n")]
    if not result.stdout and not result.stderr:
        lines.append("(no output)")
    return "\n".join(lines)


def _path_param(description: str) -> dict[str, str]:
    return {"type": "string", "description": description}


_PATH = _path_param("A path relative to the working directory")
BUILTIN_TOOLS: dict[str, ToolSpec] = {
    "read_file": ToolSpec(
        "read_file",
        "Read a text file in the working directory (at most 200 kB are returned).",
        {"type": "object", "properties": {"path": _PATH}, "required": ["path"]},
    ),
    "write_file": ToolSpec(
        "write_file",
        "Create or overwrite a file in the working directory with the given content; "
        "missing parent directories are created.",
        {
            "type": "object",
            "properties": {"path": _PATH, "content": _path_param("The whole new file content")},
            "required": ["path", "content"],
        },
    ),
    "list_dir": ToolSpec(
        "list_dir",
        "List a directory in the working directory, one entry a line; directories end with '/'.",
        {"type": "object", "properties": {"path": _path_param("Defaults to '.'")}, "required": []},
    ),
    "run_command": ToolSpec(
        "run_command",
        "Run a shell command (/bin/sh -c) in the working directory and return its exit code and "
        "output. It runs sandboxed: no network, only the working directory is writable, and "
        "time, memory, disk and output are limited.",
        {
            "type": "object",
            "properties": {"command": _path_param("The shell command line")},
            "required": ["command"],
        },
    ),
}


# --- custom tools -----------------------------------------------------------------------------


def load_custom_tool(ref: str, base_dir: Path) -> CustomTool:
    """Import ``module:function`` from ``base_dir``; ValueError naming ``ref`` when unusable.

    The docstring is the tool's description and the signature its parameters: ``str``,
    ``int``, ``float`` and ``bool`` annotations; those without defaults are required.
    """
    function = _import_function(ref, base_dir)
    description = inspect.getdoc(function)
    if not description:
        raise ValueError(f"custom tool {ref}: needs a docstring (the model reads it)")
    spec = ToolSpec(ref.partition(":")[2], description, _parameters_schema(ref, function))
    if spec.name in BUILTIN_TOOLS:
        raise ValueError(f"custom tool {ref}: {spec.name!r} is the name of a built-in tool")
    return CustomTool(spec, function)


def _import_function(ref: str, base_dir: Path) -> Callable[..., Any]:
    from ..userimport import UserImportError, load_callable

    try:
        return load_callable(ref, base_dir)
    except UserImportError as exc:
        raise ValueError(f"custom tool {exc}") from None


def _parameters_schema(ref: str, function: Callable[..., Any]) -> dict[str, Any]:
    try:
        hints = typing.get_type_hints(function)
    except Exception as exc:
        raise ValueError(f"custom tool {ref}: unreadable annotations: {exc}") from None
    properties: dict[str, Any] = {}
    required = []
    for param in inspect.signature(function).parameters.values():
        kind = _JSON_TYPES.get(hints.get(param.name))
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD, param.POSITIONAL_ONLY):
            raise ValueError(f"custom tool {ref}: parameter {param.name!r} cannot be a keyword")
        if kind is None:
            raise ValueError(
                f"custom tool {ref}: parameter {param.name!r} needs str/int/float/bool"
            )
        properties[param.name] = {"type": kind}
        if param.default is param.empty:
            required.append(param.name)
    return {"type": "object", "properties": properties, "required": required}


# --- the toolbox ------------------------------------------------------------------------------

_Runner = Callable[[Mapping[str, Any]], str]


class Toolbox:
    """One item's tools: built-ins on its workdir and sandbox, and custom tools."""

    def __init__(
        self, workdir: Path, names: Sequence[str], sandbox: Sandbox, base_dir: Path
    ) -> None:
        self.workdir = workdir
        self.sandbox = sandbox
        self._specs: dict[str, ToolSpec] = {}
        self._runners: dict[str, _Runner] = {}
        for name in names:
            spec, runner = self._tool(name, base_dir)
            if spec.name in self._specs:
                raise ValueError(f"tool {spec.name!r} is listed twice")
            self._specs[spec.name], self._runners[spec.name] = spec, runner

    def _tool(self, name: str, base_dir: Path) -> tuple[ToolSpec, _Runner]:
        if name in BUILTIN_TOOLS:
            return BUILTIN_TOOLS[name], self._builtin(name)
        if ":" not in name:
            known = ", ".join(BUILTIN_TOOLS)
            raise ValueError(f"unknown tool {name!r}: built-ins are {known}; or module:function")
        tool = load_custom_tool(name, base_dir)
        return tool.spec, lambda args: _call_custom(tool, args)

    def _builtin(self, name: str) -> _Runner:
        wd = self.workdir
        runners: dict[str, _Runner] = {
            "read_file": lambda a: read_file(wd, a["path"]),
            "write_file": lambda a: write_file(wd, a["path"], a["content"]),
            "list_dir": lambda a: list_dir(wd, a.get("path", ".")),
            "run_command": lambda a: run_command(self.sandbox, a["command"]),
        }
        return runners[name]

    @property
    def names(self) -> list[str]:
        """The tool names, in the order given."""
        return list(self._specs)

    def schemas(self) -> list[dict[str, Any]]:
        """The tools in the OpenAI function-tool format."""
        return [spec.schema() for spec in self._specs.values()]

    def call(self, name: str, arguments: Mapping[str, Any] | str) -> str:
        """Run a tool call; every refusal or failure is a result starting with "error: "."""
        try:
            return self._call(name, arguments)
        except ToolRefusal as exc:
            return f"{ERROR_PREFIX}{exc}"
        except Exception as exc:  # a tool's failure is the model's to read, never the loop's
            return f"{ERROR_PREFIX}{type(exc).__name__}: {exc}"

    def _call(self, name: str, arguments: Mapping[str, Any] | str) -> str:
        if name not in self._specs:
            raise ToolRefusal(f"unknown tool {name!r}; the tools are {', '.join(self._specs)}")
        args = _parse_arguments(arguments)
        _check_arguments(self._specs[name], args)
        return self._runners[name](args)


def _call_custom(tool: CustomTool, args: Mapping[str, Any]) -> str:
    return str(tool.function(**args))


def _parse_arguments(arguments: Mapping[str, Any] | str) -> Mapping[str, Any]:
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except json.JSONDecodeError as exc:
            raise ToolRefusal(f"the arguments are not valid JSON ({exc})") from None
    if not isinstance(arguments, Mapping):
        raise ToolRefusal("the arguments must be a JSON object of named arguments")
    return arguments


def _check_arguments(spec: ToolSpec, args: Mapping[str, Any]) -> None:
    properties: dict[str, Any] = spec.parameters.get("properties", {})
    for key in args:
        if key not in properties:
            raise ToolRefusal(f"{spec.name} got an unexpected argument {key!r}")
    for key in spec.parameters.get("required", []):
        if key not in args:
            raise ToolRefusal(f"{spec.name} is missing the required argument {key!r}")
    for key, value in args.items():
        if not _has_type(value, properties[key].get("type")):
            raise ToolRefusal(f"{spec.name}: argument {key!r} must be a {properties[key]['type']}")


def _has_type(value: Any, kind: str | None) -> bool:
    if kind == "string":
        return isinstance(value, str)
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return True
