"""Load one eval file: parse it with line numbers, validate it against the schema, and expand
its cases (:mod:`.expand`), or raise :class:`~.resolved.EvalFileError` naming file and line.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from .file_kinds import file_kind, kinds_allowing
from .functions import (
    TOOL_CHOICE_WORDS,
    FunctionSpecError,
    FunctionTools,
    allowed_shape_problem,
    read_function_tools,
)
from .resolved import (
    MCP_TOOL,
    AgentSpec,
    Environment,
    EvalCase,
    EvalFileError,
    LoadedEval,
    McpServer,
    suite_name,
)
from .schema import AssertionItemError, EvalSpec, McpServerSpec
from .yamlsource import LocatedDocument, SourceError, load_located_file


def load_spec(path: Path, roots: Sequence[Path] = ()) -> LoadedEval:
    """Load, validate and expand one eval file, or raise :class:`EvalFileError`.

    The files and folders it names must be inside its folder or ``roots`` (the rootdir and the
    folders the user allowed), and no special file (:mod:`.paths`).
    """
    try:
        document = load_located_file(path)
    except SourceError as exc:
        raise EvalFileError(path, exc.line, exc.message) from None
    if not isinstance(document.data, dict):
        raise EvalFileError(path, document.line_of(()) or 1, _not_a_mapping(document.data))
    try:
        spec = EvalSpec.model_validate(document.data)
    except ValidationError as exc:
        first, *others = _schema_errors(path, document, exc)
        raise EvalFileError(first.path, first.line, first.message, others) from None
    from .expand import expand_cases, prompt_variants
    from .expand_environment import resolve_environment
    from .state_checks import checked_state_assertions

    environment = resolve_environment(spec, path, document, roots)
    variants = prompt_variants(spec, path, document, roots)
    cases = expand_cases(spec, path, document, variants, roots, environment)
    cases = checked_state_assertions(spec, cases, environment, path, document, roots)
    agent = _agent_spec(spec, path, document, environment)
    functions = function_tools(spec, path, document, roots)
    _check_tool_call_names(spec, functions, path, document, _row_tool_names(cases))
    _check_solver(spec, path, document)
    if spec.solver is not None and file_kind(spec.kind).agent:
        raise EvalFileError(path, document.line_of(("solver",)), f"`solver` and `kind: {spec.kind}` "
                            "do not go together: a solver is the agent")  # fmt: skip
    return LoadedEval(
        path,
        suite_name(path),
        spec.description,
        _hashed(
            _with_sources(cases, environment), path, _settings(spec, agent, functions, path.parent)
        ),
        spec.parallel_safe,
        agent,
        solver=spec.solver,
        prompt_variants=tuple(variant.name for variant in variants if variant.name),
        functions=functions,
        kind=spec.kind,
        efforts=tuple(spec.effort or ()),
        thinking=spec.thinking,
        judge_gate=spec.judge_gate.model_dump(exclude_none=True) if spec.judge_gate else None,
    )


def _settings(
    spec: EvalSpec, agent: AgentSpec | None, functions: FunctionTools | None, base: Path
) -> dict[str, Any]:
    """The file's settings that decide its cases' outcomes (hashed into each case_hash)."""
    settings: dict[str, Any] = {"solver": spec.solver, "agent": _agent_settings(agent, base)}
    if functions is not None:  # only when given: other files' hashes stay what they were
        settings["functions"] = functions.request_params()
    if spec.thinking is not None:  # as functions: only when given
        settings["thinking"] = spec.thinking.model_dump(mode="json", exclude_unset=True)
    return settings


def _agent_settings(agent: AgentSpec | None, base: Path) -> Any:
    """The agent's settings to hash: its MCP servers and its environment only when given, so
    that other agent files' hashes stay what they were; the environment's module by its name
    from the eval file's folder and its content."""
    if agent is None:
        return None
    from dataclasses import asdict

    settings = asdict(agent)
    if not agent.mcp_servers:
        del settings["mcp_servers"]
    if agent.environment is None:
        del settings["environment"]
    else:
        settings["environment"] = _environment_settings(agent.environment, base)
    return settings


