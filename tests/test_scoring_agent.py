"""The agent assertions: files in the workdir, commands in the sandbox, the agent's tool calls."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
from conftest import Bench, Rule

from pytest_llmbench.agent.limits import SandboxLimits
from pytest_llmbench.agent.loop import AgentRun, ToolCall
from pytest_llmbench.agent.process import CommandResult
from pytest_llmbench.agent.sandbox import Sandbox
from pytest_llmbench.models.providers.completion import Usage
from pytest_llmbench.scoring.agent import AgentOutcome, SandboxFailure, evaluate_agent
from pytest_llmbench.scoring.agent_parse import (
    AGENT_KEYS,
    AGENT_TYPES,
    AgentCheck,
    parse_agent_assertion,
)
from pytest_llmbench.scoring.assertions import AssertionSpecError, Verdict, parse_assertion
from pytest_llmbench.scoring.trajectory import ExpectedStep
from pytest_llmbench.spec.load import load_spec
from pytest_llmbench.spec.resolved import EvalFileError

#: The calls of the hand-made run: (name, arguments), one per turn; turn 5 is the answer.
CALLS: list[tuple[str, dict[str, Any]]] = [
    ("list_dir", {"path": "."}),
    ("read_file", {"path": "./src/app.py"}),
    ("write_file", {"path": "out/result.txt", "content": "done", "count": 3}),
    ("read_file", {"path": "hello.txt"}),
]


def make_run(calls: list[tuple[str, dict[str, Any]]] = CALLS, turns: int = 5) -> AgentRun:
    """A finished run whose tool calls are ``calls``, one per turn."""
    tool_calls = tuple(
        ToolCall(turn=n, name=name, arguments=args, result="ok", error=False)
        for n, (name, args) in enumerate(calls, start=1)
    )
    return AgentRun(
        answer="done",
        turns=turns,
        tool_calls=tool_calls,
        transcript=(),
        stopped="answer",
        shimmed=True,
        usage=Usage(input_tokens=100, output_tokens=20, latency_s=1.0),
        retries=0,
        cached=False,
    )


@pytest.fixture
def agent_dir(tmp_path: Path) -> Path:
    """A workdir as an agent might leave it, beside a file outside it."""
    root = tmp_path / "workdir"
    (root / "src").mkdir(parents=True)
    (root / "docs").mkdir()
    (root / "hello.txt").write_text("hello world\n", encoding="utf-8")
    (root / "src" / "app.py").write_text("def main():\n    return 42\n", encoding="utf-8")
    (tmp_path / "outside.txt").write_text("secret\n", encoding="utf-8")
    (root / "leak.txt").symlink_to(tmp_path / "outside.txt")
    return root


@pytest.fixture
def outcome(agent_dir: Path) -> AgentOutcome:
    """The hand-made run's outcome, with a real sandbox for ``command``."""
    return AgentOutcome(agent_dir, make_run(), Sandbox(agent_dir, SandboxLimits(), mode="auto"))


def check(raw: dict[str, Any], outcome: AgentOutcome) -> Verdict:
    return evaluate_agent(parse_agent_assertion(raw), outcome)


