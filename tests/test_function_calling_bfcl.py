"""Function-calling datasets in BFCL's shape (issue 28, point 2): per-row function definitions
in BFCL's type words (``dataset.tools``), the prompt from the question's messages, and the
expected calls with their allowed values (``dataset.tool_calls``) checked by ``tool-calls``."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest
from conftest import Bench, Rule

from pytest_llmbench.scoring.trajectory import ExpectedStep, args_match
from pytest_llmbench.spec.load import load_spec
from pytest_llmbench.spec.resolved import EvalFileError, LoadedEval

TRIANGLE = {
    "name": "calculate_triangle_area",
    "description": "Calculate the area of a triangle given its base and height.",
    "parameters": {
        "type": "dict",
        "properties": {
            "base": {"type": "integer", "description": "The base of the triangle."},
            "height": {"type": "float", "description": "The height of the triangle."},
            "unit": {"type": "string", "description": "The unit of measure"},
            "corners": {"type": "tuple", "items": {"type": "float"}},
        },
        "required": ["base", "height"],
    },
}
PLAY = {
    "name": "spotify.play",
    "description": "Play tracks of an artist for some minutes.",
    "parameters": {
        "type": "dict",
        "properties": {"artist": {"type": "string"}, "duration": {"type": "integer"}},
        "required": ["artist", "duration"],
    },
}

FETCH = {
    "name": "fetch",
    "parameters": {
        "type": "dict",
        "properties": {"where": {"type": "dict", "properties": {"city": {"type": "string"}}}},
        "required": ["where"],
    },
}


def bfcl_row(row_id: str, question: str, functions: list[Any], truth: list[Any]) -> str:
    """One JSONL row as BFCL writes a question, its functions and its possible answer."""
    question_cell = [[{"role": "user", "content": question}]]
    row = {"id": row_id, "question": question_cell, "function": functions, "ground_truth": truth}
    return json.dumps(row)


SIMPLE = bfcl_row(
    "simple_0",
    "Area of a triangle with base 10 and height 5?",
    [TRIANGLE],
    [{"calculate_triangle_area": {"base": [10], "height": [5], "unit": ["units", ""]}}],
)
PARALLEL = bfcl_row(
    "parallel_0",
    "Play Taylor Swift for 20 minutes and Maroon 5 for 15 minutes.",
    [PLAY],
    [
        {"spotify.play": {"artist": ["Taylor Swift"], "duration": [20]}},
        {"spotify.play": {"artist": ["Maroon 5"], "duration": [15]}},
    ],
)

BFCL_EVAL = """
dataset:
  path: bfcl.jsonl
  id: id
  prompt: question
  tools: {column: function, dialect: bfcl}
  tool_calls: {column: ground_truth, dialect: bfcl}
