from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_llmbench.scoring.assertions import (
    KNOWN_TYPES,
    Assertion,
    AssertionContext,
    AssertionSpecError,
    Verdict,
    evaluate,
    parse_assertion,
    score_verdicts,
)

SCHEMA = {"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}}}


def check(
    raw: Any, output: str, expected: str | None = None, base_dir: Path = Path(".")
) -> Verdict:
    """Parse ``raw`` and evaluate it on ``output`` for case c1 on model m."""
    context = AssertionContext(expected=expected, case_id="c1", model="m", base_dir=base_dir)
    return evaluate(parse_assertion(raw), output, context)


# (assertion, output, passed, a fragment of the reason) for every type, passing and failing.
CASES: list[tuple[Any, str, bool, str]] = [
    ({"type": "equals", "value": "Paris"}, "  Paris\n", True, "output equals 'Paris'"),
    ({"type": "equals", "value": "Paris"}, "Paris.", False, "'Paris.' does not equal 'Paris'"),
    ({"type": "equals", "value": {"a": [1, 2]}}, '{"a": [1, 2]}', True, "output equals"),
    ({"type": "equals", "value": [1, 2]}, "[2, 1]", False, "output differs from '[1, 2]'"),
    ({"type": "equals", "value": 42}, "42", True, "output equals '42'"),
    ({"type": "contains", "value": "Paris"}, "It is Paris.", True, "output contains 'Paris'"),
    ({"type": "contains", "value": "Paris"}, "it is paris", False, "does not contain 'Paris'"),
    ({"type": "icontains", "value": "Paris"}, "it is PARIS", True, "'Paris' (ignoring case)"),
    ({"type": "icontains", "value": "Paris"}, "it is Rome", False, "does not contain 'Paris'"),
    ({"type": "contains-any", "value": ["Rome", "Paris"]}, "Paris", True, "contains 'Paris'"),
    ({"type": "contains-any", "value": ["Rome", "Oslo"]}, "Paris", False, "of 'Rome', 'Oslo'"),
    ({"type": "contains-all", "value": ["a", "b"]}, "a and b", True, "contains all 2 strings"),
    ({"type": "contains-all", "value": ["a", "x", "y"]}, "a", False, "does not contain 'x', 'y'"),
    ({"type": "icontains-any", "value": ["ROME", "paris"]}, "PARIS", True, "contains 'paris'"),
    ({"type": "icontains-any", "value": ["rome"]}, "Paris", False, "contain any of 'rome'"),
    ({"type": "icontains-all", "value": ["A", "b"]}, "a B", True, "contains all 2 strings"),
    ({"type": "icontains-all", "value": ["A", "c"]}, "a B", False, "does not contain 'c'"),
    ({"type": "regex", "value": r"^\W*Paris"}, "**Paris**", True, r"matched '^\W*Paris'"),
    ({"type": "regex", "value": r"^\W*Paris"}, "In Paris", False, r"no match for '^\W*Paris'"),
    ({"type": "starts-with", "value": "Yes"}, "\n Yes, it is", True, "output starts with 'Yes'"),
    ({"type": "starts-with", "value": "Yes"}, "No, yes", False, "'No, yes' does not start with"),
    ("is-json", '{"a": 1}', True, "output is valid JSON"),
    ("is-json", "{'a': 1}", False, "output is not JSON (Expecting property name"),
    ({"type": "json-schema", "value": SCHEMA}, '{"name": "x"}', True, "output matches the schema"),
    ({"type": "json-schema", "value": SCHEMA}, '{"name": 3}', False, "schema violation at $.name"),
    ({"type": "numeric", "value": 42}, "The answer is 42.", True, "42 equals 42"),
    ({"type": "numeric", "value": 42}, "The answer is 41.", False, "41 is not 42"),
    # what the user was told (here the answer): test_scoring_communicated.py
    ({"type": "communicated", "value": "W1,001"}, "Order w1001", False, "not told to the user"),
    ({"type": "communicated", "value": "W1001"}, "Order w1,001", True, "told to the user in"),
]


@pytest.mark.parametrize(("raw", "output", "passed", "reason"), CASES)
def test_every_type_passes_and_fails(raw: Any, output: str, passed: bool, reason: str) -> None:
    verdict = check(raw, output)
    assert (verdict.passed, verdict.score) == (passed, 1.0 if passed else 0.0)
    assert reason in verdict.reason


@pytest.mark.parametrize(("raw", "output", "passed", "reason"), CASES)
def test_negation_inverts_every_type(raw: Any, output: str, passed: bool, reason: str) -> None:
    raw = {"type": raw} if isinstance(raw, str) else dict(raw)
    raw["type"] = "not-" + raw["type"]
    verdict = check(raw, output)
    assert verdict.type == raw["type"]
    assert (verdict.passed, verdict.score) == (not passed, 0.0 if passed else 1.0)
    assert verdict.reason.startswith("negated: ") and reason in verdict.reason


def test_the_cases_cover_every_known_type() -> None:
    covered = {parse_assertion(raw).base_type for raw, *_ in CASES}
    # python has tests of its own; the model-graded types are in test_judging_panel.py, the
    # limits on what the call measured in test_scoring_performance.py
    graded = {"similarity", "llm-rubric", "jury", "factuality", "closed-qa"}
    performance = {
        "latency",
        "cost",
        "tokens",
        "finish-reason",
    }  # finish-reason: test_models_reasoning.py
    # the RAG metrics are judged: test_rag.py
    graded |= {"faithfulness", "answer-relevance", "context-recall", "context-precision"}
    graded |= {"model-graded"}  # a user's own grader: test_model_graded.py
    graded |= {"pairwise"}  # against a --baseline run's answer: test_pairwise.py
    graded |= {"select-best"}  # the best of a case's contestants: test_select_best.py
    # the function-calling checks read a reply's tool calls: test_function_calling.py
    tool_calls = {"tool-call", "valid-tool-call", "tool-call-f1", "no-tool-call", "tool-calls"}
    # the checks on an environment's final state: test_scoring_final_state.py
    state = {"state-equals", "state-subset"}
    assert covered | {"python", "choice"} | graded | performance | tool_calls | state == KNOWN_TYPES


def test_shorthand_negation_of_is_json() -> None:
    assertion = parse_assertion("not-is-json")
    assert (assertion.base_type, assertion.negate, assertion.value) == ("is-json", True, None)
    assert check("not-is-json", "plain text").passed
    assert not check("not-is-json", "[1, 2]").passed


def test_long_output_is_truncated_in_reasons() -> None:
    verdict = check({"type": "equals", "value": "short"}, "x" * 500)
    quoted = re.search(r"output '(x+\.\.\.)'", verdict.reason)
    assert quoted is not None and len(quoted.group(1)) <= 80


def test_newlines_are_escaped_in_reasons() -> None:
    verdict = check({"type": "starts-with", "value": "Yes"}, "No\nreally")
    assert "\n" not in verdict.reason and "'No\\nreally'" in verdict.reason


# --- weights and scoring ----------------------------------------------------------------------


def test_weight_is_parsed_and_carried_to_the_verdict() -> None:
    assert parse_assertion("contains").weight == 1.0
    verdict = check({"type": "contains", "value": "a", "weight": 2}, "a")
    assert verdict.weight == 2.0


def test_score_verdicts_is_the_weighted_mean() -> None:
    verdicts = [
        Verdict("contains", True, 1.0, 3.0, ""),
        Verdict("regex", False, 0.0, 1.0, ""),
        Verdict("python", True, 0.5, 0.0, ""),
    ]
    assert score_verdicts(verdicts) == pytest.approx(0.75)


def test_score_verdicts_empty_and_all_zero_weights() -> None:
    assert score_verdicts([]) is None
    zero = [Verdict("a", True, 1.0, 0.0, ""), Verdict("b", False, 0.0, 0.0, "")]
    assert score_verdicts(zero) == pytest.approx(0.5)


def test_verdict_to_dict_is_json_primitives() -> None:
    verdict = check({"type": "contains", "value": "a", "weight": 2}, "abc")
    data = verdict.to_dict()
    assert data == {
        "type": "contains",
        "passed": True,
        "score": 1.0,
        "weight": 2.0,
        "reason": "output contains 'a'",
    }
    assert json.loads(json.dumps(data)) == data


# --- value defaulting to expected -------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "output", "expected", "passed"),
    [
        ("contains", "it is Paris", "Paris", True),
        ("contains", "it is Rome", "Paris", False),
        ("icontains", "PARIS", "paris", True),
        ("equals", " Paris ", "Paris", True),
        ("equals", "Paris, France", "Paris", False),
        ("starts-with", "Paris, France", "Paris", True),
        ("regex", "Paris", "^P.r", True),
        ("numeric", "it is 42.0", "42", True),
        ("numeric", "it is 41", "about 42", False),
        ("not-contains", "Rome", "Paris", True),
    ],
)
def test_value_defaults_to_expected(raw: str, output: str, expected: str, passed: bool) -> None:
    assertion = parse_assertion(raw)
    assert assertion.needs_value and assertion.value is None
    assert check(raw, output, expected=expected).passed is passed