# (assertion, passed, a fragment of the reason): every type, passing and failing.
CASES: list[tuple[dict[str, Any], bool, str]] = [
    ({"type": "file-exists", "path": "hello.txt"}, True, "hello.txt exists (file)"),
    ({"type": "file-exists", "value": "docs"}, True, "docs exists (folder)"),
    ({"type": "file-exists", "path": "src/../src/app.py"}, True, "exists"),
    ({"type": "file-exists", "path": "missing.txt"}, False, "missing.txt does not exist"),
    ({"type": "file-contains", "path": "hello.txt", "value": "hello"}, True, "contains 'hello'"),
    (
        {"type": "file-contains", "path": "hello.txt", "value": "bye"},
        False,
        "does not contain 'bye'",
    ),
    ({"type": "file-matches", "path": "src/app.py", "value": r"return \d+"}, True, "matches"),
    ({"type": "file-matches", "path": "src/app.py", "value": r"^return"}, False, "no match for"),
    ({"type": "tool-called", "value": "write_file"}, True, "called write_file x1"),
    (
        {"type": "tool-called", "value": ["read_file", "list_dir"]},
        True,
        "read_file x2, list_dir x1",
    ),
    (
        {"type": "tool-called", "value": ["read_file", "run_command"]},
        False,
        "run_command not called",
    ),
    (
        {"type": "tool-sequence", "value": ["list_dir", "write_file"]},
        True,
        "list_dir -> write_file",
    ),
    ({"type": "tool-sequence", "value": ["read_file", "read_file"]}, True, "follow"),
    ({"type": "tool-sequence", "value": ["write_file", "list_dir"]}, False, "do not follow"),
    ({"type": "tool-sequence", "value": ["write_file", "write_file"]}, False, "do not follow"),
    ({"type": "tool-args", "value": "read_file", "args": {"path": "app.py"}}, True, "(turn 2)"),
    (
        {"type": "tool-args", "value": "read_file", "args": {"path": "x.py"}},
        False,
        "no read_file call had",
    ),
    ({"type": "tool-args", "value": "write_file", "args": {"count": 3}}, True, "count=3"),
    ({"type": "tool-args", "value": "write_file", "args": {"count": "3"}}, False, "count='3'"),
    ({"type": "tool-args", "value": "write_file", "args": {"mode": "a"}}, False, "no write_file"),
    ({"type": "tool-args", "value": "run_command", "args": {"command": "ls"}}, False, "not called"),
    (
        {"type": "tool-sequence", "value": ["write_file", "list_dir"], "mode": "unordered"},
        False,
        "extra calls read_file",
    ),
    # superset: the calls contain at least the steps (extras allowed); subset: nothing beyond
    # them (steps may be left out). agentevals' names, from the side of the calls made.
    (
        {"type": "tool-sequence", "value": ["write_file", "list_dir"], "mode": "superset"},
        True,
        "superset: 2 of 2 steps matched",
    ),
    (
        {"type": "tool-sequence", "value": ["write_file", "list_dir"], "mode": "subset"},
        False,
        "extra calls read_file(path='./src/app.py'), read_file(path='hello.txt')",
    ),
    (
        {
            "type": "tool-sequence",
            "value": ["list_dir", "read_file", "write_file", "read_file"],
            "mode": "strict",
        },
        True,
        "strict: 4 of 4",
    ),
    (
        {
            "type": "tool-sequence",
            "value": ["list_dir", "write_file", "read_file", "read_file"],
            "mode": "strict",
        },
        False,
        "missing write_file, read_file",
    ),
    (
        {
            "type": "tool-sequence",
            "value": ["read_file", "read_file", "list_dir", "write_file"],
            "mode": "unordered",
        },
        True,
        "unordered: 4 of 4",
    ),
    (
        {
            "type": "tool-sequence",
            "value": ["read_file", "list_dir", "write_file", "run_command"],
            "mode": "subset",
        },
        False,
        "extra calls read_file(path='hello.txt')",
    ),
    (
        {
            "type": "tool-sequence",
            "value": ["read_file", "list_dir", "write_file", "run_command"],
            "mode": "superset",
        },
        False,
        "missing run_command",
    ),
    (
        {
            "type": "tool-sequence",
            "value": ["read_file", "read_file", "list_dir", "write_file", "x"],
            "mode": "subset",
        },
        True,
        "missing x",
    ),
    (
        {
            "type": "tool-sequence",
            "value": ["read_file", "read_file", "list_dir", "write_file", "x"],
            "mode": "superset",
        },
        False,
        "missing x",
    ),
    # Per-step arguments, compared as JSON values: `exact` and `subset` reject a call with an
    # extra argument that `superset` accepts; a string is never a substring match.
    (
        {
            "type": "tool-sequence",
            "value": [{"name": "write_file", "args": {"path": "out/result.txt"}}],
        },
        False,
        "missing write_file(path='out/result.txt')",
    ),
    (
        {
            "type": "tool-sequence",
            "value": [
                {"name": "write_file", "args": {"path": "out/result.txt"}, "args_match": "superset"}
            ],
        },
        True,
        "matched write_file(path='out/result.txt')=call 3",
    ),
    (
        {
            "type": "tool-sequence",
            "value": [
                {"name": "write_file", "args": {"path": "out/result.txt"}, "args_match": "subset"}
            ],
        },
        False,
        "missing write_file(path='out/result.txt')",
    ),
    (
        {
            "type": "tool-sequence",
            "value": [
                {
                    "name": "write_file",
                    "args": {"path": "out/result.txt", "content": "done", "count": 3, "mode": "w"},
                    "args_match": "subset",
                }
            ],
        },
        True,
        "=call 3",
    ),
    (
        {
            "type": "tool-sequence",
            "value": [
                {"name": "read_file", "args": {"path": "hello.txt"}},
                {"name": "read_file", "args": {"path": "app.py"}},
            ],
            "mode": "unordered",
        },
        False,
        "missing read_file(path='app.py')",
    ),
    (
        {
            "type": "tool-sequence",
            "value": ["read_file", {"name": "read_file", "args": {"path": "./src/app.py"}}],
            "mode": "superset",
        },
        True,
        "read_file=call 4",
    ),
    (
        {
            "type": "tool-sequence",
            "value": ["read_file", {"name": "read_file", "args": {"path": "./src/app.py"}}],
            "mode": "subset",
        },
        False,
        "extra calls list_dir(path='.'), write_file(",
    ),
    ({"type": "tool-count", "value": "read_file", "min": 2, "max": 2}, True, "2 read_file calls"),
    ({"type": "tool-count", "max": 3}, False, "4 tool calls, wanted 0..3"),
    ({"type": "tool-count", "min": 1}, True, "4 tool calls, wanted 1.."),
    ({"type": "tool-count", "value": "run_command", "min": 1}, False, "0 run_command calls"),
    ({"type": "max-turns", "value": 5}, True, "5 turns <= 5"),
    ({"type": "max-turns", "value": 4}, False, "5 turns > 4 (stopped: answer)"),
]