def _environment_settings(environment: Environment, base: Path) -> dict[str, Any]:
    """What of an environment decides an outcome, besides each case's starting state (hashed
    with the case): where its tools come from (a module's name and content) and its state file."""
    import hashlib
    import os

    module = environment.module
    return {
        "module": None if module is None else os.path.relpath(module, base),
        "module_sha256": None
        if module is None
        else hashlib.sha256(module.read_bytes()).hexdigest(),
        "server": environment.server,
        "state_file": environment.state_file,
    }


def _with_sources(cases: Sequence[EvalCase], environment: Environment | None) -> list[EvalCase]:
    """The cases with the environment's module among the files they were read from (hashed
    into run.json's ``source``)."""
    if environment is None or environment.module is None:
        return list(cases)
    from dataclasses import replace

    module = environment.module
    return [replace(case, sources=(*case.sources, module)) for case in cases]


def _hashed(
    cases: Sequence[EvalCase], path: Path, settings: dict[str, Any]
) -> tuple[EvalCase, ...]:
    """The cases with what digests their ``case_hash`` (once per case, when first read)."""
    from dataclasses import replace

    from ..fingerprint import CaseHasher

    digest = CaseHasher(settings, path.parent)
    return tuple(replace(case, hasher=digest) for case in cases)


def _agent_spec(
    spec: EvalSpec, path: Path, document: LocatedDocument, environment: Environment | None = None
) -> AgentSpec | None:
    # plain tools: .functions
    agent_keys = ("post_process", "limits", "tool_shim_model", "mcp_servers", "environment")
    if not file_kind(spec.kind).agent:
        written = [key for key in agent_keys if getattr(spec, key)]
        if written:
            line = document.line_of((written[0],))
            needs = kinds_allowing(lambda kind: kind.agent)
            raise EvalFileError(path, line, f"{written[0]!r} needs {needs}")
        return None
    if not spec.tools and environment is None:  # an environment's tools are always offered
        message = f"`kind: {spec.kind}` needs `tools:` (or an `environment:`)"
        raise EvalFileError(path, document.line_of(("kind",)), message)
    names = _agent_tool_names(spec.tools, path, document)
    return AgentSpec(
        tools=tuple(dict.fromkeys(names)),
        max_turns=spec.agent_max_steps,
        limit_seconds=spec.limits.seconds if spec.limits else None,
        limit_tokens=spec.limits.tokens if spec.limits else None,
        sandbox=spec.sandbox,
        tool_shim=spec.tool_shim,
        post_process=spec.post_process,
        shim_model=spec.tool_shim_model,
        mcp_servers=_mcp_servers(spec, names, path, document),
        environment=environment,
    )


def _mcp_servers(
    spec: EvalSpec, names: list[str], path: Path, document: LocatedDocument
) -> tuple[McpServer, ...]:
    """The declared MCP servers; an ``mcp:SERVER/GLOB`` entry naming no server is an error."""
    for index, name in enumerate(names):
        match = MCP_TOOL.fullmatch(name)
        if match and match[1] not in spec.mcp_servers:
            declared = ", ".join(spec.mcp_servers) or "none are declared in `mcp_servers:`"
            raise EvalFileError(path, document.line_of(("tools", index)), f"tools: {name!r} "
                                f"names the unknown MCP server {match[1]!r} ({declared})")  # fmt: skip
    return tuple(_mcp_server(name, server) for name, server in spec.mcp_servers.items())


def _mcp_server(name: str, spec: McpServerSpec) -> McpServer:
    """The server ``name`` as its spec gives it."""
    return McpServer(
        name=name,
        command=spec.command,
        args=tuple(spec.args),
        env=tuple(spec.env.items()),
        cwd=spec.cwd,
        url=spec.url,
        headers=tuple(spec.headers.items()),
        network=spec.network,
        tool_timeout_s=spec.tool_timeout_s,
        startup_timeout_s=spec.startup_timeout_s,
        shared=spec.shared,
    )