assert: [tool-calls]
"""


def load(tmp_path: Path, rows: list[str], text: str = BFCL_EVAL) -> LoadedEval:
    (tmp_path / "bfcl.jsonl").write_text("\n".join(rows) + "\n", encoding="utf-8")
    path = tmp_path / "bfcl.eval.yaml"
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return load_spec(path)


def error_of(tmp_path: Path, rows: list[str], text: str = BFCL_EVAL) -> EvalFileError:
    with pytest.raises(EvalFileError) as info:
        load(tmp_path, rows, text)
    return info.value


# -- loading ----------------------------------------------------------------------------------


def test_a_bfcl_row_loads_with_columns_only(tmp_path: Path) -> None:
    loaded = load(tmp_path, [SIMPLE, PARALLEL])
    assert loaded.functions is None  # the tools are the rows'
    simple, parallel = loaded.cases
    assert simple.prompt == "Area of a triangle with base 10 and height 5?"
    assert simple.functions is not None and simple.functions.names == ("calculate_triangle_area",)
    schema = simple.functions.schemas()["calculate_triangle_area"]
    assert schema["type"] == "object"  # BFCL's dict
    properties = schema["properties"]
    assert properties["height"]["type"] == "number"  # BFCL's float
    assert properties["corners"] == {"type": "array", "items": {"type": "number"}}  # tuple
    assert properties["base"]["type"] == "integer" and schema["required"] == ["base", "height"]
    assert parallel.functions is not None and parallel.functions.names == ("spotify.play",)
    (check,) = parallel.assertions
    assert check.type == "tool-calls"
    assert check.value == (
        ExpectedStep("spotify.play", {"artist": ["Taylor Swift"], "duration": [20]}, "allowed"),
        ExpectedStep("spotify.play", {"artist": ["Maroon 5"], "duration": [15]}, "allowed"),
    )


def test_each_rows_tools_are_in_its_case_hash(tmp_path: Path) -> None:
    first = load(tmp_path, [SIMPLE]).cases[0].case_hash
    other = {**TRIANGLE, "description": "Another description."}
    changed = SIMPLE.replace(json.dumps(TRIANGLE), json.dumps(other))
    assert changed != SIMPLE
    assert load(tmp_path, [changed]).cases[0].case_hash != first


def test_a_row_can_give_openai_definitions_and_a_plain_prompt(tmp_path: Path) -> None:
    row = json.dumps(
        {
            "id": "weather",
            "question": "Weather in Paris?",
            "function": [{"type": "function", "function": {"name": "get_weather"}}],
            "ground_truth": [{"get_weather": {}}],
        }
    )
    text = BFCL_EVAL.replace("{column: function, dialect: bfcl}", "function")
    (case,) = load(tmp_path, [row], text).cases
    assert case.prompt == "Weather in Paris?"
    assert case.functions is not None and case.functions.names == ("get_weather",)


BAD_ROWS = [
    (
        "ground truth naming an undeclared tool",
        bfcl_row("r", "q", [PLAY], [{"spotify.pause": {}}]),
        "expected call 0 names 'spotify.pause', which the row does not declare "
        "(its tools: spotify.play)",
    ),
    (
        "allowed values not a list",
        bfcl_row("r", "q", [PLAY], [{"spotify.play": {"artist": "Maroon 5", "duration": [1]}}]),
        "expected call 0 (spotify.play): artist: the allowed values must be a list",
    ),
    (
        "an object argument's allowed value not an object of lists",
        bfcl_row("r", "q", [FETCH], [{"fetch": {"where": [{"city": "Paris"}]}}]),
        "expected call 0 (fetch): where: an allowed object's key 'city' must map to a list of "
        'allowed values, got "Paris"',
    ),
    (
        "an object argument's allowed value a number",
        bfcl_row("r", "q", [FETCH], [{"fetch": {"where": [3]}}]),
        "expected call 0 (fetch): where: an allowed value of an object must be an object",
    ),
    (
        "a call that is not {tool: {args}}",
        bfcl_row("r", "q", [PLAY], [{"spotify.play": {}, "other": {}}]),
        "expected call 0: expected {tool: {argument: [allowed values]}}",
    ),
    (
        "a definition that is not a schema",
        bfcl_row("r", "q", [{"name": "f", "parameters": {"type": "dict", "required": 3}}], []),
        "f: `parameters` is not a JSON schema",
    ),
    (
        "a conversation as the prompt",
        json.dumps(
            {
                "id": "two",
                "question": [[{"role": "user", "content": "a"}, {"role": "user", "content": "b"}]],
                "function": [PLAY],
                "ground_truth": [{"spotify.play": {}}],
            }
        ),
        "a list of chat messages must be one user message",
    ),
]


@pytest.mark.parametrize(
    ("row", "message"), [case[1:] for case in BAD_ROWS], ids=[case[0] for case in BAD_ROWS]
)
def test_a_bad_row_is_an_error_at_the_dataset_line(tmp_path: Path, row: str, message: str) -> None:
    error = error_of(tmp_path, [SIMPLE, row])
    assert f"{tmp_path / 'bfcl.jsonl'}:2: " in str(error), str(error)
    assert message in str(error)


def test_an_unknown_dialect_is_an_error_at_its_line(tmp_path: Path) -> None:
    error = error_of(
        tmp_path,
        [SIMPLE],
        BFCL_EVAL.replace("dialect: bfcl}\n  tool_calls", "dialect: gorilla}\n  tool_calls"),
    )
    assert error.line == 6, str(error)  # the line of `tools:`
    assert "dataset.tools.dialect" in str(error) and "'openai' or 'bfcl'" in str(error)


def test_tool_calls_without_a_value_needs_the_rows_expected_calls(tmp_path: Path) -> None:
    text = BFCL_EVAL.replace("  tool_calls: {column: ground_truth, dialect: bfcl}\n", "")
    error = error_of(tmp_path, [SIMPLE], text)
    assert error.line == 2 and "map them with dataset.tool_calls" in str(error)
    assert "dataset row 'simple_0' (line 1)" in str(error)


def test_a_tool_choice_word_applies_to_every_rows_tools(tmp_path: Path) -> None:
    (case,) = load(tmp_path, [SIMPLE], BFCL_EVAL + "tool_choice: required\n").cases
    assert case.functions is not None and case.functions.tool_choice == "required"
    assert case.functions.request_params()["tool_choice"] == "required"
    forced = (
        BFCL_EVAL + "tool_choice: {type: function, function: {name: calculate_triangle_area}}\n"
    )
    error = error_of(tmp_path, [SIMPLE], forced)
    assert error.line == 9 and "with dataset.tools, `tool_choice` is one of" in str(error)


def test_allowed_values_as_bfcl_reads_them() -> None:
    allowed = {"base": [10], "height": [5.0], "unit": ["units", ""]}
    assert args_match(allowed, {"base": 10, "height": 5}, "allowed")  # unit may be left out
    assert args_match(allowed, {"base": 10.0, "height": 5, "unit": "units"}, "allowed")
    assert not args_match(allowed, {"base": 10, "height": 5, "unit": "cm"}, "allowed")
    assert not args_match(allowed, {"base": 10}, "allowed")  # height is required
    assert not args_match(allowed, {"base": 10, "height": 5, "color": "red"}, "allowed")
    assert not args_match(allowed, {"base": "10", "height": 5}, "allowed")  # JSON values
    assert not args_match({"flag": [1]}, {"flag": True}, "allowed")
    assert args_match({"xs": [[1, 2]]}, {"xs": [1, 2]}, "allowed")  # a list is one value


def test_allowed_values_of_an_object_argument_must_be_objects_of_lists(tmp_path: Path) -> None:
    path = tmp_path / "calls.eval.yaml"
    where = {"type": "object", "properties": {"city": {"type": "string"}}}
    path.write_text(
        f"tools:\n  - {json.dumps({'name': 'f', 'parameters': {'type': 'object', 'properties': {'where': where}}})}\n"
        "assert:\n  - {type: tool-call, value: f, args: {where: [{city: Paris}]}, args_match: allowed}\n"
        "cases:\n  - prompt: hi\n",
        encoding="utf-8",
    )
    with pytest.raises(EvalFileError) as info:
        load_spec(path)
    assert info.value.line == 4, str(info.value)
    assert "tool-call: f: where: an allowed object's key 'city' must map to a list" in str(
        info.value
    )


def test_allowed_shapes_are_checked_against_each_rows_own_schemas(tmp_path: Path) -> None:
    row = bfcl_row("fetch_0", "q", [FETCH], [{"fetch": {"where": [{"city": ["Paris"]}]}}])
    text = BFCL_EVAL.replace(
        "assert: [tool-calls]",
        "assert:\n  - {type: tool-call, value: fetch, args: {where: [{city: Paris}]}, "
        "args_match: allowed}",
    )
    error = error_of(tmp_path, [row], text)
    assert "dataset row 'fetch_0' (line 1): " in str(error), str(error)
    assert "tool-call: fetch: where: an allowed object's key 'city' must map to a list" in str(
        error
    )


def test_tool_calls_without_a_value_on_a_case_written_in_the_file_is_an_error(
    tmp_path: Path,
) -> None:
    own = BFCL_EVAL.replace(
        "assert: [tool-calls]", "cases:\n  - {prompt: hi, assert: [tool-calls]}"
    )
    error = error_of(tmp_path, [SIMPLE], own)
    assert "this case has none: give the calls as its value" in str(error), str(error)
    error = error_of(tmp_path, [SIMPLE], BFCL_EVAL + "cases:\n  - {prompt: hi}\n")
    assert error.line == 8 and "the file's own `cases:` has none" in str(error), str(error)


def test_a_simulated_users_tool_call_check_names_a_declared_tool(tmp_path: Path) -> None:
    path = tmp_path / "sim.eval.yaml"
    path.write_text(
        f"tools:\n  - {json.dumps({'name': 'f'})}\ncases:\n  - simulated_user:\n"
        "      instructions: ask\n      assert: [{type: tool-call, value: g}]\n",
        encoding="utf-8",
    )
    with pytest.raises(EvalFileError) as info:
        load_spec(path)
    assert info.value.line == 6, str(info.value)
    assert "names 'g', which is not among the declared tools (f)" in str(info.value)


@pytest.mark.parametrize(
    ("assertion", "message"),
    [
        (
            "{type: tool-calls, strings: loose}",
            "strings must be one of normalized, exact, got 'loose'",
        ),
        ("{type: no-tool-call, strings: exact}", "'strings' applies to tool-call, tool-calls"),
    ],
)
def test_a_bad_strings_option_is_an_error_at_its_line(
    tmp_path: Path, assertion: str, message: str
) -> None:
    error = error_of(
        tmp_path, [SIMPLE], BFCL_EVAL.replace("assert: [tool-calls]", f"assert: [{assertion}]")
    )
    assert error.line == 8 and message in str(error), str(error)


def test_args_match_allowed_on_tool_call_needs_lists(tmp_path: Path) -> None:
    path = tmp_path / "calls.eval.yaml"
    path.write_text(
        "tools:\n  - {name: f, parameters: {type: object, properties: {x: {type: string}}}}\n"
        "assert:\n  - {type: tool-call, value: f, args: {x: a}, args_match: allowed}\n"
        "cases:\n  - prompt: hi\n",
        encoding="utf-8",
    )
    with pytest.raises(EvalFileError) as info:
        load_spec(path)
    assert info.value.line == 4 and "allowed takes a list of allowed values" in str(info.value)


# -- running: native calls against the fake server -------------------------------------------

WRONG = bfcl_row(
    "simple_1",
    "Area of a triangle with base 3 and height 4?",
    [TRIANGLE],
    [{"calculate_triangle_area": {"base": [3], "height": [4]}}],
)


def test_tool_calls_checks_bfcl_semantics(bench: Bench) -> None:
    bench.server.add_rule(
        Rule(
            match="base 10",
            tool_calls=[
                {"name": "calculate_triangle_area", "arguments": {"base": 10, "height": 5}}
            ],
        )
    )
    bench.server.add_rule(  # the parallel calls in the other order: still all matched
        Rule(
            match="Taylor Swift",
            tool_calls=[
                {"name": "spotify.play", "arguments": {"artist": "Maroon 5", "duration": 15}},
                {"name": "spotify.play", "arguments": {"artist": "Taylor Swift", "duration": 20}},
            ],
        )
    )
    bench.server.add_rule(
        Rule(
            match="base 3",
            tool_calls=[
                {"name": "calculate_triangle_area", "arguments": {"base": 3, "height": 4}},
                {"name": "calculate_triangle_area", "arguments": {"base": 3, "height": 5}},
            ],
        )
    )
    bench.pytester.makefile(".jsonl", bfcl="\n".join([SIMPLE, PARALLEL, WRONG]))
    bench.eval_file("bfcl", BFCL_EVAL)
    bench.run("--models=fake").assert_outcomes(passed=2, failed=1)
    records = {record["case_id"]: record for record in bench.records()}
    assert records["simple_0"]["assertions"][0]["passed"] is True
    assert records["parallel_0"]["assertions"][0]["passed"] is True
    wrong = records["simple_1"]["assertions"][0]
    assert wrong["passed"] is False and wrong["score"] == 0.5  # one of two calls expected
    assert "extra calls calculate_triangle_area(base=3, height=5)" in wrong["reason"]
    sent = {
        request.body["messages"][-1]["content"]: request.body["tools"]
        for request in bench.server.chat_requests()
    }
    assert [tool["function"]["name"] for tool in sent[SIMPLE_QUESTION]] == [
        "calculate_triangle_area"
    ]
    assert [tool["function"]["name"] for tool in sent[PARALLEL_QUESTION]] == ["spotify.play"]
    parameters = sent[SIMPLE_QUESTION][0]["function"]["parameters"]
    assert parameters["type"] == "object" and parameters["properties"]["height"]["type"] == "number"


def test_bfcls_rules_in_a_run_objects_types_and_the_reason(bench: Bench) -> None:
    """An object argument judged key by key, a float for an integer refused, each failure's
    reason naming the argument and BFCL's rule (the whole path: row, reply, record)."""
    rows = [
        bfcl_row("dict_ok", "fetch Paris", [FETCH], [{"fetch": {"where": [{"city": ["Paris"]}]}}]),
        bfcl_row("dict_lists", "fetch Lyon", [FETCH], [{"fetch": {"where": [{"city": ["Lyon"]}]}}]),
        bfcl_row(
            "float_int",
            "play ABBA",
            [PLAY],
            [{"spotify.play": {"artist": ["ABBA"], "duration": [20]}}],
        ),
    ]
    replies = {
        "fetch Paris": {"name": "fetch", "arguments": {"where": {"city": "paris"}}},
        "fetch Lyon": {"name": "fetch", "arguments": {"where": {"city": ["Lyon"]}}},
        "play ABBA": {"name": "spotify.play", "arguments": {"artist": "ABBA", "duration": 20.0}},
    }
    for question, call in replies.items():
        bench.server.add_rule(Rule(match=question, tool_calls=[call]))
    bench.pytester.makefile(".jsonl", bfcl="\n".join(rows))
    bench.eval_file("bfcl", BFCL_EVAL)
    bench.run("--models=fake").assert_outcomes(passed=1, failed=2)
    verdicts = {r["case_id"]: r["assertions"][0] for r in bench.records()}
    assert verdicts["dict_ok"]["passed"] is True  # "paris" is "Paris" after normalisation
    assert "call 1 (fetch): where.city: ['Lyon'] is not among the allowed values ['Lyon'] " \
        "[value_error:dict_value]" in verdicts["dict_lists"]["reason"]  # fmt: skip
    assert (
        "duration: expected type integer, got float (20.0) [type_error:simple]"
        in (verdicts["float_int"]["reason"])
    )