@pytest.mark.parametrize(("raw", "passed", "reason"), CASES)
def test_every_type_passes_and_fails(
    raw: dict[str, Any], passed: bool, reason: str, outcome: AgentOutcome
) -> None:
    verdict = check(raw, outcome)
    assert (verdict.passed, verdict.score) == (passed, float(passed)), verdict.reason
    assert reason in verdict.reason
    assert verdict.type == raw["type"]


def test_cases_cover_every_type() -> None:
    assert {raw["type"] for raw, _, _ in CASES} == AGENT_TYPES - {"command"}  # see COMMANDS
    assert {key for raw, _, _ in CASES for key in raw} - {"type", "value"} <= AGENT_KEYS


@pytest.mark.parametrize(("raw", "passed", "reason"), CASES)
def test_negation_flips_every_type(
    raw: dict[str, Any], passed: bool, reason: str, outcome: AgentOutcome
) -> None:
    verdict = check({**raw, "type": "not-" + raw["type"]}, outcome)
    assert verdict.passed is not passed
    assert verdict.reason == f"negated: {check(raw, outcome).reason}"
    assert verdict.type == "not-" + raw["type"]


def test_weight_is_carried_into_the_verdict(outcome: AgentOutcome) -> None:
    verdict = check({"type": "tool-called", "value": "list_dir", "weight": 2.5}, outcome)
    assert (verdict.passed, verdict.weight) == (True, 2.5)
    assert check({"type": "max-turns", "value": 2, "weight": 0}, outcome).weight == 0.0