def test_needs_value_is_false_with_a_value_or_a_valueless_type() -> None:
    assert not parse_assertion({"type": "contains", "value": "x"}).needs_value
    assert not parse_assertion("is-json").needs_value


@pytest.mark.parametrize("raw", ["contains", "not-contains", "numeric", "regex"])
def test_no_value_and_no_expected_fails_without_crashing(raw: str) -> None:
    verdict = check(raw, "anything", expected=None)
    assert not verdict.passed and verdict.score == 0.0
    assert "has no value and the case has no expected" in verdict.reason


def test_expected_that_is_not_a_number_or_regex_fails_cleanly() -> None:
    assert "holds no number" in check("numeric", "42", expected="forty-two").reason
    verdict = check("not-regex", "x", expected="(unclosed")
    assert not verdict.passed and "invalid regex '(unclosed'" in verdict.reason


# --- JSON -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("output", "where"),
    [
        ('Here:\n```json\n{"name": "x"}\n```\nDone.', "fenced block"),
        ('Here:\n```\n{"name": "x"}\n```', "fenced block"),
        ('```python\nprint(1)\n```\n```JSON\n{"name": "x"}\n```', "fenced block"),
        ('  {"name": "x"}\n', "output"),
    ],
)
def test_json_is_taken_from_the_output_or_a_single_fenced_block(output: str, where: str) -> None:
    assert check("is-json", output).reason == f"{where} is valid JSON"
    assert check({"type": "json-schema", "value": SCHEMA}, output).passed
    assert check({"type": "equals", "value": {"name": "x"}}, output).passed


