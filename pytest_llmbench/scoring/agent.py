"""Assertions on what an agent left behind: files in its workdir, commands, its tool calls.

An agent case's ``assert:`` may mix these with the answer checks of
:mod:`pytest_llmbench.scoring.assertions`. :func:`parse_agent_assertion` turns one item into an
:class:`AgentCheck` at collection time (raising :class:`~pytest_llmbench.scoring.assertions.
AssertionSpecError`, a ValueError naming the offending key as ``.field``), and
:func:`evaluate_agent` checks it against an :class:`AgentOutcome`, giving a ``Verdict``.

Every type may be negated with ``not-``. As with the answer checks, trouble that is not about the
agent's work (a path that escapes the workdir, a file to inspect that is missing, a command that
could not run or timed out) fails the check whether it is negated or not: ``not-file-contains``
on a deleted file must not pass.
"""

from __future__ import annotations

import copy
import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..agent import ToolError, resolve_inside
from .base import AssertionSpecError, Verdict, is_number, quoted, regex_search, valid_regex
from .trajectory import (
    ARGS_MATCH_MODES,
    SEQUENCE_MODES,
    ExpectedStep,
    describe_match,
    match_sequence,
)

if TYPE_CHECKING:
    from ..agent import AgentRun, Sandbox, ToolCall

#: The agent assertion types; each may also be written with a ``not-`` prefix.
AGENT_TYPES: frozenset[str] = frozenset(
    {
        "file-exists",
        "file-contains",
        "file-matches",
        "command",
        "tool-called",
        "tool-sequence",
        "tool-args",
        "max-turns",
        "tool-count",
    }
)
#: The keys an agent assertion may have besides ``type``, ``value`` and ``weight``.
AGENT_KEYS: frozenset[str] = frozenset(
    {"path", "exit_code", "output_contains", "args", "timeout", "mode", "min", "max"}
)

#: Which of :data:`AGENT_KEYS` each type takes.
_TYPE_KEYS: dict[str, frozenset[str]] = {
    "file-exists": frozenset({"path"}),
    "file-contains": frozenset({"path"}),
    "file-matches": frozenset({"path"}),
    "command": frozenset({"exit_code", "output_contains", "timeout"}),
    "tool-called": frozenset(),
    "tool-sequence": frozenset({"mode"}),
    "tool-args": frozenset({"args"}),
    "max-turns": frozenset(),
    "tool-count": frozenset({"min", "max"}),
}
_OUTPUT_SHOWN = 200


@dataclasses.dataclass(frozen=True)
class AgentOutcome:
    """What one agent item left behind, for its checks to inspect."""

    workdir: Path  #: the item's workdir, as the agent left it
    run: AgentRun  #: the loop's answer, turns and tool calls
    sandbox: Sandbox  #: runs ``command`` checks, confined as the agent's own commands were


@dataclasses.dataclass(frozen=True)
class AgentCheck:
    """One parsed agent ``assert:`` item."""

    type: str  #: as written, e.g. ``not-file-exists``
    base_type: str  #: without the ``not-`` prefix
    negate: bool  #: whether the ``not-`` prefix was given
    #: the value, normalised: a tool-name list becomes a tuple, max-turns an int; for
    #: file-exists without ``path`` the path; None when only ``path`` was given
    value: Any
    weight: float = 1.0  #: weight in the case score, >= 0
    path: str | None = None  #: the file the file-* types inspect, relative to the workdir
    exit_code: int = 0  #: the exit code a ``command`` must end with
    output_contains: str | None = None  #: text a ``command``'s stdout or stderr must contain
    #: the arguments (key -> value) a ``tool-args`` call must include; strings match as substrings
    args: Mapping[str, Any] | None = None
    timeout: float | None = None  #: seconds a ``command`` may run; None: the sandbox's limit
    #: a ``tool-sequence``'s steps (names, or names with ``args`` and ``args_match``)
    steps: tuple[ExpectedStep, ...] | None = None
    mode: str = SEQUENCE_MODES[0]  #: how a ``tool-sequence``'s steps pair with the calls
    min: int | None = None  #: the fewest calls a ``tool-count`` allows; None: no lower bound
    max: int | None = None  #: the most calls a ``tool-count`` allows; None: no upper bound


class _CheckFailed(Exception):
    """The check could not be made (not a fault of the agent's work); the message says why."""


class SandboxFailure(Exception):
    """The sandbox could not start a ``command`` check's command: no verdict on the agent's
    work can be given, and the item is an error of kind ``sandbox`` (the message says why)."""