SIMPLE_QUESTION = "Area of a triangle with base 10 and height 5?"
PARALLEL_QUESTION = "Play Taylor Swift for 20 minutes and Maroon 5 for 15 minutes."


# -- the tool shim: tools in the prompt, calls as protocol JSON -------------------------------

SHIMMED_EVAL = BFCL_EVAL + "tool_shim: always\n"


def test_a_shimmed_reply_becomes_the_same_function_calls(bench: Bench) -> None:
    calls = {
        "calls": [
            {"tool": "spotify.play", "arguments": {"artist": "Taylor Swift", "duration": 20}},
            {"tool": "spotify.play", "arguments": {"artist": "Maroon 5", "duration": 15}},
        ]
    }
    bench.server.add_rule(Rule(match="Taylor Swift", reply=json.dumps(calls)))
    bench.server.add_rule(Rule(match="base 10", reply='{"answer": "It is 25."}'))
    bench.pytester.makefile(".jsonl", bfcl="\n".join([SIMPLE, PARALLEL]))
    bench.eval_file("bfcl", SHIMMED_EVAL)
    bench.run("--models=fake").assert_outcomes(passed=1, failed=1)
    requests = {r.body["messages"][-1]["content"]: r.body for r in bench.server.chat_requests()}
    body = requests[PARALLEL_QUESTION]
    assert "tools" not in body and "tool_choice" not in body  # offered in the prompt instead
    system = body["messages"][0]
    assert system["role"] == "system" and "spotify.play" in system["content"]
    assert '{"calls": [{"tool": "<tool name>"' in system["content"]
    schema = body["response_format"]["schema"]
    call_entry = schema["anyOf"][0]["properties"]["calls"]["items"]["anyOf"][0]
    assert call_entry["properties"]["tool"]["enum"] == ["spotify.play"]
    records = {record["case_id"]: record for record in bench.records()}
    parallel = records["parallel_0"]
    assert [(c["id"], c["name"], json.loads(c["arguments"])) for c in parallel["tool_calls"]] == [
        ("shim_0", "spotify.play", {"artist": "Taylor Swift", "duration": 20}),
        ("shim_1", "spotify.play", {"artist": "Maroon 5", "duration": 15}),
    ]
    assert parallel["tool_call_count"] == 2 and parallel["tool_counts"] == {"spotify.play": 2}
    assert parallel["shimmed"] is True
    assert parallel["assertions"][0]["passed"] is True
    answered = records["simple_0"]
    assert answered["tool_calls"] == [] and answered["response"] == "It is 25."
    assert "missing calculate_triangle_area(" in answered["assertions"][0]["reason"]