def test_a_run_without_tool_calls(agent_dir: Path) -> None:
    empty = AgentOutcome(agent_dir, make_run([], turns=1), Sandbox(agent_dir, SandboxLimits()))
    assert check({"type": "tool-called", "value": "read_file"}, empty).reason == (
        "read_file not called (calls: no tool calls)"
    )
    assert check({"type": "not-tool-sequence", "value": ["read_file"]}, empty).passed


def test_tool_args_prefers_a_call_that_worked_and_says_when_it_was_refused(
    agent_dir: Path,
) -> None:
    refused = ToolCall(1, "write_file", {"path": "/home/hello.txt"}, "error: absolute", True)
    worked = ToolCall(2, "write_file", {"path": "hello.txt"}, "wrote 5 bytes", False)
    raw = {"type": "tool-args", "value": "write_file", "args": {"path": "hello.txt"}}
    sandbox = Sandbox(agent_dir, SandboxLimits())
    only_refused = dataclasses.replace(make_run([]), tool_calls=(refused,))
    verdict = check(raw, AgentOutcome(agent_dir, only_refused, sandbox))
    # The arguments were asked for, so it passes; the reason shows the refusal.
    assert verdict.passed
    assert verdict.reason.endswith(
        "(turn 1) with path='hello.txt' (the tool refused it: 'error: absolute')"
    )
    both = dataclasses.replace(make_run([]), tool_calls=(refused, worked))
    verdict = check(raw, AgentOutcome(agent_dir, both, sandbox))
    assert verdict.reason == "write_file called (turn 2) with path='hello.txt'"


# --- paths that leave the workdir ------------------------------------------------------------

ESCAPES = ["../outside.txt", "/etc/passwd", "leak.txt", "src/../../outside.txt"]


@pytest.mark.parametrize("path", ESCAPES)
@pytest.mark.parametrize("base", ["file-exists", "file-contains", "file-matches"])
def test_escaping_paths_fail_negated_or_not(path: str, base: str, outcome: AgentOutcome) -> None:
    value = {} if base == "file-exists" else {"value": "secret"}
    for type_name in (base, "not-" + base):
        verdict = check({"type": type_name, "path": path, **value}, outcome)
        # A file outside the workdir is neither evidence for nor against the agent's work.
        assert not verdict.passed, verdict.reason
        assert verdict.reason.startswith(f"{type_name}: ")
        assert "negated" not in verdict.reason


def test_the_escape_reason_is_the_tools_refusal(outcome: AgentOutcome) -> None:
    verdict = check({"type": "file-exists", "path": "/etc/passwd"}, outcome)
    assert "/etc/passwd" in verdict.reason and "absolute" in verdict.reason


@pytest.mark.parametrize("type_name", ["file-contains", "not-file-contains", "not-file-matches"])
def test_a_missing_file_fails_negated_or_not(type_name: str, outcome: AgentOutcome) -> None:
    # not-file-contains must not pass because the agent deleted the file.
    verdict = check({"type": type_name, "path": "gone.py", "value": "bug"}, outcome)
    assert (verdict.passed, verdict.reason) == (False, "gone.py is not a file in the workdir")


def test_a_folder_is_not_a_file_to_read(outcome: AgentOutcome) -> None:
    verdict = check({"type": "not-file-contains", "path": "docs", "value": "x"}, outcome)
    assert (verdict.passed, verdict.reason) == (False, "docs is not a file in the workdir")


# --- commands --------------------------------------------------------------------------------