@dataclasses.dataclass(frozen=True)
class _Result:
    passed: bool
    reason: str


# --- parsing ---------------------------------------------------------------------------------


def parse_agent_assertion(raw: Mapping[str, Any]) -> AgentCheck:
    """Parse one agent ``assert:`` item (a mapping with ``type`` and its keys).

    Raises :class:`~pytest_llmbench.scoring.assertions.AssertionSpecError` naming the offending key.
    """
    type_name, base = _split_type(raw.get("type"))
    allowed = {"type", "value", "weight", *_TYPE_KEYS[base]}
    unknown = sorted(str(key) for key in raw if key not in allowed)
    if unknown:
        names = ", ".join(repr(key) for key in unknown)
        message = f"unknown key {names} for {base}; allowed keys: {', '.join(sorted(allowed))}"
        raise AssertionSpecError(message, unknown[0])
    return AgentCheck(
        type=type_name,
        base_type=base,
        negate=type_name != base,
        value=_PARSE_VALUE[base](base, raw),
        weight=_weight(raw),
        path=_path_key(base, raw),
        exit_code=_exit_code(raw),
        output_contains=_optional_text(raw, "output_contains"),
        args=_args(raw) if base == "tool-args" else None,
        timeout=_timeout(raw),
        steps=_steps(raw["value"]) if base == "tool-sequence" else None,
        mode=_sequence_mode(raw),
        min=_count_bound(raw, "min"),
        max=_count_bound(raw, "max"),
    )


def _split_type(type_name: Any) -> tuple[str, str]:
    if isinstance(type_name, str) and type_name.removeprefix("not-") in AGENT_TYPES:
        return type_name, type_name.removeprefix("not-")
    known = ", ".join(sorted(AGENT_TYPES))
    raise AssertionSpecError(f"{type_name!r} is not an agent check ({known})", "type")


def _weight(raw: Mapping[str, Any]) -> float:
    value = raw.get("weight", 1.0)
    if not is_number(value) or not math.isfinite(value) or value < 0:
        raise AssertionSpecError(f"weight must be a number >= 0, got {value!r}", "weight")
    return float(value)


def _text(base: str, key: str, value: Any) -> str:
    if isinstance(value, str) and value:
        return value
    if is_number(value):  # YAML reads `value: 42` as an int
        return str(value)
    raise AssertionSpecError(f"{base} needs a non-empty string {key}, got {value!r}", key)


def _optional_text(raw: Mapping[str, Any], key: str) -> str | None:
    return None if raw.get(key) is None else _text("command", key, raw[key])


def _path_key(base: str, raw: Mapping[str, Any]) -> str | None:
    if "path" in raw:
        return _text(base, "path", raw["path"])
    if base in ("file-contains", "file-matches"):
        raise AssertionSpecError(f"{base} needs a 'path' (the file to inspect)", "path")
    return None


def _file_exists_value(base: str, raw: Mapping[str, Any]) -> str | None:
    if "path" in raw and "value" in raw:
        raise AssertionSpecError(f"{base} takes a 'path' or a 'value', not both", "value")
    if "path" in raw:
        return None
    if raw.get("value") is None:
        raise AssertionSpecError(f"{base} needs a 'path' (or the path as its 'value')", "path")
    return _text(base, "value", raw["value"])  # the path written as the value


def _text_value(base: str, raw: Mapping[str, Any]) -> str:
    return _text(base, "value", raw.get("value"))


def _regex_value(base: str, raw: Mapping[str, Any]) -> str:
    return valid_regex(_text_value(base, raw))


def _names(base: str, value: Any, *, single: bool) -> str | tuple[str, ...]:
    """One tool name (when ``single`` allows it) or a non-empty list of them."""
    if single and isinstance(value, str) and value:
        return value
    if isinstance(value, list) and value and all(isinstance(v, str) and v for v in value):
        return tuple(value)
    what = "a tool name or a non-empty list of them" if single else "a non-empty list of names"
    raise AssertionSpecError(f"{base} needs {what}, got {value!r}", "value")


def _tool_called_value(base: str, raw: Mapping[str, Any]) -> str | tuple[str, ...]:
    return _names(base, raw.get("value"), single=True)


def _tool_sequence_value(base: str, raw: Mapping[str, Any]) -> tuple[str, ...]:
    """The steps' names; each step is a name or a ``{name, args, args_match}`` mapping."""
    value = raw.get("value")
    if isinstance(value, list) and value:
        return tuple(_step(base, item).name for item in value)
    raise AssertionSpecError(
        f"{base} needs a non-empty list of names or steps, got {value!r}", "value"
    )


