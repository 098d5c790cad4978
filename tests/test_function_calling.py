"""Function-calling evals (issue 28, point 2): a plain file's ``tools:`` function definitions
and ``tool_choice``, read and checked at load (spec/functions.py)."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest
from conftest import Bench, Rule

from pytest_llmbench.spec.load import load_spec
from pytest_llmbench.spec.resolved import EvalFileError, LoadedEval

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "unit": {"enum": ["c", "f"]}},
            "required": ["city"],
        },
    },
}
BARE_TIME = {"name": "get_time", "parameters": {"type": "object", "properties": {}}}


def load(tmp_path: Path, text: str) -> LoadedEval:
    path = tmp_path / "calls.eval.yaml"
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return load_spec(path)


def error_of(tmp_path: Path, text: str) -> EvalFileError:
    with pytest.raises(EvalFileError) as info:
        load(tmp_path, text)
    return info.value


def plain_file(tools: str, extra: str = "") -> str:
    return f"tools: {tools}\n{extra}cases:\n  - prompt: Weather in Paris?\n"


def test_inline_definitions_both_shapes_are_normalised(tmp_path: Path) -> None:
    loaded = load(tmp_path, plain_file(json.dumps([WEATHER, BARE_TIME]), "tool_choice: auto\n"))
    assert loaded.functions is not None
    assert loaded.functions.names == ("get_weather", "get_time")
    params = loaded.functions.request_params()
    assert params["tools"][0] == WEATHER
    assert params["tools"][1] == {"type": "function", "function": {**BARE_TIME, "description": ""}}
    assert params["tool_choice"] == "auto"
    assert loaded.agent is None


def test_definitions_from_a_file_and_a_forced_choice(tmp_path: Path) -> None:
    (tmp_path / "tools.json").write_text(json.dumps([WEATHER]), encoding="utf-8")
    choice = "{type: function, function: {name: get_weather}}"
    loaded = load(tmp_path, plain_file("file://tools.json", f"tool_choice: {choice}\n"))
    assert loaded.functions is not None
    assert loaded.functions.request_params() == {
        "tools": [WEATHER],
        "tool_choice": {"type": "function", "function": {"name": "get_weather"}},
    }


def test_the_tools_are_in_the_case_hash(tmp_path: Path) -> None:
    first = load(tmp_path, plain_file(json.dumps([WEATHER]))).cases[0].case_hash
    second = load(tmp_path, plain_file(json.dumps([BARE_TIME]))).cases[0].case_hash
    without = load(tmp_path, "cases:\n  - prompt: Weather in Paris?\n").cases[0].case_hash
    assert len({first, second, without}) == 3


def test_an_agent_file_keeps_tool_names(tmp_path: Path) -> None:
    loaded = load(tmp_path, "kind: agent\ntools: [read_file]\ncases:\n  - prompt: hi\n")
    assert loaded.agent is not None and loaded.agent.tools == ("read_file",)
    assert loaded.functions is None


NOT_A_SCHEMA = {"name": "f", "parameters": {"type": "object", "properties": {"a": {"type": 3}}}}

BAD_INPUT = [
    (
        "parameters not a JSON schema",
        f"tools:\n  - {json.dumps(NOT_A_SCHEMA)}\n",
        2,
        "tools[0]: f: `parameters` is not a JSON schema at properties/a/type",
    ),
    (
        "parameters not an object",
        "tools:\n  - {name: f, parameters: {type: string}}\n",
        2,
        "must describe an object",
    ),
    ("no name", "tools:\n  - {description: x}\n", 2, "needs a `name`"),
    ("unknown key", "tools:\n  - {name: f, params: {}}\n", 2, "unknown key 'params'"),
    (
        "wrong wrapper",
        "tools:\n  - {type: func, function: {name: f}}\n",
        2,
        "expected {type: function",
    ),
    (
        "duplicate name",
        "tools:\n  - {name: f}\n  - {name: g}\n  - {name: f}\n",
        4,
        "tools[2]: duplicate tool name 'f' (first is tools[0])",
    ),
    (
        "choice naming an undeclared tool",
        "tools:\n  - {name: f}\ntool_choice: {type: function, function: {name: g}}\n",
        3,
        "tool_choice names 'g', which is not among the declared tools (f)",
    ),
    (
        "unknown choice word",
        "tools:\n  - {name: f}\ntool_choice: any\n",
        3,
        "tool_choice: expected one of auto, none, required",
    ),
    ("choice without tools", "tool_choice: auto\n", 1, "`tool_choice` needs function definitions"),
    ("agent tool name in a plain file", "tools: [read_file]\n", 1, "needs `kind: agent`"),
    (
        "definition in an agent file",
        "kind: agent\ntools:\n  - {name: f}\n",
        3,
        "function definitions are for plain files",
    ),
    ("missing tools file", "tools: file://nope.json\n", 1, "tools: cannot read 'file://nope.json'"),
    ("tools as a bare string", "tools: get_weather\n", 1, "file://tools.json"),
]


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [case[1:] for case in BAD_INPUT],
    ids=[case[0] for case in BAD_INPUT],
)
def test_bad_definitions_are_errors_at_path_line(
    tmp_path: Path, text: str, line: int, message: str
) -> None:
    error = error_of(tmp_path, text + "cases:\n  - prompt: hi\n")
    assert error.line == line, str(error)
    assert message in str(error)
    assert str(error).startswith(f"{tmp_path / 'calls.eval.yaml'}:{line}: ")


def test_a_bad_definition_is_a_collection_error_without_traceback(
    pytester: pytest.Pytester,
) -> None:
    pytester.makefile(
        ".eval.yaml", calls="tools:\n  - {name: f, parameters: {type: 5}}\ncases:\n  - prompt: hi\n"
    )
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.stdout.fnmatch_lines(
        ["*calls.eval.yaml:2: tools?0?: f: `parameters` is not a JSON schema*"]
    )
    result.stdout.no_fnmatch_line("*Traceback*")
    assert result.ret != 0


# -- the engine: tools offered, calls recorded and not run ------------------------------------

CALLS_EVAL = f"""
tools:
  - {json.dumps(WEATHER)}
  - {json.dumps(BARE_TIME)}