COMMANDS: list[tuple[dict[str, Any], bool, str]] = [
    ({"value": "test -f hello.txt"}, True, "exit code 0; output: ''"),
    ({"value": "cat hello.txt", "output_contains": "hello"}, True, "output: 'hello world'"),
    ({"value": "echo oops >&2; exit 3"}, False, "exit code 3; output: 'oops' (wanted exit code 0)"),
    ({"value": "echo oops >&2; exit 3", "exit_code": 3}, True, "exit code 3"),
    ({"value": "echo fine", "output_contains": "tests passed"}, False, "(lacks 'tests passed')"),
    ({"value": "echo out; echo err >&2", "output_contains": "err"}, True, "exit code 0"),
    ({"value": "test -f missing.txt"}, False, "exit code 1"),
]


@pytest.mark.parametrize(("extra", "passed", "reason"), COMMANDS)
def test_command_runs_in_the_workdir(
    extra: dict[str, Any], passed: bool, reason: str, outcome: AgentOutcome
) -> None:
    verdict = check({"type": "command", **extra}, outcome)
    assert verdict.passed is passed, verdict.reason
    assert reason in verdict.reason
    negated = check({"type": "not-command", **extra}, outcome)
    assert negated.passed is not passed


def test_command_output_is_clipped_in_the_reason(outcome: AgentOutcome) -> None:
    verdict = check({"type": "command", "value": "seq 1 2000"}, outcome)
    assert verdict.passed
    assert len(verdict.reason) < 300 and verdict.reason.endswith("...'")


def test_command_sees_what_the_agent_left(outcome: AgentOutcome, agent_dir: Path) -> None:
    (agent_dir / "test_calc.py").write_text("assert 2 + 3 == 5\nprint('tests passed')\n")
    verdict = check(
        {"type": "command", "value": "python3 test_calc.py", "output_contains": "tests passed"},
        outcome,
    )
    assert verdict.passed, verdict.reason


@pytest.mark.slow
def test_a_command_that_times_out_fails_negated_or_not(outcome: AgentOutcome) -> None:
    for type_name in ("command", "not-command"):
        raw = {"type": type_name, "value": "sleep 30", "timeout": 0.5}
        verdict = check(raw, outcome)
        assert not verdict.passed
        assert verdict.reason.startswith("command 'sleep 30' timed out after")


class FakeSandbox:
    """Stands in for Sandbox where the real one cannot produce the case."""

    def __init__(self, result: CommandResult | Exception) -> None:
        self.result = result
        self.commands: list[str] = []

    def run(self, command: str) -> CommandResult:
        self.commands.append(command)
        if isinstance(self.result, Exception):
            raise self.result
        return self.result


def fake_outcome(agent_dir: Path, result: CommandResult | Exception) -> AgentOutcome:
    return AgentOutcome(agent_dir, make_run(), FakeSandbox(result))  # type: ignore[arg-type]


def test_a_command_the_sandbox_cannot_start_is_no_verdict_negated_or_not(
    agent_dir: Path,
) -> None:
    result = CommandResult(
        exit_code=None,
        stdout="",
        stderr="",
        timed_out=False,
        truncated=False,
        sandboxed=False,
        duration_s=0.0,
        error="bwrap: setting up uid map: Permission denied",
    )
    for type_name in ("command", "not-command"):
        with pytest.raises(SandboxFailure) as failure:
            check({"type": type_name, "value": "make"}, fake_outcome(agent_dir, result))
        assert str(failure.value) == "command 'make' could not run: " + str(result.error)


def test_evaluate_agent_never_raises(agent_dir: Path) -> None:
    outcome = fake_outcome(agent_dir, RuntimeError("sandbox exploded"))
    verdict = check({"type": "not-command", "value": "true", "weight": 2}, outcome)
    assert (verdict.passed, verdict.score, verdict.weight) == (False, 0.0, 2.0)
    assert verdict.reason == "not-command could not be checked: RuntimeError: sandbox exploded"


# --- parsing ---------------------------------------------------------------------------------