def _steps(value: list[Any]) -> tuple[ExpectedStep, ...]:
    return tuple(_step("tool-sequence", item) for item in value)


def _step(base: str, item: Any) -> ExpectedStep:
    """One step: ``name`` or ``{name, args, args_match}`` (``args_match`` default ``exact``)."""
    if isinstance(item, str) and item:
        return ExpectedStep(item)
    if not isinstance(item, Mapping):
        raise AssertionSpecError(f"{base} steps are tool names or mappings, got {item!r}", "value")
    unknown = sorted(str(key) for key in item if key not in ("name", "args", "args_match"))
    if unknown:
        raise AssertionSpecError(
            f"unknown step key {unknown[0]!r} (name, args, args_match)", "value"
        )
    name, args, mode = item.get("name"), item.get("args"), item.get("args_match", "exact")
    if not (isinstance(name, str) and name):
        raise AssertionSpecError(f"a {base} step needs a tool 'name', got {item!r}", "value")
    if args is not None and not (
        isinstance(args, Mapping) and all(isinstance(k, str) for k in args)
    ):
        raise AssertionSpecError(f"a step's args must be a mapping, got {args!r}", "value")
    if mode not in ARGS_MATCH_MODES:
        known = ", ".join(ARGS_MATCH_MODES)
        raise AssertionSpecError(f"unknown args_match {mode!r} ({known})", "value")
    return ExpectedStep(name, dict(args) if args is not None else None, mode)


def _sequence_mode(raw: Mapping[str, Any]) -> str:
    mode = raw.get("mode", SEQUENCE_MODES[0])
    if mode in SEQUENCE_MODES:
        return str(mode)
    raise AssertionSpecError(f"unknown mode {mode!r} ({', '.join(SEQUENCE_MODES)})", "mode")


def _tool_count_value(base: str, raw: Mapping[str, Any]) -> str | None:
    """The tool whose calls are counted; None counts every call."""
    if "min" not in raw and "max" not in raw:
        raise AssertionSpecError(f"{base} needs 'min', 'max' or both", "min")
    low, high = _count_bound(raw, "min"), _count_bound(raw, "max")
    if low is not None and high is not None and low > high:
        raise AssertionSpecError(f"{base}: min {low} is above max {high}", "min")
    return None if raw.get("value") is None else _text(base, "value", raw["value"])


def _count_bound(raw: Mapping[str, Any], key: str) -> int | None:
    value = raw.get(key)
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    raise AssertionSpecError(f"{key} must be a whole number >= 0, got {value!r}", key)


def _max_turns_value(base: str, raw: Mapping[str, Any]) -> int:
    value = raw.get("value")
    if isinstance(value, int) and not isinstance(value, bool) and value >= 1:
        return value
    raise AssertionSpecError(f"{base} needs a whole number >= 1, got {value!r}", "value")


def _exit_code(raw: Mapping[str, Any]) -> int:
    value = raw.get("exit_code", 0)
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= 255:
        return value
    raise AssertionSpecError(f"exit_code must be a whole number 0..255, got {value!r}", "exit_code")


def _args(raw: Mapping[str, Any]) -> dict[str, Any]:
    value = raw.get("args")
    if isinstance(value, Mapping) and value and all(isinstance(key, str) for key in value):
        return dict(value)
    message = f"tool-args needs 'args': a mapping of argument names to values, got {value!r}"
    raise AssertionSpecError(message, "args")


def _timeout(raw: Mapping[str, Any]) -> float | None:
    value = raw.get("timeout")
    if value is None:
        return None
    if is_number(value) and math.isfinite(value) and value > 0:
        return float(value)
    raise AssertionSpecError(f"timeout must be a number of seconds > 0, got {value!r}", "timeout")


_PARSE_VALUE: dict[str, Callable[[str, Mapping[str, Any]], Any]] = {
    "file-exists": _file_exists_value,
    "file-contains": _text_value,
    "file-matches": _regex_value,
    "command": _text_value,
    "tool-called": _tool_called_value,
    "tool-sequence": _tool_sequence_value,
    "tool-args": _text_value,
    "max-turns": _max_turns_value,
    "tool-count": _tool_count_value,
}


# --- evaluation ------------------------------------------------------------------------------