tool_choice: required
cases:
  - id: paris
    prompt: What is the weather in Paris?
    assert: [{{type: not-contains, value: sorry}}]
"""


def _script_weather(bench: Bench, arguments: dict[str, Any] | str) -> None:
    bench.server.add_rule(
        Rule(match="weather in Paris", tool_calls=[{"name": "get_weather", "arguments": arguments}])
    )


@pytest.mark.parametrize("client", ["auto", "litellm"])
def test_tools_are_sent_and_the_calls_recorded_not_run(bench: Bench, client: str) -> None:
    _script_weather(bench, {"city": "Paris"})
    bench.eval_file("calls", CALLS_EVAL)
    result = bench.run("--models=fake", f"--client={client}", "--stream=all")
    result.assert_outcomes(passed=1)  # a reply of tool calls and no text is no error
    (request,) = [r for r in bench.server.requests if r.path.endswith("/chat/completions")]
    assert request.body["tools"] == [
        WEATHER,
        {"type": "function", "function": {**BARE_TIME, "description": ""}},
    ]
    assert request.body["tool_choice"] == "required"
    assert request.body["stream"] is True  # streamed: the calls come as fragments
    (record,) = bench.records()
    assert [(call["name"], json.loads(call["arguments"])) for call in record["tool_calls"]] == [
        ("get_weather", {"city": "Paris"})
    ]
    assert record["tool_call_count"] == 1 and record["tool_counts"] == {"get_weather": 1}
    assert record["agent_steps"] is None and record["timeline"] == []  # not an agent: nothing ran
    assert "tools" not in record["params"]


def test_both_clients_record_the_same_calls(bench: Bench) -> None:
    _script_weather(bench, {"city": "Paris", "unit": "c"})
    bench.eval_file("calls", CALLS_EVAL)
    bench.run("--models=fake").assert_outcomes(passed=1)
    lean = bench.records()[0]["tool_calls"]
    bench.run("--models=fake", "--client=litellm").assert_outcomes(passed=1)
    other = bench.records()[0]["tool_calls"]
    assert [(c["name"], json.loads(c["arguments"])) for c in lean] == [
        (c["name"], json.loads(c["arguments"])) for c in other
    ]
    assert lean and lean[0]["name"] == "get_weather"


def test_the_tools_are_in_the_cache_key_and_calls_replay(bench: Bench) -> None:
    _script_weather(bench, {"city": "Paris"})
    bench.eval_file("calls", CALLS_EVAL)
    bench.run("--models=fake", "--cache=use", "--cache-dir=c").assert_outcomes(passed=1)
    first = bench.records()[0]["tool_calls"]
    calls_before = len(bench.server.requests)
    bench.run("--models=fake", "--cache=replay", "--cache-dir=c").assert_outcomes(passed=1)
    (record,) = bench.records()
    assert record["cached"] is True and record["tool_calls"] == first
    assert len(bench.server.requests) == calls_before
    bench.eval_file("calls", CALLS_EVAL.replace("tool_choice: required", "tool_choice: auto"))
    missed = bench.run("--models=fake", "--cache=replay", "--cache-dir=c")
    missed.assert_outcomes(errors=1)  # other tools offered: another key, no cached answer


# -- the assertions ---------------------------------------------------------------------------

ASSERTED_EVAL = f"""
tools:
  - {json.dumps(WEATHER)}
  - {json.dumps(BARE_TIME)}
