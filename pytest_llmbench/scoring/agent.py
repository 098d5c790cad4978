"""Assertions on what an agent left behind: files in its workdir, commands, its tool calls.

An agent case's ``assert:`` may mix these with the answer checks of
:mod:`pytest_llmbench.scoring.assertions`. :mod:`.agent_parse` turns one item into an
:class:`AgentCheck` at collection time; here :func:`evaluate_agent` checks it against an
:class:`AgentOutcome`, giving a ``Verdict``.

Every type may be negated with ``not-``. As with the answer checks, trouble that is not about the
agent's work (a path that escapes the workdir, a file to inspect that is missing, a command that
could not run or timed out) fails the check whether it is negated or not: ``not-file-contains``
on a deleted file must not pass.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..agent import ToolRefusal, resolve_inside
from .agent_parse import AgentCheck
from .base import Verdict, quoted, regex_search
from .trajectory import describe_match, match_sequence

if TYPE_CHECKING:
    from ..agent import AgentRun, Sandbox, ToolCall

# What other modules import from here (parsing is .agent_parse's).
__all__ = [
    "AgentOutcome",
    "SandboxFailure",
    "evaluate_agent",
    "evaluate_reply_tool_count",
]


_OUTPUT_SHOWN = 200


@dataclasses.dataclass(frozen=True)
class AgentOutcome:
    """What one agent item left behind, for its checks to inspect."""

    workdir: Path  #: the item's workdir, as the agent left it
    run: AgentRun  #: the loop's answer, turns and tool calls
    sandbox: Sandbox  #: runs ``command`` checks, confined as the agent's own commands were


class _CheckFailed(Exception):
    """The check could not be made (not a fault of the agent's work); the message says why."""


class SandboxFailure(Exception):
    """The sandbox could not start a ``command`` check's command: no verdict on the agent's
    work can be given, and the item is an error of kind ``sandbox`` (the message says why)."""


@dataclasses.dataclass(frozen=True)
class _Result:
    passed: bool
    reason: str


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
    except ToolRefusal as exc:
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