def test_a_shimmed_reply_cut_inside_its_calls_keeps_the_whole_ones(bench: Bench) -> None:
    """A reply cut off by max_tokens keeps the calls it finished: what the model did call."""
    whole = '{"tool": "spotify.play", "arguments": {"artist": "Maroon 5", "duration": 15}}'
    cut = f'{{ "calls": [{whole}, {whole}, {{"tool": "spotify.play", "argu'
    bench.server.add_rule(Rule(match="Taylor Swift", reply=cut))
    bench.pytester.makefile(".jsonl", bfcl=PARALLEL)
    bench.eval_file("bfcl", SHIMMED_EVAL)
    bench.run("--models=fake").assert_outcomes(failed=1)
    (record,) = bench.records()
    calls = [(c["name"], json.loads(c["arguments"])) for c in record["tool_calls"]]
    assert calls == [("spotify.play", {"artist": "Maroon 5", "duration": 15})] * 2
    assert record["response"] == ""
    reason = record["assertions"][0]["reason"]
    assert "missing spotify.play(artist=['Taylor Swift']" in reason and "extra calls" in reason


def test_a_plain_file_is_shimmed_only_when_asked_off_the_embedded_model(bench: Bench) -> None:
    """``auto`` shims the embedded model alone: the fake model gets native tools."""
    bench.server.add_rule(Rule(match="base 10", reply="no"))
    bench.pytester.makefile(".jsonl", bfcl=SIMPLE)
    bench.eval_file("bfcl", BFCL_EVAL + "tool_shim: auto\n")
    bench.run("--models=fake")
    (request,) = bench.server.chat_requests()
    assert "tools" in request.body and "response_format" not in request.body
    assert bench.records()[0]["shimmed"] is False