def test_two_fenced_blocks_are_not_json() -> None:
    verdict = check("is-json", "```json\n{}\n```\nand\n```json\n[]\n```")
    assert not verdict.passed and "it has 2 fenced blocks" in verdict.reason


def test_a_broken_fenced_block_says_where_it_failed() -> None:
    verdict = check("is-json", 'See:\n```json\n{"a": }\n```')
    assert not verdict.passed
    assert verdict.reason == "fenced block is not JSON (Expecting value at line 1 column 7)"


def test_json_schema_from_a_json_file(tmp_path: Path) -> None:
    (tmp_path / "schemas").mkdir()
    (tmp_path / "schemas" / "person.json").write_text(json.dumps(SCHEMA))
    raw = {"type": "json-schema", "value": "schemas/person.json"}
    assert check(raw, '{"name": "Ada"}', base_dir=tmp_path).passed
    verdict = check(raw, '{"age": 3}', base_dir=tmp_path)
    assert not verdict.passed and "'name' is a required property" in verdict.reason


def test_json_schema_from_a_yaml_file(tmp_path: Path) -> None:
    (tmp_path / "s.yaml").write_text("type: array\nitems: {type: integer}\n")
    raw = {"type": "json-schema", "value": "s.yaml"}
    assert check(raw, "[1, 2]", base_dir=tmp_path).passed
    verdict = check(raw, '[1, "two"]', base_dir=tmp_path)
    assert not verdict.passed and verdict.reason.startswith("schema violation at $[1]")


def test_json_schema_file_problems_fail_even_when_negated(tmp_path: Path) -> None:
    (tmp_path / "bad.json").write_text("{not json")
    (tmp_path / "list.json").write_text("[1]")
    # A schema that holds itself would recurse in jsonschema (RecursionError); one deep too.
    (tmp_path / "loop.yaml").write_text("type: object\nproperties: &p {a: {properties: *p}}\n")
    (tmp_path / "deep.json").write_text('{"a": ' + "[" * 10_000 + "]" * 10_000 + "}")
    for name, reason in [
        ("missing.json", "cannot load schema file missing.json"),
        ("bad.json", "cannot load schema file bad.json"),
        ("list.json", "does not hold a mapping"),
        ("loop.yaml", "cannot load schema file loop.yaml: recursive alias: *p is inside"),
        ("deep.json", "cannot load schema file deep.json: nested more than 64 levels deep"),
    ]:
        verdict = check({"type": "not-json-schema", "value": name}, "{}", base_dir=tmp_path)
        assert not verdict.passed and reason in verdict.reason


