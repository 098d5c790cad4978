"""Function definitions of a plain eval file: ``tools:`` offered to the model, never run.

A plain (non-agent) eval file may declare ``tools:`` as OpenAI-style function definitions
(``{type: function, function: {name, description, parameters}}``, or the bare
``{name, description, parameters}``), inline or as ``file://tools.json``, with a ``tool_choice``
(``auto``, ``none``, ``required`` or ``{type: function, function: {name}}``). The model is offered
them; its calls are recorded and scored, not executed. In a ``kind: agent`` file ``tools:`` keeps
its own meaning: the names of the tools the agent loop runs.

:func:`read_function_tools` reads them into :class:`FunctionTools`, or raises
:class:`FunctionSpecError` with where in the file (the loader makes it ``path:line``) for a
definition whose ``parameters`` is not a JSON schema, a duplicate name, or a ``tool_choice``
naming a tool the file does not declare.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .paths import resolve_eval_path

if TYPE_CHECKING:
    from ..scoring import Assertion

#: The ``tool_choice`` words; a mapping ``{type: function, function: {name}}`` forces one tool.
TOOL_CHOICE_WORDS = ("auto", "none", "required")
_DEFINITION_KEYS = frozenset({"name", "description", "parameters", "strict"})


def shim_applies(tool_shim: str, embedded: bool) -> bool:
    """Whether a file's ``tool_shim`` (``auto``, ``always``, ``never``) puts its tools through
    the tool shim on a model (``embedded``: the embedded one), for function definitions and an
    agent's tools alike: ``auto`` means on the embedded model, which has no native tool calls."""
    return tool_shim == "always" or (tool_shim == "auto" and embedded)


@dataclass(frozen=True)
class FunctionTool:
    """One function the model may call."""

    name: str  #: what a call names
    description: str  #: what the model reads about it ("" when not given)
    parameters: Mapping[str, Any]  #: the JSON schema of its arguments

    def as_openai(self) -> dict[str, Any]:
        """The definition as the OpenAI chat API takes it in ``tools``."""
        function = {"name": self.name, "description": self.description}
        return {"type": "function", "function": {**function, "parameters": self.parameters}}


@dataclass(frozen=True)
class FunctionTools:
    """A plain file's function definitions and its ``tool_choice`` (None: the provider's)."""

    tools: tuple[FunctionTool, ...]
    tool_choice: str | Mapping[str, Any] | None = None
    #: ``auto`` (the tool shim on the embedded model), ``always`` or ``never``: whether the tools
    #: are offered through :mod:`pytest_llmbench.agent.shim` instead of natively
    tool_shim: str = "auto"

    def shimmed(self, embedded: bool) -> bool:
        """Whether the tools go through the shim on a model (``embedded``: the embedded one)."""
        return shim_applies(self.tool_shim, embedded)

    @property
    def names(self) -> tuple[str, ...]:
        """The declared names, in file order."""
        return tuple(tool.name for tool in self.tools)

    def schemas(self) -> dict[str, Mapping[str, Any]]:
        """Each declared tool's argument schema, by name."""
        return {tool.name: tool.parameters for tool in self.tools}

    def tool(self, name: str) -> FunctionTool | None:
        """The declared tool called ``name``, or None."""
        return next((tool for tool in self.tools if tool.name == name), None)

    def request_params(self) -> dict[str, Any]:
        """What a chat request adds to offer the tools: ``tools`` and, when set, ``tool_choice``."""
        params: dict[str, Any] = {"tools": [tool.as_openai() for tool in self.tools]}
        if self.tool_choice is not None:
            params["tool_choice"] = self.tool_choice
        return params


class FunctionSpecError(ValueError):
    """A bad function definition or ``tool_choice``; ``loc`` is where it sits in the file."""

    def __init__(self, loc: tuple[str | int, ...], message: str) -> None:
        super().__init__(message)
        self.loc = loc


def read_function_tools(
    tools: str | list[Any],
    tool_choice: str | dict[str, Any] | None,
    folder: Path,
    roots: Sequence[Path] = (),
) -> FunctionTools:
    """A plain file's ``tools:`` (inline, or ``file://`` from ``folder``) and ``tool_choice``;
    :class:`FunctionSpecError` for the first problem."""
    raw, source = _raw_definitions(tools, folder, roots)
    read = _definitions(raw, source)
    return FunctionTools(read, _tool_choice(tool_choice, read))