@pytest.mark.parametrize(
    ("choice", "names", "answer_allowed"),
    [
        ("auto", ["calculate_triangle_area"], True),
        ("required", ["calculate_triangle_area"], False),
        ("none", [], True),
    ],
)
def test_the_shims_grammar_follows_tool_choice(
    bench: Bench, choice: str, names: list[str], answer_allowed: bool
) -> None:
    bench.server.add_rule(Rule(match="base 10", reply='{"answer": "25"}'))
    bench.pytester.makefile(".jsonl", bfcl=SIMPLE)
    bench.eval_file("bfcl", SHIMMED_EVAL + f"tool_choice: {choice}\n")
    bench.run("--models=fake")
    (request,) = bench.server.chat_requests()
    schema = request.body["response_format"]["schema"]
    branches = schema.get("anyOf", [schema])
    answers = [b for b in branches if "answer" in b.get("properties", {})]
    calls = [b for b in branches if "calls" in b.get("properties", {})]
    assert bool(answers) is answer_allowed
    offered = [
        name
        for branch in calls
        for entry in branch["properties"]["calls"]["items"]["anyOf"]
        for name in entry["properties"]["tool"]["enum"]
    ]
    assert offered == names
    assert "tool_choice" not in request.body


def test_a_shimmed_file_replays_from_the_cache(bench: Bench) -> None:
    bench.server.add_rule(
        Rule(
            match="base 10",
            reply='{"tool": "calculate_triangle_area", "arguments": {"base": 10, "height": 5}}',
        )
    )
    bench.pytester.makefile(".jsonl", bfcl=SIMPLE)
    bench.eval_file("bfcl", SHIMMED_EVAL)
    bench.run("--models=fake", "--cache=use", "--cache-dir=c").assert_outcomes(passed=1)
    first = bench.records()[0]["tool_calls"]
    bench.run("--models=fake", "--cache=replay", "--cache-dir=c").assert_outcomes(passed=1)
    (record,) = bench.records()
    assert record["cached"] is True and record["tool_calls"] == first
    assert [call["name"] for call in first] == ["calculate_triangle_area"]