def test_parse_normalises_values() -> None:
    check = parse_agent_assertion({"type": "not-tool-sequence", "value": ["a", "b"], "weight": 2})
    steps = (ExpectedStep("a"), ExpectedStep("b"))
    assert check == AgentCheck(
        "not-tool-sequence", "tool-sequence", True, ("a", "b"), 2.0, steps=steps
    )
    step = {"name": "s", "args": {"q": 1}, "args_match": "superset"}
    sequence = parse_agent_assertion({"type": "tool-sequence", "value": [step], "mode": "strict"})
    assert (sequence.value, sequence.mode) == (("s",), "strict")
    assert sequence.steps == (ExpectedStep("s", {"q": 1}, "superset"),)
    count = parse_agent_assertion({"type": "tool-count", "min": 0, "max": 2})
    assert (count.value, count.min, count.max) == (None, 0, 2)
    command = parse_agent_assertion(
        {"type": "command", "value": "make", "exit_code": 2, "output_contains": 7, "timeout": 5}
    )
    assert (command.exit_code, command.output_contains, command.timeout) == (2, "7", 5.0)
    exists = parse_agent_assertion({"type": "file-exists", "path": "a.txt"})
    assert (exists.value, exists.path) == (None, "a.txt")


BAD: list[tuple[Any, str, str]] = [
    ({"type": "contains", "value": "x"}, "type", "'contains' is not an agent check"),
    ({"value": "x"}, "type", "None is not an agent check"),
    (
        {"type": "tool-called", "value": "x", "path": "a"},
        "path",
        "unknown key 'path' for tool-called",
    ),
    ({"type": "command", "value": "true", "args": {}}, "args", "allowed keys: exit_code,"),
    ({"type": "file-exists"}, "path", "file-exists needs a 'path'"),
    (
        {"type": "file-exists", "path": "a", "value": "b"},
        "value",
        "a 'path' or a 'value', not both",
    ),
    ({"type": "file-contains", "value": "x"}, "path", "file-contains needs a 'path'"),
    ({"type": "file-contains", "path": "a"}, "value", "needs a non-empty string value"),
    ({"type": "file-contains", "path": "", "value": "x"}, "path", "non-empty string path"),
    ({"type": "file-matches", "path": "a", "value": "("}, "value", "invalid regex '('"),
    ({"type": "command"}, "value", "command needs a non-empty string value"),
    ({"type": "command", "value": "true", "exit_code": "0"}, "exit_code", "0..255"),
    ({"type": "command", "value": "true", "exit_code": 256}, "exit_code", "0..255"),
    ({"type": "command", "value": "true", "timeout": 0}, "timeout", "seconds > 0"),
    ({"type": "command", "value": "true", "output_contains": []}, "output_contains", "string"),
    ({"type": "tool-called", "value": []}, "value", "a tool name or a non-empty list"),
    ({"type": "tool-called", "value": ["a", 3]}, "value", "a tool name or a non-empty list"),
    ({"type": "tool-sequence", "value": "read_file"}, "value", "a non-empty list of names"),
    ({"type": "tool-sequence", "value": ["a"], "mode": "sideways"}, "mode", "unknown mode"),
    (
        {"type": "tool-sequence", "value": [{"name": "a", "args": {}, "args_match": "fuzzy"}]},
        "value",
        "unknown args_match 'fuzzy' (exact, subset, superset, ignore, allowed)",
    ),
    ({"type": "tool-sequence", "value": [{"args": {}}]}, "value", "needs a tool 'name'"),
    ({"type": "tool-sequence", "value": [{"name": "a", "arg": {}}]}, "value", "step key 'arg'"),
    ({"type": "tool-sequence", "value": [{"name": "a", "args": [1]}]}, "value", "a mapping"),
    ({"type": "tool-sequence", "value": [3]}, "value", "tool names or mappings"),
    ({"type": "tool-args", "value": "a", "mode": "strict"}, "mode", "unknown key 'mode'"),
    ({"type": "tool-count", "value": "a"}, "min", "needs 'min', 'max' or both"),
    ({"type": "tool-count", "min": -1}, "min", "min must be a whole number >= 0"),
    ({"type": "tool-count", "max": 1.5}, "max", "max must be a whole number >= 0"),
    ({"type": "tool-count", "min": 3, "max": 2}, "min", "min 3 is above max 2"),
    ({"type": "tool-args", "value": "read_file"}, "args", "tool-args needs 'args'"),
    ({"type": "tool-args", "value": "read_file", "args": ["path"]}, "args", "a mapping"),
    ({"type": "max-turns", "value": "3"}, "value", "a whole number >= 1"),
    ({"type": "max-turns", "value": 0}, "value", "a whole number >= 1"),
    ({"type": "max-turns", "value": True}, "value", "a whole number >= 1"),
    ({"type": "max-turns", "value": 3, "weight": -1}, "weight", "weight must be a number >= 0"),
    ({"type": "max-turns", "value": 3, "weight": "heavy"}, "weight", "weight must be a number"),
]