cases:
  - id: exact-all
    prompt: weather in Paris (1)
    assert: [{{type: tool-call, value: get_weather, args: {{city: Paris, unit: c}}}}]
  - id: exact-extra
    prompt: weather in Paris (2)
    assert: [{{type: tool-call, value: get_weather, args: {{city: Paris}}}}]
  - id: subset
    prompt: weather in Paris (3)
    assert: [{{type: tool-call, value: get_weather, args: {{city: Paris}}, args_match: subset}}]
  - id: superset
    prompt: weather in Paris (4)
    assert:
      - {{type: tool-call, value: get_weather, args: {{city: Paris, unit: c, days: 3}},
         args_match: superset}}
  - id: subset-fewer
    prompt: weather in Paris (11)
    assert:
      - {{type: tool-call, value: get_weather, args: {{city: Paris, unit: c, days: 3}},
         args_match: subset}}
  - id: superset-extra
    prompt: weather in Paris (12)
    assert: [{{type: tool-call, value: get_weather, args: {{city: Paris}}, args_match: superset}}]
  - id: wrong-value
    prompt: weather in Paris (5)
    assert: [{{type: tool-call, value: get_weather, args: {{city: "Paris", unit: f}},
              args_match: ignore}}]
  - id: other-tool
    prompt: weather in Paris (6)
    assert: [{{type: tool-call, value: get_time}}]
  - id: valid
    prompt: weather in Paris (7)
    assert: [valid-tool-call]
  - id: f1-one
    prompt: weather in Paris (8)
    assert: [{{type: tool-call-f1, value: [{{name: get_weather, args: {{city: Paris}},
              args_match: superset}}]}}]
  - id: f1-half
    prompt: weather in Paris (9)
    assert: [{{type: tool-call-f1, value: [get_weather, get_time]}}]
  - id: no-call
    prompt: weather in Paris (10)
    assert: [no-tool-call]
  - id: invalid
    prompt: bad weather in Paris
    assert: [valid-tool-call]
  - id: quiet
    prompt: Say hello
    assert: [no-tool-call, {{type: tool-call-f1, value: [get_time]}}]