def function_tools(
    spec: EvalSpec, path: Path, document: LocatedDocument, roots: Sequence[Path] = ()
) -> FunctionTools | None:
    """A plain file's function definitions (:mod:`.functions`), or None (an agent file, or no
    ``tools:``)."""
    row_tools = spec.dataset is not None and spec.dataset.tools is not None
    line = document.line_of(("tool_choice",))
    agent = file_kind(spec.kind).agent
    if spec.tool_choice is not None and (agent or not (spec.tools or row_tools)):
        raise EvalFileError(path, line, "`tool_choice` needs function definitions in `tools:` "
                            "of a plain file (an agent's tools are names)")  # fmt: skip
    if row_tools and not spec.tools and spec.tool_choice not in (None, *TOOL_CHOICE_WORDS):
        raise EvalFileError(path, line, "with dataset.tools, `tool_choice` is one of "
                            f"{', '.join(TOOL_CHOICE_WORDS)}: each row declares its own "
                            "tools")  # fmt: skip
    if agent or not spec.tools:
        return None
    try:
        read = read_function_tools(spec.tools, spec.tool_choice, path.parent, roots)
    except FunctionSpecError as exc:
        raise EvalFileError(path, document.line_of(exc.loc), str(exc)) from None
    from dataclasses import replace

    return replace(read, tool_shim=spec.tool_shim)


def _row_tool_names(cases: Sequence[EvalCase]) -> tuple[str, ...]:
    """The names the dataset rows' own tools declare (``dataset.tools``), each once, in order."""
    names = (name for case in cases if case.functions is not None for name in case.functions.names)
    return tuple(dict.fromkeys(names))


def _check_tool_call_names(
    spec: EvalSpec,
    functions: FunctionTools | None,
    path: Path,
    document: LocatedDocument,
    row_names: Sequence[str] = (),
) -> None:
    """A function-calling assertion needs the file's function definitions, and a tool it
    expects must be one of them (with ``dataset.tools``: of some row's, ``row_names``)."""
    from ..scoring import TOOL_CALL_TYPES, AssertionSpecError, expected_names, parse_assertion
    from .expand_place import written_assertions

    written = written_assertions(spec)
    for loc, raw in written:
        type_name = raw if isinstance(raw, str) else raw.get("type")
        if str(type_name).removeprefix("not-") not in TOOL_CALL_TYPES:
            continue  # not parsed again: collecting 10,000 cases reads each assertion enough
        line = document.line_of(loc)
        try:
            assertion = parse_assertion(raw)  # valid: the schema parsed it
        except AssertionSpecError as exc:  # a path the schema's check missed: still no traceback
            raise EvalFileError(path, line, str(exc)) from None
        row_tools = spec.dataset is not None and spec.dataset.tools is not None
        row_calls = spec.dataset is not None and spec.dataset.tool_calls is not None
        if assertion.base_type == "tool-calls" and assertion.value is None:
            _check_open_tool_calls(assertion.type, loc, spec, row_calls, path, line)
        if functions is None and not row_tools:
            raise EvalFileError(path, line, f"{assertion.type} needs function definitions in "
                                "`tools:` (a plain file) or dataset.tools")  # fmt: skip
        # a row's own tools (dataset.tools) replace the file's: a name must be some row's
        own = functions.names if functions is not None else ()
        declared = tuple(dict.fromkeys([*own, *row_names]))
        unknown = [name for name in expected_names(assertion) if name not in declared]
        if unknown:
            raise _undeclared(assertion.type, unknown[0], declared, functions is None, path, line)
        problem = allowed_shape_problem((assertion,), functions) if functions else None
        if problem is not None:
            raise EvalFileError(path, line, problem)


def _check_open_tool_calls(
    type_name: str,
    loc: tuple[str | int, ...],
    spec: EvalSpec,
    row_calls: bool,
    path: Path,
    line: int | None,
) -> None:
    """A ``tool-calls`` without a value checks a dataset row's expected calls: a case written
    in the file (its own assertions, or the file's when it has ``cases:``) has none, and would
    pass on no call at all."""
    if not row_calls:
        raise EvalFileError(path, line, f"{type_name} without a value checks a dataset's "
                            "expected calls: set dataset.tool_calls, or give the calls as its "
                            "value")  # fmt: skip
    if loc[0] == "cases" or spec.cases:
        whose = "this case" if loc[0] == "cases" else "the file's own `cases:`"
        raise EvalFileError(path, line, f"{type_name} without a value checks a dataset row's "
                            f"expected calls, and {whose} has none: give the calls as its "
                            "value")  # fmt: skip