# --- numeric ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "output", "passed", "reason"),
    [
        ({"tolerance": 0.5}, "about 42.3 or so", True, "42.3 is within 0.5 of 42"),
        ({"tolerance": 0.5}, "about 42.6", False, "42.6 is not within 0.5 of 42"),
        ({"tolerance": 0.5}, "41.5", True, "41.5 is within 0.5 of 42"),
        ({"rel_tolerance": 0.1}, "45", True, "45 is within 4.2 of 42"),
        ({"rel_tolerance": 0.1}, "47", False, "47 is not within 4.2 of 42"),
        ({"tolerance": 1, "rel_tolerance": 0.01}, "42.9", True, "42.9 is within 1 of 42"),
        ({}, "There is no number here", False, "no number in output 'There is no number here'"),
        ({}, "It costs 42,000 dollars", False, "42000 is not 42"),
        ({}, "-42", False, "-42 is not 42"),
    ],
)
def test_numeric(options: dict[str, Any], output: str, passed: bool, reason: str) -> None:
    verdict = check({"type": "numeric", "value": 42, **options}, output)
    assert verdict.passed is passed and verdict.reason == reason


@pytest.mark.parametrize(
    ("position", "output", "passed", "reason"),
    [
        (None, "12 times 12 is equal to 144.", True, "144 equals 144"),
        ("last", "12 times 12 is equal to 144.", True, "144 equals 144"),
        ("first", "12 times 12 is equal to 144.", False, "12 is not 144"),
        ("first", "144, since 12 x 12 = 144", True, "144 equals 144"),
        ("last", "144 is 12 squared", False, "12 is not 144"),
        ("any", "it is 12 squared, so 144 in all", True, "144 equals 144"),
        ("any", "12 times 12 is 140", False, "no number in the output is 144 (closest 140)"),
        ("only", "144", True, "144 equals 144"),
        ("only", "12 x 12 = 144", False, "3 numbers in output (12, 12, 144), expected only one"),
        ("last", "It costs -1,440.0 or 144", True, "144 equals 144"),
    ],
)
def test_numeric_position(position: str | None, output: str, passed: bool, reason: str) -> None:
    raw: dict[str, Any] = {"type": "numeric", "value": 144}
    if position is not None:
        raw["position"] = position
    verdict = check(raw, output)
    assert verdict.passed is passed and verdict.reason == reason


def test_numeric_position_any_honours_the_tolerance() -> None:
    raw = {"type": "numeric", "value": 100, "position": "any", "tolerance": 2}
    assert check(raw, "between 50 and 101").passed
    verdict = check(raw, "between 50 and 90")
    assert (
        not verdict.passed
        and verdict.reason == "no number in the output is within 2 of 100 (closest 90)"
    )


def test_numeric_tolerance_forgives_float_rounding() -> None:
    assert check({"type": "numeric", "value": 0.3, "tolerance": 0.05}, "0.35").passed


# --- python -----------------------------------------------------------------------------------

CHECKS = """
def is_paris(output, context):
    return output.strip() == context.expected

def half(output, context):
    return 0.6 if "Paris" in output else 0.2

def as_dict(output, context):
    return {"pass": "Paris" in output, "reason": f"case {context.case_id} on {context.model}"}

def score_only(output, context):
    return {"score": 0.4}

def boom(output, context):
    raise RuntimeError("kaboom")

def too_big(output, context):
    return 1.5

def nothing(output, context):
    return None

not_callable = 3
"""


@pytest.fixture
def checks(tmp_path: Path) -> Iterator[str]:
    """The name of a fresh checks module in tmp_path (unique, so sys.modules cannot go stale)."""
    name = "llmbench_checks_" + re.sub(r"\W", "_", tmp_path.name)
    (tmp_path / f"{name}.py").write_text(CHECKS)
    yield name
    sys.modules.pop(name, None)