def _raw_definitions(
    value: str | list[Any], folder: Path, roots: Sequence[Path]
) -> tuple[list[Any], str | None]:
    """The definitions as written, and the ``file://`` they were read from (None: inline)."""
    if isinstance(value, str):
        name = value.removeprefix("file://")
        try:
            data = json.loads(resolve_eval_path(name, folder, roots).read_text("utf-8"))
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            raise FunctionSpecError(("tools",), f"tools: cannot read {value!r}: {exc}") from None
        if not isinstance(data, list):
            raise FunctionSpecError(("tools",), f"tools: {value!r} must hold a JSON list")
        return data, value
    names = [entry for entry in value if not isinstance(entry, dict)]
    if names:
        message = (
            f"tools: {names[0]!r} is an agent tool name, which needs `kind: agent`; "
            "a plain file's tools are function definitions"
        )
        raise FunctionSpecError(("tools", value.index(names[0])), message)
    return value, None


def _definitions(raw: list[Any], source: str | None) -> tuple[FunctionTool, ...]:
    tools: list[FunctionTool] = []
    first: dict[str, int] = {}
    for index, entry in enumerate(raw):
        loc: tuple[str | int, ...] = ("tools",) if source else ("tools", index)
        where = f"tools[{index}]" + (f" in {source}" if source else "")
        try:
            tool = _definition(entry)
        except ValueError as exc:
            raise FunctionSpecError(loc, f"{where}: {exc}") from None
        if tool.name in first:
            message = (
                f"{where}: duplicate tool name {tool.name!r} (first is tools[{first[tool.name]}])"
            )
            raise FunctionSpecError(loc, message)
        first[tool.name] = index
        tools.append(tool)
    return tuple(tools)


def _definition(entry: Any) -> FunctionTool:
    """One definition, OpenAI-shaped or bare; ValueError naming what is wrong."""
    if not isinstance(entry, dict):
        raise ValueError(f"a function definition is a mapping, not {type(entry).__name__}")
    if "function" in entry or "type" in entry:
        if entry.get("type") != "function" or set(entry) != {"type", "function"}:
            raise ValueError("expected {type: function, function: {name, description, parameters}}")
        entry = entry["function"]
        if not isinstance(entry, dict):
            raise ValueError("`function` must be a mapping of name, description, parameters")
    unknown = sorted(set(entry) - _DEFINITION_KEYS)
    if unknown:
        raise ValueError(f"unknown key {unknown[0]!r} (a definition has name, description, "
                         "parameters)")  # fmt: skip
    name, description = entry.get("name"), entry.get("description", "")
    if not isinstance(name, str) or not name:
        raise ValueError("a function definition needs a `name` (text)")
    if not isinstance(description, str):
        raise ValueError(f"{name}: `description` must be text")
    parameters = entry.get("parameters", {"type": "object", "properties": {}})
    _check_schema(name, parameters)
    return FunctionTool(name, description, parameters)


def _check_schema(name: str, parameters: Any) -> None:
    """``parameters`` must be a JSON schema of an object (checked against the meta-schema)."""
    import jsonschema

    if not isinstance(parameters, dict):
        raise ValueError(f"{name}: `parameters` must be a JSON schema (a mapping)")
    try:
        jsonschema.validators.validator_for(parameters).check_schema(parameters)
    except jsonschema.SchemaError as exc:
        at = "/".join(str(part) for part in exc.path)
        raise ValueError(f"{name}: `parameters` is not a JSON schema"
                         f"{f' at {at}' if at else ''}: {exc.message}") from None  # fmt: skip
    if parameters.get("type", "object") != "object":
        raise ValueError(f"{name}: `parameters` must describe an object (type: object)")


def _tool_choice(
    value: str | dict[str, Any] | None, tools: tuple[FunctionTool, ...]
) -> str | Mapping[str, Any] | None:
    if value is None or value in TOOL_CHOICE_WORDS:
        return value
    function = value.get("function") if isinstance(value, dict) else None
    name = function.get("name") if isinstance(function, dict) else None
    if not isinstance(value, dict) or value.get("type") != "function" or not isinstance(name, str):
        words = ", ".join(TOOL_CHOICE_WORDS)
        message = f"tool_choice: expected one of {words} or {{type: function, function: {{name}}}}"
        raise FunctionSpecError(("tool_choice",), message)
    if name not in {tool.name for tool in tools}:
        declared = ", ".join(tool.name for tool in tools)
        message = f"tool_choice names {name!r}, which is not among the declared tools ({declared})"
        raise FunctionSpecError(("tool_choice",), message)
    return {"type": "function", "function": {"name": name}}


# --- per-row tools and expected calls (datasets) ----------------------------------------------

#: How a dataset column writes function definitions: ``openai`` (as ``tools:`` takes them) or
#: ``bfcl`` (the Berkeley Function Calling Leaderboard's, with its type words).
TOOL_DIALECTS = ("openai", "bfcl")
#: How a dataset column writes the expected calls: ``bfcl``, BFCL's possible answers.
CALL_DIALECTS = ("bfcl",)