@pytest.mark.parametrize(("raw", "field", "message"), BAD)
def test_parse_errors_name_the_key(raw: Any, field: str, message: str) -> None:
    with pytest.raises(AssertionSpecError) as info:
        parse_agent_assertion(raw)
    assert isinstance(info.value, ValueError)
    assert (info.value.field, message in str(info.value)) == (field, True), str(info.value)


def test_the_assertion_parser_hands_agent_types_over() -> None:
    assertion = parse_assertion({"type": "not-tool-called", "value": "run_command", "weight": 2})
    assert (assertion.type, assertion.base_type, assertion.negate) == (
        "not-tool-called",
        "tool-called",
        True,
    )
    assert assertion.weight == 2.0
    assert isinstance(assertion.agent_check, AgentCheck)
    with pytest.raises(AssertionSpecError) as info:
        parse_assertion({"type": "tool-args", "value": "read_file", "arg": {"path": "a"}})
    assert info.value.field == "arg"


# --- trajectory modes on a real agent item --------------------------------------------------

SWAPPED = """
kind: agent
tools: [read_file, write_file]
max_turns: 4
cases:
  - id: in-order
    prompt: Swap the steps.
    assert:
      - {type: tool-sequence, value: [read_file, write_file]}
  - id: unordered
    prompt: Swap the steps.
    assert:
      - type: tool-sequence
        mode: unordered
        value:
          - read_file
          - {name: write_file, args: {path: hello.txt}, args_match: superset}
      - {type: tool-count, value: read_file, min: 1, max: 1}
      - {type: tool-count, max: 2}
  - id: superset-args
    prompt: Swap the steps.
    assert:
      - type: tool-sequence
        value: [{name: write_file, args: {path: hello.txt}, args_match: superset}]
      - type: not-tool-sequence
        value: [{name: write_file, args: {path: hello.txt}, args_match: subset}]
      - {type: tool-sequence, mode: subset, value: [write_file, read_file, list_dir]}
  - id: superset-missing
    prompt: Swap the steps.
    assert:
      - {type: tool-sequence, mode: superset, value: [write_file, read_file, list_dir]}
"""