"""

EXPECTED_VERDICTS = {
    "exact-all": (True, 1.0),
    "exact-extra": (False, 0.0),  # exact rejects the extra argument `unit`
    # agentevals' names: superset arguments contain at least the expected ones, subset ones
    # nothing beyond them. The reply's call is get_weather(city=Paris, unit=c).
    "subset": (False, 0.0),  # subset rejects the extra `unit`
    "superset": (False, 0.0),  # superset rejects the missing `days`
    "subset-fewer": (True, 1.0),  # subset accepts the missing `days`
    "superset-extra": (True, 1.0),  # superset accepts the extra `unit`
    "wrong-value": (True, 1.0),  # ignore: any arguments
    "other-tool": (False, 0.0),
    "valid": (True, 1.0),
    "f1-one": (True, 1.0),
    "f1-half": (False, 2 / 3),  # precision 1/1, recall 1/2
    "no-call": (False, 0.0),
    "invalid": (False, 0.0),
}


def test_each_tool_call_assertion_passes_and_fails(bench: Bench) -> None:
    bench.server.add_rule(
        Rule(match="bad weather", tool_calls=[{"name": "get_weather", "arguments": {"unit": "k"}}])
    )
    _script_weather(bench, {"city": "Paris", "unit": "c"})
    bench.server.add_rule(Rule(match="Say hello", reply="Hello!"))
    bench.eval_file("calls", ASSERTED_EVAL)
    bench.run("--models=fake")
    records = {record["case_id"]: record for record in bench.records()}
    for case, (passed, score) in EXPECTED_VERDICTS.items():
        (verdict,) = records[case]["assertions"]
        assert (verdict["passed"], round(verdict["score"], 3)) == (passed, round(score, 3)), case
    invalid = records["invalid"]["assertions"][0]["reason"]
    assert "get_weather" in invalid and "'city' is a required property" in invalid
    assert "no call matched get_weather(city=" in records["exact-extra"]["assertions"][0]["reason"]
    quiet = records["quiet"]["assertions"]
    assert quiet[0]["passed"] is True and quiet[1]["score"] == 0.0
    assert records["quiet"]["tool_calls"] == []


BAD_ASSERTIONS = [
    (
        "undeclared tool",
        "  - {type: tool-call, value: get_tim}\n",
        "tool-call names 'get_tim', which is not among the declared tools (get_weather)",
    ),
    (
        "undeclared in f1",
        "  - {type: tool-call-f1, value: [get_weather, nope]}\n",
        "tool-call-f1 names 'nope'",
    ),
    (
        "unknown args_match",
        "  - {type: tool-call, value: get_weather, args_match: loose}\n",
        "args_match must be one of exact, subset, superset, ignore, allowed, got 'loose'",
    ),
    (
        "unknown args_match in tool-call-f1",
        "  - {type: tool-call-f1, value: [{name: get_weather, args_match: loose}]}\n",
        "args_match must be one of exact, subset, superset, ignore, allowed, got 'loose'",
    ),
    (
        "unknown args_match in tool-calls",
        "  - {type: tool-calls, value: [{name: get_weather, args: {}, args_match: Superset}]}\n",
        "args_match must be one of exact, subset, superset, ignore, allowed, got 'Superset'",
    ),
    (
        "args_match not a name",
        "  - {type: tool-call, value: get_weather, args_match: [superset]}\n",
        "args_match must be one of exact, subset, superset, ignore, allowed, got ['superset']",
    ),
    (
        "mode on tool-calls",  # always unordered: agentevals' trajectory modes are tool-sequence's
        "  - {type: tool-calls, value: [get_weather], mode: superset}\n",
        "unknown key 'mode' in tool-calls; allowed: args, args_match, ",
    ),
    (
        "args not a mapping",
        "  - {type: tool-call, value: get_weather, args: [1]}\n",
        "args must be a mapping",
    ),
    (
        "value on no-tool-call",
        "  - {type: no-tool-call, value: x}\n",
        "no-tool-call takes no value",
    ),
]


@pytest.mark.parametrize(
    ("assertion", "message"),
    [case[1:] for case in BAD_ASSERTIONS],
    ids=[case[0] for case in BAD_ASSERTIONS],
)
def test_bad_tool_call_assertions_are_errors_at_path_line(
    tmp_path: Path, assertion: str, message: str
) -> None:
    text = f"tools:\n  - {json.dumps(WEATHER)}\nassert:\n{assertion}cases:\n  - prompt: hi\n"
    error = error_of(tmp_path, text)
    assert error.line == 4, str(error)
    assert message in str(error)


def test_a_tool_call_assertion_needs_function_definitions(tmp_path: Path) -> None:
    error = error_of(tmp_path, "cases:\n  - prompt: hi\n    assert: [valid-tool-call]\n")
    assert error.line == 3 and "valid-tool-call needs function definitions" in str(error)


def test_tool_count_counts_a_replys_calls(bench: Bench) -> None:
    """The agents' tool-count, one check, also reads a function-calling reply's calls."""
    bench.server.add_rule(
        Rule(
            match="both",
            tool_calls=[
                {"name": "get_weather", "arguments": {"city": "Paris"}},
                {"name": "get_weather", "arguments": {"city": "Rome"}},
                {"name": "get_time", "arguments": {}},
            ],
        )
    )
    bench.eval_file(
        "calls",
        f"""
tools:
  - {json.dumps(WEATHER)}
  - {json.dumps(BARE_TIME)}
cases:
  - id: counts
    prompt: both cities
    assert:
      - {{type: tool-count, min: 3, max: 3}}
      - {{type: tool-count, value: get_weather, min: 2}}
      - {{type: tool-count, value: get_time, max: 0}}
""",
    )
    bench.run("--models=fake")
    (record,) = bench.records()
    verdicts = [(v["passed"], v["reason"]) for v in record["assertions"]]
    assert verdicts[0] == (True, "3 tool calls, wanted 3..3")
    assert verdicts[1] == (True, "2 get_weather calls, wanted 2..")
    assert verdicts[2][0] is False and "1 get_time calls, wanted 0..0" in verdicts[2][1]
    assert record["tool_counts"] == {"get_weather": 2, "get_time": 1}


def test_tool_count_in_a_plain_file_without_tools_still_needs_an_agent(tmp_path: Path) -> None:
    error = error_of(tmp_path, "cases:\n  - prompt: hi\n    assert: [{type: tool-count, max: 1}]\n")
    assert error.line == 3 and "needs `kind: agent`" in str(error)


def test_recorded_calls_are_the_same_under_xdist(bench: Bench) -> None:
    _script_weather(bench, {"city": "Paris", "unit": "c"})
    bench.eval_file("calls", ASSERTED_EVAL)
    bench.run("--models=fake").assert_outcomes(passed=7, failed=7)

    def calls_and_verdicts() -> dict[str, Any]:
        return {
            # the fake server numbers call ids in arrival order, which xdist changes
            r["case_id"]: (
                [(c["name"], c["arguments"]) for c in r["tool_calls"]],
                r["tool_counts"],
                r["assertions"],
            )
            for r in bench.records()
        }

    serial = calls_and_verdicts()
    bench.run_subprocess("--models=fake", "-n", "2").assert_outcomes(passed=7, failed=7)
    assert calls_and_verdicts() == serial