# -- the embedded model for real: through the shim, to a verdict ------------------------------


@pytest.mark.slow
def test_a_bfcl_row_runs_on_the_embedded_model_through_the_shim(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    pytester.makefile(".jsonl", bfcl="\n".join([SIMPLE, PARALLEL]))
    pytester.makefile(".eval.yaml", bfcl=BFCL_EVAL + "model_params: {max_tokens: 96}\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--results-dir=out")
    assert result.ret in (0, 1), result.stdout.str()  # verdicts, whichever they are
    lines = (pytester.path / "out" / "results.jsonl").read_text().splitlines()
    records = {r["case_id"]: r for r in map(json.loads, lines)}
    assert set(records) == {"simple_0", "parallel_0"}
    for record in records.values():
        assert record["model"] == "local/smollm2"
        assert record["outcome"] in ("passed", "failed"), record["error"]
        (verdict,) = record["assertions"]
        assert verdict["type"] == "tool-calls" and verdict["reason"]
        # the grammar lets the model name only the row's own tools
        declared = {"simple_0": "calculate_triangle_area", "parallel_0": "spotify.play"}
        assert {c["name"] for c in record["tool_calls"]} <= {declared[record["case_id"]]}
        system = record["messages"][0]
        assert system["role"] == "system" and '{"calls": [' in system["content"]
        assert record["shimmed"] is True


# -- per-row tools as a file's tools: tool-count --------------------------------------------


def test_tool_count_counts_a_rows_calls_where_the_row_declares_tools(bench: Bench) -> None:
    triangle = {"name": "calculate_triangle_area", "arguments": {"base": 10, "height": 5}}
    bench.server.add_rule(Rule(match="base 10", tool_calls=[triangle]))
    plays = [
        {"name": "spotify.play", "arguments": {"artist": "Taylor Swift", "duration": 20}},
        {"name": "spotify.play", "arguments": {"artist": "Maroon 5", "duration": 15}},
    ]
    bench.server.add_rule(Rule(match="Taylor Swift", tool_calls=plays))
    bench.pytester.makefile(".jsonl", bfcl="\n".join([SIMPLE, PARALLEL]))
    counted = BFCL_EVAL.replace("assert: [tool-calls]", "assert: [{type: tool-count, max: 1}]")
    bench.eval_file("bfcl", counted)
    bench.run("--models=fake").assert_outcomes(passed=1, failed=1)
    records = {record["case_id"]: record for record in bench.records()}
    (simple,) = records["simple_0"]["assertions"]
    assert simple["type"] == "tool-count" and simple["passed"] is True
    (parallel,) = records["parallel_0"]["assertions"]
    assert parallel["passed"] is False
    assert parallel["reason"].startswith("2 tool calls, wanted 0..1")


def test_tool_count_in_a_dataset_without_tools_still_needs_them(tmp_path: Path) -> None:
    row = json.dumps({"id": "bare", "question": [[{"role": "user", "content": "Hi"}]]})
    counted = "dataset: {path: bfcl.jsonl, id: id, prompt: question}\n"
    counted += "assert: [{type: tool-count, max: 1}]\n"
    error = error_of(tmp_path, [row], counted)
    assert "bfcl.eval.yaml:" in str(error)
    assert "`tool-count` checks an agent's work: it needs `kind: agent`" in str(error)


# -- names in a tool-call value checked against the rows' tools -------------------------------


@pytest.mark.parametrize(
    "check",
    [
        "{type: tool-call, value: NAME}",
        "{type: tool-calls, value: [NAME]}",
        "{type: tool-call-f1, value: [spotify.play, {name: NAME}]}",
    ],
)
def test_a_name_no_rows_tools_declare_is_an_error_at_its_line(tmp_path: Path, check: str) -> None:
    text = BFCL_EVAL.replace("assert: [tool-calls]", "assert:\n  - tool-calls\n  - " + check)
    loaded = load(tmp_path, [SIMPLE, PARALLEL], text.replace("NAME", "calculate_triangle_area"))
    assert len(loaded.cases) == 2  # a name some row declares is fine
    error = error_of(tmp_path, [SIMPLE, PARALLEL], text.replace("NAME", "calculate_area"))
    assert error.line == 10, str(error)
    assert "names 'calculate_area', which is not among the rows' tools" in str(error)
    assert "(calculate_triangle_area, spotify.play)" in str(error)