def test_sequence_modes_on_the_calls_the_agent_loop_made(bench: Bench) -> None:
    """The model writes before it reads: the in-order check fails naming what it matched and
    what it missed, the unordered one passes; `args_match: superset` accepts the write's extra
    argument (`content`) that `subset` rejects; `mode: subset` lets a step be left out, and
    `mode: superset` fails naming it."""
    bench.server.add_rule(Rule(match_last="hello world", reply="Done."))  # read_file's result
    bench.server.add_rule(
        Rule(
            match_last="wrote",
            tool_calls=[{"name": "read_file", "arguments": {"path": "hello.txt"}}],
        )
    )
    bench.server.add_rule(
        Rule(
            match="Swap the steps",
            tool_calls=[
                {"name": "write_file", "arguments": {"path": "hello.txt", "content": "hello world"}}
            ],
        )
    )
    bench.eval_file("agent", SWAPPED)
    result = bench.run("--models=fake", "-n", "0")
    result.assert_outcomes(passed=2, failed=2)
    records = {record["case_id"]: record for record in bench.records()}
    assert records["unordered"]["tool_counts"] == {"write_file": 1, "read_file": 1}
    for case in ("unordered", "superset-args"):
        assert all(verdict["passed"] for verdict in records[case]["assertions"]), case
    negated = records["superset-args"]["assertions"][1]["reason"]
    assert "missing write_file(path='hello.txt')" in negated
    (missing,) = records["superset-missing"]["assertions"]
    assert not missing["passed"]
    assert "superset: 2 of 3 steps matched" in missing["reason"]
    assert "missing list_dir" in missing["reason"]
    (verdict,) = records["in-order"]["assertions"]
    assert not verdict["passed"]
    assert "in-order: 1 of 2 steps matched" in verdict["reason"]
    assert "missing read_file; extra calls read_file(path='hello.txt')" in verdict["reason"]


def test_an_unknown_mode_is_a_collection_error_at_its_line(bench: Bench) -> None:
    bench.eval_file(
        "bad",
        """
kind: agent
tools: [read_file]
cases:
  - id: x
    prompt: hi
    assert:
      - type: tool-sequence
        value: [read_file]
        mode: sideways
""",
    )
    result = bench.run("--models=fake")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        ["*bad.eval.yaml:9: cases.0.assert.0.mode: unknown mode 'sideways' (in-order, strict*"]
    )
    assert "Traceback" not in result.stdout.str()


@pytest.mark.parametrize(
    ("assertion", "message"),
    [
        (
            "{type: tool-sequence, value: [read_file], mode: Superset}",
            "unknown mode 'Superset' (in-order, strict, unordered, subset, superset)",
        ),
        (
            "{type: tool-sequence, value: [{name: read_file, args: {}, args_match: loose}]}",
            "unknown args_match 'loose' (exact, subset, superset, ignore, allowed)",
        ),
        (
            # agentevals sets one argument mode for the whole trajectory; ours is per step.
            "{type: tool-sequence, value: [read_file], args_match: superset}",
            "unknown key 'args_match' for tool-sequence; allowed keys: mode, type, value, weight",
        ),
    ],
)
def test_unknown_modes_are_collection_errors_naming_the_modes(
    tmp_path: Path, assertion: str, message: str
) -> None:
    """An unknown ``mode`` or ``args_match`` stops collection at its line, listing the names."""
    path = tmp_path / "bad.eval.yaml"
    head = "kind: agent\ntools: [read_file]\ncases:\n  - id: x\n    prompt: hi\n    assert:\n"
    path.write_text(f"{head}      - {{type: max-turns, value: 3}}\n      - {assertion}\n")
    with pytest.raises(EvalFileError) as info:
        load_spec(path)
    assert info.value.line == 8, str(info.value)
    assert message in str(info.value)


def test_a_call_whose_arguments_could_not_be_read_matches_no_expected_arguments(
    agent_dir: Path,
) -> None:
    run = make_run([("list_dir", {})])
    unread = dataclasses.replace(run.tool_calls[0], error=True, readable=False)
    sandbox = Sandbox(agent_dir, SandboxLimits())
    broken = AgentOutcome(agent_dir, dataclasses.replace(run, tool_calls=(unread,)), sandbox)
    for args_match, args in (("subset", {"path": "."}), ("allowed", {"path": [".", ""]})):
        raw = {"type": "tool-sequence", "value": [{"name": "list_dir", "args": args,
                                                   "args_match": args_match}]}  # fmt: skip
        assert check(raw, broken).passed is False, args_match
        assert check(raw, AgentOutcome(agent_dir, run, sandbox)).passed is True, args_match
    assert check({"type": "tool-sequence", "value": ["list_dir"]}, broken).passed is True