def run_python(checks: str, function: str, output: str, tmp_path: Path, **extra: Any) -> Verdict:
    raw = {"type": "python", "value": f"{checks}:{function}", **extra}
    return check(raw, output, expected="Paris", base_dir=tmp_path)


def test_python_returning_bool(checks: str, tmp_path: Path) -> None:
    path_before = list(sys.path)
    verdict = run_python(checks, "is_paris", "Paris", tmp_path)
    assert (verdict.passed, verdict.score) == (True, 1.0)
    assert verdict.reason == f"{checks}:is_paris returned True"
    assert sys.path == path_before
    assert not run_python(checks, "is_paris", "Rome", tmp_path).passed


@pytest.mark.parametrize(
    ("output", "threshold", "passed", "score"),
    [("Paris", None, True, 0.6), ("Rome", None, False, 0.2), ("Paris", 0.7, False, 0.6)],
)
def test_python_returning_float_uses_threshold(
    checks: str, tmp_path: Path, output: str, threshold: float | None, passed: bool, score: float
) -> None:
    extra = {} if threshold is None else {"threshold": threshold}
    verdict = run_python(checks, "half", output, tmp_path, **extra)
    assert (verdict.passed, verdict.score) == (passed, score)
    assert "threshold" in verdict.reason


def test_python_returning_dict(checks: str, tmp_path: Path) -> None:
    verdict = run_python(checks, "as_dict", "Paris", tmp_path)
    assert (verdict.passed, verdict.score, verdict.reason) == (True, 1.0, "case c1 on m")
    scored = run_python(checks, "score_only", "x", tmp_path, threshold=0.3)
    assert (scored.passed, scored.score) == (True, 0.4)


def test_python_negated_inverts_score(checks: str, tmp_path: Path) -> None:
    verdict = check({"type": "not-python", "value": f"{checks}:half"}, "Paris", base_dir=tmp_path)
    assert (verdict.passed, verdict.score) == (False, pytest.approx(0.4))


@pytest.mark.parametrize(
    ("function", "reason"),
    [
        ("boom", "raised RuntimeError: kaboom"),
        ("too_big", "returned score 1.5, outside 0..1"),
        ("nothing", "returned NoneType; expected a bool, a float or a dict"),
        ("not_callable", "is not callable"),
        ("missing", "cannot load"),
    ],
)
def test_python_problems_fail_and_do_not_propagate(
    checks: str, tmp_path: Path, function: str, reason: str
) -> None:
    for prefix in ("", "not-"):
        raw = {"type": f"{prefix}python", "value": f"{checks}:{function}"}
        verdict = check(raw, "Paris", base_dir=tmp_path)
        assert (verdict.passed, verdict.score) == (False, 0.0)
        assert reason in verdict.reason


def test_python_missing_module_fails(tmp_path: Path) -> None:
    verdict = check({"type": "python", "value": "no_such_module_xyz:f"}, "x", base_dir=tmp_path)
    assert not verdict.passed and "ModuleNotFoundError" in verdict.reason