def evaluate_agent(check: AgentCheck, outcome: AgentOutcome) -> Verdict:
    """Check ``outcome`` against ``check``. Raises :class:`SandboxFailure` alone, when the
    sandbox could not start a command (a set-up problem, not a verdict)."""
    try:
        result = _CHECKS[check.base_type](check, outcome)
    except SandboxFailure:
        raise
    except _CheckFailed as exc:
        return Verdict(check.type, False, 0.0, check.weight, str(exc))
    except Exception as exc:  # a verdict, not a crash: the item's other checks still count
        reason = f"{check.type} could not be checked: {type(exc).__name__}: {exc}"
        return Verdict(check.type, False, 0.0, check.weight, reason)
    if check.negate:
        result = _Result(not result.passed, f"negated: {result.reason}")
    return Verdict(check.type, result.passed, float(result.passed), check.weight, result.reason)


def _result(passed: bool, if_passed: str, if_failed: str) -> _Result:
    return _Result(passed, if_passed if passed else if_failed)


def _file(check: AgentCheck, outcome: AgentOutcome) -> tuple[str, Path]:
    """The path as written and where it is inside the workdir; escaping fails the check."""
    raw = check.path if check.path is not None else str(check.value)
    try:
        return raw, resolve_inside(outcome.workdir, raw)
    except ToolError as exc:
        raise _CheckFailed(f"{check.type}: {exc}") from None


def _file_text(check: AgentCheck, outcome: AgentOutcome) -> tuple[str, str]:
    raw, path = _file(check, outcome)
    if not path.is_file():
        raise _CheckFailed(f"{raw} is not a file in the workdir")
    return raw, path.read_text(encoding="utf-8", errors="replace")


def _check_file_exists(check: AgentCheck, outcome: AgentOutcome) -> _Result:
    raw, path = _file(check, outcome)
    kind = "folder" if path.is_dir() else "file"
    return _result(path.exists(), f"{raw} exists ({kind})", f"{raw} does not exist")


def _check_file_contains(check: AgentCheck, outcome: AgentOutcome) -> _Result:
    raw, text = _file_text(check, outcome)
    passed = check.value in text
    shown = f"{raw} ({len(text)} chars: {quoted(text)})"
    return _result(
        passed,
        f"{raw} contains {quoted(check.value)}",
        f"{shown} does not contain {quoted(check.value)}",
    )


def _check_file_matches(check: AgentCheck, outcome: AgentOutcome) -> _Result:
    raw, text = _file_text(check, outcome)
    passed = regex_search(check.value, text)
    return _result(
        passed,
        f"{raw} matches {quoted(check.value)}",
        f"no match for {quoted(check.value)} in {raw}",
    )


def _check_command(check: AgentCheck, outcome: AgentOutcome) -> _Result:
    result = _sandbox_for(check, outcome.sandbox).run(check.value)
    output = result.stdout + result.stderr
    if result.error is not None:
        raise SandboxFailure(f"command {quoted(check.value)} could not run: {result.error}")
    if result.timed_out or result.exit_code is None:
        raise _CheckFailed(
            f"command {quoted(check.value)} timed out after {result.duration_s:.1f}s"
        )
    shown = f"exit code {result.exit_code}; output: {quoted(output.strip(), _OUTPUT_SHOWN)}"
    if result.exit_code != check.exit_code:
        return _Result(False, f"{shown} (wanted exit code {check.exit_code})")
    if check.output_contains is not None and check.output_contains not in output:
        return _Result(False, f"{shown} (lacks {quoted(check.output_contains)})")
    return _Result(True, shown)


def _sandbox_for(check: AgentCheck, sandbox: Sandbox) -> Sandbox:
    """The item's sandbox, with the check's own wall-clock limit when it sets one."""
    if check.timeout is None:
        return sandbox
    # A copy keeps everything else the item's sandbox was given (mode, PATH prefix).
    own = copy.copy(sandbox)
    own.limits = dataclasses.replace(sandbox.limits, timeout_s=check.timeout)
    return own


def _calls_shown(calls: Sequence[ToolCall]) -> str:
    names = ", ".join(call.name for call in calls)
    return quoted(names, _OUTPUT_SHOWN) if calls else "no tool calls"


def _check_tool_called(check: AgentCheck, outcome: AgentOutcome) -> _Result:
    names = (check.value,) if isinstance(check.value, str) else check.value
    counts = outcome.run.tool_counts()
    missing = [name for name in names if not counts.get(name)]
    called = ", ".join(f"{name} x{counts[name]}" for name in names if counts.get(name))
    calls = _calls_shown(outcome.run.tool_calls)
    return _result(
        not missing, f"called {called}", f"{', '.join(missing)} not called (calls: {calls})"
    )