def _undeclared(
    type_name: str, name: str, declared: Sequence[str], rows: bool, path: Path, line: int | None
) -> EvalFileError:
    """A function-calling assertion naming a tool no definition declares (``rows``: the
    dataset rows' own), the declared names shown (the first 12, and how many more)."""
    whose = "the rows' tools" if rows else "the declared tools"
    shown = ", ".join(declared[:12]) + (
        f" and {len(declared) - 12} more" if len(declared) > 12 else ""
    )
    return EvalFileError(path, line, f"{type_name} names {name!r}, which is not among {whose} "
                         f"({shown})")  # fmt: skip


def _agent_tool_names(
    tools: list[str | dict[str, Any]] | str, path: Path, document: LocatedDocument
) -> list[str]:
    """An agent's tools are names; function definitions belong to plain files."""
    if isinstance(tools, str):
        return _no_definitions(path, document.line_of(("tools",)))
    names = [name for name in tools if isinstance(name, str)]
    if len(names) < len(tools):
        index = next(n for n, name in enumerate(tools) if not isinstance(name, str))
        return _no_definitions(path, document.line_of(("tools", index)))
    return names


def _no_definitions(path: Path, line: int | None) -> list[str]:
    raise EvalFileError(path, line, "tools: a `kind: agent` file names its tools (built-ins or "
                        "'module:function'); function definitions are for plain files")  # fmt: skip


def _check_solver(spec: EvalSpec, path: Path, document: LocatedDocument) -> None:
    """A ``solver:`` that cannot be imported is the file's error, not every item's."""
    if spec.solver is None:
        return
    from ..userimport import UserImportError, load_callable

    try:
        load_callable(spec.solver, path.parent)
    except UserImportError as exc:
        raise EvalFileError(path, document.line_of(("solver",)), f"solver: {exc}") from None


def _not_a_mapping(data: Any) -> str:
    if data is None:
        return "the file is empty; an eval file is a mapping with a `cases:` list"
    return f"an eval file must be a mapping with a `cases:` list, not a {type(data).__name__}"


def _schema_errors(
    path: Path, document: LocatedDocument, exc: ValidationError
) -> list[EvalFileError]:
    """Every problem pydantic found, one per place, in line order: one run shows them all."""
    found: dict[tuple[int | None, str], EvalFileError] = {}
    for error in exc.errors(include_url=False):
        problem = _schema_error(path, document, error)
        found.setdefault((problem.line, problem.message), problem)
    return sorted(found.values(), key=lambda problem: problem.line or 0)


def _schema_error(path: Path, document: LocatedDocument, error: Any) -> EvalFileError:
    loc = tuple(error["loc"])
    message = error["msg"].removeprefix("Value error, ")
    cause = error.get("ctx", {}).get("error")
    if isinstance(cause, AssertionItemError):
        loc = (*loc, *cause.loc)
    if error["type"] == "extra_forbidden":
        message = f"unknown key {loc[-1]!r}{_turn_hint(loc)}{_mcp_hint(loc)}"
        where = ".".join(str(part) for part in loc[:-1]) or "top level"
    else:
        where = _where(loc, document, error["type"]) or "file"
    return EvalFileError(path, document.line_of(loc), f"{where}: {message}")


def _turn_hint(loc: tuple[Any, ...]) -> str:
    """The turn key that an unknown key inside ``turns:`` (or ``simulated_user:``) is a typo
    of, as a hint."""
    from .turns import SIMULATED_USER_KEYS, turn_key_hint

    if len(loc) >= 2 and loc[-2] == "simulated_user":
        return turn_key_hint(str(loc[-1]), SIMULATED_USER_KEYS)
    if len(loc) < 3 or loc[-3] != "turns":
        return ""
    return turn_key_hint(str(loc[-1]))


def _mcp_hint(loc: tuple[Any, ...]) -> str:
    """The ``mcp_servers:`` entry key that an unknown key there is a typo of, as a hint."""
    from .turns import turn_key_hint

    if len(loc) < 3 or loc[-3] != "mcp_servers":
        return ""
    return turn_key_hint(str(loc[-1]), tuple(McpServerSpec.model_fields))


def _where(loc: tuple[Any, ...], document: LocatedDocument, error_type: str) -> str:
    """``loc`` as dotted text, without the union members pydantic appends (``expected.str``)."""
    if error_type != "missing":  # a missing key is, rightly, not in the file
        known = next(end for end in range(len(loc), -1, -1) if loc[:end] in document.lines)
        loc = loc[:known]
    return ".".join(str(part) for part in loc)