# --- parse errors -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "field", "message"),
    [
        (
            "containz",
            "type",
            "unknown assertion type 'containz'; known types: answer-relevance, choice, closed-qa,",
        ),
        ("not-containz", "type", "known types:"),
        ({"value": "x"}, "type", "assertion has no 'type'"),
        ({"type": 3}, "type", "assertion type must be a string"),
        ({"type": "contains", "valu": "x", "extra": 1}, "extra", "unknown key 'extra', 'valu'"),
        (
            {"type": "contains", "value": "x", "tolerance": 1},
            "tolerance",
            "'tolerance' does not apply to contains (only to numeric)",
        ),
        (
            {"type": "numeric", "value": 1, "threshold": 0.5},
            "threshold",
            "'threshold' does not apply to numeric (only to python)",
        ),
        ({"type": "contains-any", "value": "Paris"}, "value", "contains-any needs a non-empty"),
        ({"type": "contains-all", "value": []}, "value", "contains-all needs a non-empty list"),
        ({"type": "icontains-all", "value": ["a", None]}, "value", "list of strings"),
        ({"type": "contains", "value": ["a"]}, "value", "contains needs a string value"),
        (
            {"type": "regex", "value": "(unclosed"},
            "value",
            "invalid regex '(unclosed': missing ) at position 9",
        ),
        ({"type": "python", "value": "mychecks.check"}, "value", "like 'module.sub:function'"),
        ({"type": "python", "value": "my-checks:check"}, "value", "like 'module.sub:function'"),
        ({"type": "numeric", "value": "42"}, "value", "numeric needs a number, got '42'"),
        ({"type": "numeric", "value": True}, "value", "numeric needs a number"),
        ({"type": "json-schema", "value": ["a"]}, "value", "json-schema needs a schema mapping"),
        ({"type": "json-schema", "value": {"type": "nope"}}, "value", "invalid JSON schema"),
        ({"type": "is-json", "value": "x"}, "value", "is-json takes no value"),
        ({"type": "contains", "value": "x", "weight": -1}, "weight", "weight must be >= 0, got -1"),
        (
            {"type": "contains", "value": "x", "weight": "heavy"},
            "weight",
            "weight must be a number, got 'heavy'",
        ),
        ({"type": "numeric", "value": 1, "tolerance": -0.1}, "tolerance", "tolerance must be >= 0"),
        ({"type": "numeric", "value": 1, "rel_tolerance": "x"}, "rel_tolerance", "a number"),
        (
            {"type": "numeric", "value": 1, "position": "middle"},
            "position",
            "position must be one of last, first, any, only, got 'middle'",
        ),
        (
            {"type": "contains", "value": "x", "position": "last"},
            "position",
            "'position' does not apply to contains (only to numeric)",
        ),
        (
            {"type": "python", "value": "m:f", "threshold": 2},
            "threshold",
            "threshold must be between 0 and 1, got 2",
        ),
        ("python", "value", "python needs a value ('module:function'), so it cannot be a bare"),
        ("json-schema", "value", "json-schema needs a value"),
        ("contains-any", "value", "contains-any needs a value (a list of strings)"),
        ("not-icontains-all", "value", "icontains-all needs a value"),
        (["contains"], None, "an assertion must be a type name or a mapping, got list"),
    ],
)
def test_parse_errors(raw: Any, field: str | None, message: str) -> None:
    with pytest.raises(AssertionSpecError) as info:
        parse_assertion(raw)
    assert message in str(info.value)
    assert info.value.field == field


def test_unknown_type_message_lists_every_known_type() -> None:
    with pytest.raises(AssertionSpecError) as info:
        parse_assertion("nope")
    assert all(name in str(info.value) for name in KNOWN_TYPES)
    assert isinstance(info.value, ValueError)


def test_parse_normalises_values_and_options() -> None:
    assertion = parse_assertion({"type": "not-contains-any", "value": ["a", 1], "weight": 0})
    assert assertion == Assertion("not-contains-any", "contains-any", True, ("a", "1"), 0.0, {})
    numeric = parse_assertion({"type": "numeric", "value": 3, "tolerance": 1, "rel_tolerance": 0})
    assert numeric.options == {"tolerance": 1.0, "rel_tolerance": 0.0}
    assert parse_assertion({"type": "contains", "value": 42}).value == "42"
    assert parse_assertion({"type": "python", "value": "pkg.mod:fn", "threshold": 0.7}).options == {
        "threshold": 0.7
    }


# --- regexes that would crash or hang ----------------------------------------------------------


@pytest.mark.parametrize(
    "pattern",
    ["a{4294967296}", "(" * 5000 + "a" + ")" * 5000],
    ids=["repeat-past-int", "groups-5000-deep"],
)
def test_a_regex_that_cannot_compile_is_a_spec_error(pattern: str) -> None:
    """``a{4294967296}`` raised OverflowError (a traceback at collection), not re.error."""
    with pytest.raises(AssertionSpecError, match="invalid regex") as info:
        parse_assertion({"type": "regex", "value": pattern})
    assert info.value.field == "value"


def test_a_catastrophic_regex_fails_its_check_instead_of_hanging(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from pytest_llmbench.scoring import base

    monkeypatch.setattr(base, "REGEX_TIMEOUT_S", 0.05)
    verdict = check({"type": "regex", "value": "(a|aa)+$"}, "a" * 60 + "b")
    assert not verdict.passed and verdict.score == 0.0
    assert "searched for more than 0.05 s" in verdict.reason
    assert "catastrophic backtracking" in verdict.reason
    # The same pattern on an answer it matches at once still passes.
    assert check({"type": "regex", "value": "(a|aa)+$"}, "aaaa").passed