@dataclasses.dataclass(frozen=True)
class _UnreadCall:
    """A call whose arguments could not be read: it matches no expected arguments."""

    name: str
    arguments: None = None


def _as_made(call: ToolCall) -> ToolCall | _UnreadCall:
    return call if call.readable else _UnreadCall(call.name)


def _check_tool_sequence(check: AgentCheck, outcome: AgentOutcome) -> _Result:
    assert check.steps is not None  # the parser gives them for tool-sequence
    calls = [_as_made(call) for call in outcome.run.tool_calls]
    match = match_sequence(check.steps, calls, check.mode)
    wanted = " -> ".join(step.shown() for step in check.steps)
    how = describe_match(match, check.steps, calls)
    shown = _calls_shown(outcome.run.tool_calls)
    return _result(
        match.passed,
        f"calls follow {wanted} ({how})",
        f"calls {shown} do not follow {wanted} ({how})",
    )


def _check_tool_args(check: AgentCheck, outcome: AgentOutcome) -> _Result:
    assert check.args is not None  # the parser requires them for tool-args
    calls = [call for call in outcome.run.tool_calls if call.name == check.value]
    wanted = ", ".join(f"{key}={value!r}" for key, value in check.args.items())
    if not calls:
        shown = _calls_shown(outcome.run.tool_calls)
        return _Result(False, f"{check.value} not called (calls: {shown})")
    matching = [
        call
        for call in calls
        if all(_arg_matches(call.arguments, key, want) for key, want in check.args.items())
    ]
    if matching:
        # The model asked for it either way; a refusal is worth knowing when reading the reason.
        call = next((call for call in matching if not call.error), matching[0])
        refused = f" (the tool refused it: {quoted(call.result)})" if call.error else ""
        return _Result(True, f"{check.value} called (turn {call.turn}) with {wanted}{refused}")
    seen = "; ".join(repr(call.arguments) for call in calls)
    return _Result(False, f"no {check.value} call had {wanted} (got {quoted(seen, _OUTPUT_SHOWN)})")


def _arg_matches(arguments: Mapping[str, Any], key: str, want: Any) -> bool:
    """A string matches as a substring (``hello.txt`` in ``./hello.txt``), others by equality."""
    if key not in arguments:
        return False
    got = arguments[key]
    if isinstance(want, str):
        return isinstance(got, str) and want in got
    return bool(got == want)


def _check_max_turns(check: AgentCheck, outcome: AgentOutcome) -> _Result:
    turns = outcome.run.turns
    return _result(
        turns <= check.value,
        f"{turns} turns <= {check.value}",
        f"{turns} turns > {check.value} (stopped: {outcome.run.stopped})",
    )


def _check_tool_count(check: AgentCheck, outcome: AgentOutcome) -> _Result:
    return _tool_count([call.name for call in outcome.run.tool_calls], check)


def _tool_count(names: Sequence[str], check: AgentCheck) -> _Result:
    """``tool-count`` on the names of the tools called, in order: an agent run's or a
    function-calling reply's."""
    counted = [name for name in names if check.value is None or name == check.value]
    what = f"{check.value} calls" if check.value is not None else "tool calls"
    low = check.min if check.min is not None else 0
    high = "" if check.max is None else str(check.max)
    inside = low <= len(counted) and (check.max is None or len(counted) <= check.max)
    shown = f"{len(counted)} {what}, wanted {low}..{high}"
    called = quoted(", ".join(names), _OUTPUT_SHOWN) if names else "no tool calls"
    return _result(inside, shown, f"{shown} (calls: {called})")


def evaluate_reply_tool_count(check: AgentCheck, names: Sequence[str]) -> Verdict:
    """``tool-count`` on a function-calling reply's calls (``names``, in order): no agent run,
    the same check."""
    result = _tool_count(names, check)
    if check.negate:
        result = _Result(not result.passed, f"negated: {result.reason}")
    return Verdict(check.type, result.passed, float(result.passed), check.weight, result.reason)


_CHECKS: dict[str, Callable[[AgentCheck, AgentOutcome], _Result]] = {
    "file-exists": _check_file_exists,
    "file-contains": _check_file_contains,
    "file-matches": _check_file_matches,
    "command": _check_command,
    "tool-called": _check_tool_called,
    "tool-sequence": _check_tool_sequence,
    "tool-args": _check_tool_args,
    "max-turns": _check_max_turns,
    "tool-count": _check_tool_count,
}