#: BFCL's type words as JSON Schema types (BFCL's own GORILLA_TO_OPENAPI table; a word it
#: does not know becomes ``string``, as BFCL makes it).
_BFCL_TYPES = {
    "integer": "integer", "number": "number", "float": "number", "double": "number",
    "string": "string", "char": "string", "any": "string", "boolean": "boolean",
    "bool": "boolean", "array": "array", "list": "array", "tuple": "array",
    "ArrayList": "array", "Array": "array", "dict": "object", "object": "object",
    "HashMap": "object", "byte": "integer", "short": "integer", "long": "integer",
}  # fmt: skip


def row_function_tools(cell: Any, dialect: str) -> FunctionTools:
    """A dataset cell of function definitions (a list, or JSON text of one) in ``dialect``;
    ValueError naming the problem."""
    if isinstance(cell, str):
        try:
            cell = json.loads(cell)
        except ValueError as exc:
            raise ValueError(f"the tools cell is not JSON: {exc}") from None
    if isinstance(cell, dict):
        cell = [cell]  # one definition alone
    if not isinstance(cell, list) or not cell:
        raise ValueError("the tools cell must hold a list of function definitions")
    if dialect == "bfcl":
        cell = [_bfcl_definition(entry) for entry in cell]
    try:
        return FunctionTools(_definitions(cell, "the tools cell"))
    except FunctionSpecError as exc:
        raise ValueError(str(exc)) from None


def _bfcl_definition(entry: Any) -> Any:
    """A BFCL definition with its type words made JSON Schema types (``dict`` -> ``object``,
    ``float`` -> ``number``, ``tuple`` -> ``array``, ...), everywhere in ``parameters``."""
    if not isinstance(entry, dict) or not isinstance(entry.get("parameters"), dict):
        return entry
    return {**entry, "parameters": _bfcl_schema(entry["parameters"])}


def _bfcl_schema(schema: Any) -> Any:
    if isinstance(schema, list):
        return [_bfcl_schema(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    converted: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "type" and isinstance(value, str):
            converted[key] = _BFCL_TYPES.get(value, "string")
        elif key in ("properties", "items", "additionalProperties", "anyOf", "oneOf"):
            converted[key] = (
                {name: _bfcl_schema(sub) for name, sub in value.items()}
                if key == "properties" and isinstance(value, dict)
                else _bfcl_schema(value)
            )
        else:
            converted[key] = value
    return converted


def row_expected_calls(cell: Any, dialect: str, tools: FunctionTools | None) -> tuple[Any, ...]:
    """A dataset cell of expected calls in ``dialect`` (BFCL: ``[{name: {arg: [allowed, ...]}}]``,
    ``""`` allowing the argument to be left out) as ``args_match: allowed`` steps of
    :mod:`pytest_llmbench.scoring.trajectory`; ValueError naming the problem (a call of a tool
    ``tools`` does not declare, allowed values that are not a list, or not of the argument's
    shape: objects of allowed-value lists for an object, lists of them for an array of
    objects)."""
    from ..scoring import ExpectedStep, allowed_value_problem

    if isinstance(cell, str):
        try:
            cell = json.loads(cell)
        except ValueError as exc:
            raise ValueError(f"the expected calls cell is not JSON: {exc}") from None
    if not isinstance(cell, list) or not cell:
        raise ValueError("the expected calls cell must hold a list of {tool: {argument: "
                         "[allowed values]}}")  # fmt: skip
    steps = []
    for index, call in enumerate(cell):
        if not isinstance(call, dict) or len(call) != 1:
            raise ValueError(f"expected call {index}: expected {{tool: {{argument: [allowed "
                             f"values]}}}}, got {json.dumps(call)[:80]}")  # fmt: skip
        [(name, args)] = call.items()
        if tools is not None and name not in tools.names:
            raise ValueError(f"expected call {index} names {name!r}, which the row does not "
                             f"declare (its tools: {', '.join(tools.names)})")  # fmt: skip
        if not isinstance(args, dict):
            raise ValueError(f"expected call {index} ({name}): the arguments must be a mapping")
        schema = tools.schemas().get(name) if tools is not None else None
        problem = allowed_value_problem(args, schema)
        if problem is not None:
            raise ValueError(f"expected call {index} ({name}): {problem}")
        steps.append(ExpectedStep(str(name), args, "allowed"))
    return tuple(steps)


def allowed_shape_problem(assertions: Sequence[Assertion], tools: FunctionTools) -> str | None:
    """The first ``args_match: allowed`` value among ``assertions`` not of the shape ``tools``'
    schemas ask for (objects of allowed-value lists for an object argument, lists of them for
    an array of objects), as ``TYPE: TOOL: problem``; None when every one is."""
    from ..scoring import allowed_value_problem, expected_steps

    schemas = tools.schemas()
    for assertion in assertions:
        for step in expected_steps(assertion):
            if step.args_match != "allowed" or step.args is None:
                continue
            problem = allowed_value_problem(step.args, schemas.get(step.name))
            if problem is not None:
                return f"{assertion.type}: {step.name}: {problem}"
    return None
