"""load_spec: the eval file format, its expansion into cases, and its errors with their lines."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest

from pytest_llmbench.spec.load import load_spec
from pytest_llmbench.spec.resolved import EvalCase, EvalFileError, LoadedEval
from pytest_llmbench.spec.templating import render_template

DATASETS_360 = Path(__file__).resolve().parents[2] / "shared" / "datasets" / "360-eval"
needs_360 = pytest.mark.skipif(not DATASETS_360.is_dir(), reason="360-eval datasets not present")
#: Outside the project: allowed as ``--allow-path`` would.
ALLOWED_360 = (DATASETS_360,)

MINIMAL = """\
description: Capital cities
model_params: {temperature: 0, max_tokens: 16}
threshold: 0.5
system: Answer with one word.
tags: [geo, smoke]
cases:
  - id: france
    prompt: What is the capital of France?
    expected: Paris
    assert:
      - contains
      - {type: regex, value: "^[A-Z]"}
    tags: [europe, geo]
  - id: japan
    prompt: What is the capital of Japan?
    expected: Tokyo
    threshold: 1
    model_params: {max_tokens: 4, top_p: 0.5}
    assert: [contains]
"""


def write(tmp_path: Path, text: str, name: str = "suite.eval.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def load(tmp_path: Path, text: str, roots: tuple[Path, ...] = ()) -> LoadedEval:
    return load_spec(write(tmp_path, text), roots)


def case_by_id(loaded: LoadedEval) -> dict[str, EvalCase]:
    return {case.id: case for case in loaded.cases}


def error_of(tmp_path: Path, text: str | bytes, roots: tuple[Path, ...] = ()) -> EvalFileError:
    path = tmp_path / "bad.eval.yaml"
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(textwrap.dedent(text), encoding="utf-8")
    with pytest.raises(EvalFileError) as info:
        load_spec(path, roots)
    return info.value


def assert_error(error: EvalFileError, tmp_path: Path, line: int, *fragments: str) -> None:
    """``str(error)`` is ``path:line: message`` and the message holds every fragment."""
    prefix = f"{tmp_path / 'bad.eval.yaml'}:{line}: "
    assert str(error).startswith(prefix), str(error)
    assert error.line == line
    for fragment in fragments:
        assert fragment in error.message, error.message


# --- the minimal format -----------------------------------------------------------------------


def test_minimal_format_loads_into_cases(tmp_path: Path) -> None:
    loaded = load(tmp_path, MINIMAL)
    assert loaded.suite == "suite"
    assert loaded.description == "Capital cities"
    assert [case.id for case in loaded.cases] == ["france", "japan"]
    france, japan = loaded.cases
    assert france.messages == (
        {"role": "system", "content": "Answer with one word."},
        {"role": "user", "content": "What is the capital of France?"},
    )
    assert france.prompt == "What is the capital of France?"
    assert france.expected == "Paris"
    assert france.line == 7 and japan.line == 14


def test_minimal_format_assertions(tmp_path: Path) -> None:
    france, japan = load(tmp_path, MINIMAL).cases
    assert [(a.type, a.value) for a in france.assertions] == [
        ("contains", None),
        ("regex", "^[A-Z]"),
    ]
    assert france.assertions[0].needs_value  # the shorthand takes the case's expected
    assert [a.type for a in japan.assertions] == ["contains"]


def test_threshold_file_default_and_case_override(tmp_path: Path) -> None:
    france, japan = load(tmp_path, MINIMAL).cases
    assert france.threshold == 0.5
    assert japan.threshold == 1.0


def test_model_params_merge_file_then_case(tmp_path: Path) -> None:
    france, japan = load(tmp_path, MINIMAL).cases
    assert france.model_params == {"temperature": 0, "max_tokens": 16}
    assert japan.model_params == {"temperature": 0, "max_tokens": 4, "top_p": 0.5}


def test_tags_file_level_then_case_deduplicated(tmp_path: Path) -> None:
    france, japan = load(tmp_path, MINIMAL).cases
    assert france.tags == ("geo", "smoke", "europe")
    assert japan.tags == ("geo", "smoke")


def test_default_threshold_is_one(tmp_path: Path) -> None:
    (case,) = load(tmp_path, "cases: [{prompt: hi}]").cases
    assert case.threshold == 1.0
    assert case.messages == ({"role": "user", "content": "hi"},)


def test_case_system_overrides_file_system(tmp_path: Path) -> None:
    text = """\
    system: file system
    cases:
      - {id: own, prompt: hi, system: case system}
      - {id: inherited, prompt: hi}
    """
    cases = case_by_id(load(tmp_path, text))
    assert cases["own"].messages[0] == {"role": "system", "content": "case system"}
    assert cases["inherited"].messages[0] == {"role": "system", "content": "file system"}


def test_messages_instead_of_prompt(tmp_path: Path) -> None:
    text = """\
    system: Be brief.
    cases:
      - id: chat
        messages:
          - {role: user, content: "Hi, I am {{name}}."}
          - {role: assistant, content: Hello!}
          - {role: user, content: "What is my name?"}
        vars: {name: Ada}
      - id: own-system
        messages:
          - {role: system, content: Be verbose.}
          - {role: user, content: Hi}
    """
    cases = case_by_id(load(tmp_path, text))
    assert cases["chat"].messages == (
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Hi, I am Ada."},
        {"role": "assistant", "content": "Hello!"},
        {"role": "user", "content": "What is my name?"},
    )
    assert cases["chat"].prompt == "What is my name?"
    # A chat that brings its own system message does not get the file's as well.
    assert [m["role"] for m in cases["own-system"].messages] == ["system", "user"]
    assert cases["own-system"].messages[0]["content"] == "Be verbose."


def test_vars_render_into_case_prompt(tmp_path: Path) -> None:
    text = """\
    cases:
      - prompt: "Capital of {{ country }}? Answer in {{lang}}."
        vars: {country: Peru, lang: Spanish}
    """
    (case,) = load(tmp_path, text).cases
    assert case.prompt == "Capital of Peru? Answer in Spanish."
    assert case.vars == {"country": "Peru", "lang": "Spanish"}


def test_vars_render_into_file_level_prompt_template(tmp_path: Path) -> None:
    text = """\
    prompt: "What is the capital of {{country}}?"
    system: "You are a {{role}}."
    cases:
      - {id: peru, vars: {country: Peru, role: geographer}}
      - {id: chile, vars: {country: Chile, role: teacher}}
      - {id: own, prompt: "Not a template user: {{role}}", vars: {role: x}}
    """
    cases = case_by_id(load(tmp_path, text))
    assert cases["peru"].messages == (
        {"role": "system", "content": "You are a geographer."},
        {"role": "user", "content": "What is the capital of Peru?"},
    )
    assert cases["chile"].prompt == "What is the capital of Chile?"
    assert cases["own"].prompt == "Not a template user: x"


def test_nested_vars_render_by_dotted_name(tmp_path: Path) -> None:
    text = """\
    cases:
      - prompt: "{{user.name}} has {{items.1}}; all: {{items}}"
        vars: {user: {name: Ada}, items: [pen, book]}
    """
    (case,) = load(tmp_path, text).cases
    assert case.prompt == 'Ada has book; all: ["pen", "book"]'


def test_render_template_unknown_variable_is_an_error() -> None:
    assert render_template("{{x}}", None) == "{{x}}"
    assert render_template("{{ x }}!", {"x": 3}) == "3!"
    with pytest.raises(ValueError, match=r"unknown template variable 'y' \(known: x\)"):
        render_template("{{y}}", {"x": 1})


def test_a_template_variable_that_holds_itself_or_is_no_json_is_a_named_error() -> None:
    looped: dict[str, Any] = {"n": 1}
    looped["self"] = looped
    deep: list[Any] = []
    for _ in range(10_000):
        deep = [deep]
    with pytest.raises(ValueError, match=r"^template variable 'row': self: the value contains"):
        render_template("{{row}}", {"row": looped})
    with pytest.raises(ValueError, match=r"^template variable 'tree': 0\.0.*nested more than 64"):
        render_template("{{tree}}", {"tree": deep})
    with pytest.raises(ValueError, match=r"^template variable 'when': Object of type set"):
        render_template("{{when}}", {"when": {"at": {1}}})
    assert render_template("{{row.n}} {{row.self.n}}", {"row": looped}) == "1 1"


def test_unknown_template_variable_in_case_prompt(tmp_path: Path) -> None:
    text = """\
    cases:
      - id: ok
        prompt: hi
      - id: greet
        vars: {nam: Ada}
        prompt: "Hello {{name}}"
    """
    error = error_of(tmp_path, text)
    assert_error(
        error, tmp_path, 6, "case 'greet'", "unknown template variable 'name'", "known: nam"
    )


def test_unknown_template_variable_in_file_template(tmp_path: Path) -> None:
    text = """\
    prompt: "Capital of {{country}}?"
    cases:
      - id: peru
        vars: {country: Peru}
      - id: broken
        vars: {contry: Chile}
    """
    error = error_of(tmp_path, text)
    assert_error(error, tmp_path, 6, "case 'broken'", "unknown template variable 'country'")


def test_literal_braces_without_vars_are_an_error_in_inline_prompts(tmp_path: Path) -> None:
    error = error_of(tmp_path, "cases:\n  - prompt: 'Fill {{blank}}'\n")
    assert_error(error, tmp_path, 2, "unknown template variable 'blank'", "known: none")


def test_per_case_threshold_and_params(tmp_path: Path) -> None:
    text = """\
    threshold: 0.8
    cases:
      - {id: strict, prompt: a, threshold: 1.0}
      - {id: lax, prompt: b, threshold: 0, model_params: {temperature: 0.7}}
      - {id: default, prompt: c}
    """
    cases = case_by_id(load(tmp_path, text))
    assert [cases[name].threshold for name in ("strict", "lax", "default")] == [1.0, 0.0, 0.8]
    assert cases["lax"].model_params == {"temperature": 0.7}
    assert cases["default"].model_params == {}


def test_assert_items_with_weight(tmp_path: Path) -> None:
    text = """\
    cases:
      - prompt: hi
        expected: Paris
        assert:
          - {type: icontains, weight: 3}
          - {type: not-contains, value: London, weight: 0.5}
          - starts-with
    """
    (case,) = load(tmp_path, text).cases
    summary = [(a.type, a.base_type, a.negate, a.value, a.weight) for a in case.assertions]
    assert summary == [
        ("icontains", "icontains", False, None, 3.0),
        ("not-contains", "contains", True, "London", 0.5),
        ("starts-with", "starts-with", False, None, 1.0),
    ]


def test_file_level_assert_appended_to_every_case(tmp_path: Path) -> None:
    text = """\
    assert:
      - {type: not-icontains, value: sorry}
    cases:
      - {id: a, prompt: x, expected: "1", assert: [equals]}
      - {id: b, prompt: y}
    """
    cases = case_by_id(load(tmp_path, text))
    assert [a.type for a in cases["a"].assertions] == ["equals", "not-icontains"]
    assert [a.type for a in cases["b"].assertions] == ["not-icontains"]
    assert cases["b"].assertions[0].value == "sorry"


def test_default_case_ids(tmp_path: Path) -> None:
    text = "cases:\n  - prompt: a\n  - {id: named, prompt: b}\n  - prompt: c\n  - {id: '  ', prompt: d}\n"
    assert [case.id for case in load(tmp_path, text).cases] == [
        "case-1",
        "named",
        "case-3",
        "case-4",
    ]


def test_case_ids_are_made_node_id_safe(tmp_path: Path) -> None:
    text = """\
    cases:
      - {id: "what is 2+2", prompt: a}
      - {id: "geo::capitals/fr", prompt: b}
      - {id: "list[0]", prompt: c}
      - {id: "  padded  ", prompt: d}
    """
    ids = [case.id for case in load(tmp_path, text).cases]
    assert ids == ["what-is-2+2", "geo-capitals-fr", "list-0-", "padded"]
    assert not any(ch in "".join(ids) for ch in "[]/ ") and "::" not in "".join(ids)


def test_numeric_ids_and_expected_keep_their_written_text(tmp_path: Path) -> None:
    text = """\
    cases:
      - {id: 007, prompt: "Is water wet?", expected: yes}
      - {id: 2, prompt: "Pi to two places?", expected: 3.10}
      - {id: 3, prompt: "Year?", expected: 1969}
      - {id: 4, prompt: "Date?", expected: 2024-01-31}
    """
    cases = load(tmp_path, text).cases
    assert [case.id for case in cases] == ["007", "2", "3", "4"]
    assert [case.expected for case in cases] == ["yes", "3.10", "1969", "2024-01-31"]


def test_duplicate_ids_error_names_both_lines(tmp_path: Path) -> None:
    text = """\
    cases:
      - id: a
        prompt: x
      - id: b
        prompt: y
      - id: a
        prompt: z
    """
    assert_error(error_of(tmp_path, text), tmp_path, 6, "duplicate case id 'a'", "first at line 2")


def test_yaml_anchors_and_merge_keys(tmp_path: Path) -> None:
    text = """\
    cases:
      - &base
        id: first
        prompt: Shared prompt
        expected: ok
        assert: [contains]
      - <<: *base
        id: second
        expected: fine
    """
    first, second = load(tmp_path, text).cases
    assert (second.id, second.prompt, second.expected) == ("second", "Shared prompt", "fine")
    assert [a.type for a in second.assertions] == ["contains"]
    assert first.expected == "ok"


# --- datasets -------------------------------------------------------------------------------


def test_csv_dataset_with_template_and_file_assertions(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "qa.csv").write_text(
        'qid,question,answer,tags\nq1,"What is 2+2?",4,math\nq2,"Capital of Peru?",Lima,"geo, easy"\n',
        encoding="utf-8",
    )
    text = """\
    system: Answer briefly.
    prompt: "Q: {{prompt}} (id {{qid}})"
    tags: [dataset]
    model_params: {temperature: 0}
    threshold: 0.5
    assert: [icontains]
    dataset: {path: data/qa.csv, prompt: question, expected: answer, id: qid}
    """
    loaded = load(tmp_path, text)
    q1, q2 = loaded.cases
    assert [q1.id, q2.id] == ["q1", "q2"]
    assert q1.messages == (
        {"role": "system", "content": "Answer briefly."},
        {"role": "user", "content": "Q: What is 2+2? (id q1)"},
    )
    assert (q1.expected, q2.expected) == ("4", "Lima")
    assert [a.type for a in q2.assertions] == ["icontains"]
    assert q2.tags == ("dataset", "geo", "easy")
    assert q1.threshold == 0.5 and q1.model_params == {"temperature": 0}
    assert q1.line == 7  # the `dataset:` line


def test_jsonl_dataset_relative_path(tmp_path: Path) -> None:
    rows = [
        {"id": "r1", "prompt": "Say hi to {{name}}", "expected": "hi", "vars": {"name": "Bo"}},
        {"prompt": "Say bye", "expected": "bye", "threshold": 0.25},
    ]
    (tmp_path / "rows.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    sub = tmp_path / "evals"
    sub.mkdir()
    path = sub / "rows.eval.yaml"
    path.write_text("dataset: ../rows.jsonl\nassert: [contains]\n", encoding="utf-8")
    # The rows are outside the eval file's folder but inside the project (as rootdir).
    first, second = load_spec(path, [tmp_path]).cases
    assert (first.id, second.id) == ("r1", "row-2")
    # Without a file-level template a row's prompt is sent verbatim, braces and all.
    assert first.messages == ({"role": "user", "content": "Say hi to {{name}}"},)
    assert second.threshold == 0.25 and first.threshold == 1.0
    assert [a.type for a in second.assertions] == ["contains"]


def test_dataset_prompt_with_literal_braces_is_sent_verbatim(tmp_path: Path) -> None:
    (tmp_path / "code.csv").write_text(
        'prompt,expected\n"Explain the Jinja syntax {{ x }} and {{y}}",variables\n',
        encoding="utf-8",
    )
    (case,) = load(tmp_path, "dataset: code.csv\n").cases
    assert case.prompt == "Explain the Jinja syntax {{ x }} and {{y}}"


def test_dataset_and_inline_cases_together(tmp_path: Path) -> None:
    (tmp_path / "d.csv").write_text("prompt,expected\nfrom the file,x\n", encoding="utf-8")
    text = "dataset: d.csv\ncases:\n  - {id: inline, prompt: written here}\n"
    assert [case.id for case in load(tmp_path, text).cases] == ["row-1", "inline"]


def test_dataset_row_unknown_template_variable(tmp_path: Path) -> None:
    (tmp_path / "d.csv").write_text("prompt\nhello\n", encoding="utf-8")
    text = "description: x\nprompt: '{{prompt}} {{missing}}'\ndataset: d.csv\n"
    assert_error(
        error_of(tmp_path, text), tmp_path, 3, "row-1", "unknown template variable 'missing'"
    )


def test_dataset_row_problem_is_reported_at_the_dataset_line(tmp_path: Path) -> None:
    (tmp_path / "d.csv").write_text("prompt,expected\nok,1\n ,2\n", encoding="utf-8")
    error = error_of(tmp_path, "description: x\n\ndataset: d.csv\n")
    assert_error(error, tmp_path, 3, "dataset:", "d.csv:3", "empty prompt")


def test_file_assertion_needing_expected_on_dataset_without_expected(tmp_path: Path) -> None:
    (tmp_path / "d.csv").write_text("prompt\nhello\n", encoding="utf-8")
    error = error_of(tmp_path, "assert: [contains]\ndataset: d.csv\n")
    assert_error(error, tmp_path, 2, "`contains`", "needs a value or `expected`")


_360_FILES = [
    ("sample-benchmark-prompts-data-extraction.csv", "", 20),
    ("sample-benchmark-prompts-data-formatting.csv", "", 22),
    ("sample-benchmark-prompts-function-calling.csv", "", 21),
    ("sample-benchmark-prompts-summarization.csv", "", 20),
    ("sample-benchmark-prompts-text-to-sql.csv", "", 21),
    (
        "sample-benchmark-prompts-thinking-use-case.csv",
        "prompt: Prompt, expected: Golden_Answer",
        10,
    ),
    (
        "sample-benchmark-prompts-customer-call-transcripts.csv",
        "id: Case ID, tags: Vertical",
        10,
    ),
    (
        "chegg-question-answer-relevance-check.csv",
        "prompt: cleaned_question_body, expected: cleaned_answer_body",
        5,
    ),
]


@needs_360
@pytest.mark.parametrize(("name", "mapping", "rows"), _360_FILES, ids=[n for n, *_ in _360_FILES])
def test_360_eval_csv_loads(tmp_path: Path, name: str, mapping: str, rows: int) -> None:
    source = DATASETS_360 / name
    extra = f", {mapping}" if mapping else ""
    text = f"threshold: 0.5\nassert: [contains]\ndataset: {{path: '{source}'{extra}}}\n"
    cases = load(tmp_path, text, ALLOWED_360).cases
    assert len(cases) == rows
    assert len({case.id for case in cases}) == rows
    for case in cases:
        assert case.prompt and case.prompt.strip()
        assert case.prompt[0] != "\ufeff"  # the byte-order mark is not part of the first prompt
        assert case.expected and case.expected.strip()
        assert case.messages[-1]["role"] == "user"


@needs_360
def test_360_eval_multi_line_fields_survive(tmp_path: Path) -> None:
    source = DATASETS_360 / "sample-benchmark-prompts-data-extraction.csv"
    first = load(tmp_path, f"dataset: '{source}'\n", ALLOWED_360).cases[0]
    assert first.id == "row-1"
    assert (
        first.expected
        == "Company Name: Quantum Dynamics Ltd.\nCEO: Dr. Sarah Johnson\nFounding Year: 2015"
    )
    assert first.prompt is not None and first.prompt.startswith("Extract the company name, CEO")


@needs_360
def test_360_eval_bom_header_columns_map(tmp_path: Path) -> None:
    source = DATASETS_360 / "sample-benchmark-prompts-customer-call-transcripts.csv"
    text = f"dataset: {{path: '{source}', id: Case ID, tags: Vertical}}\n"
    first = load(tmp_path, text, ALLOWED_360).cases[0]
    assert first.id == "AC-H8K9L2"
    assert first.tags == ("Travel",)
    assert first.vars["Primary Issue"] == "Flight cancellation & rebooking"
    assert first.prompt is not None and first.prompt.startswith("ROLE:")


@needs_360
def test_360_eval_bom_file_without_mapping_names_the_columns(tmp_path: Path) -> None:
    source = DATASETS_360 / "sample-benchmark-prompts-thinking-use-case.csv"
    error = error_of(tmp_path, f"dataset: '{source}'\n", ALLOWED_360)
    # The BOM is stripped: the column is reported as 'Prompt', not '\ufeffPrompt'.
    assert_error(error, tmp_path, 1, "no prompt column", "'Prompt'", "set dataset.prompt")
    assert "\ufeff" not in str(error)


# --- errors, each at its line ---------------------------------------------------------------


def test_unknown_top_level_key(tmp_path: Path) -> None:
    error = error_of(tmp_path, "description: x\ncasses: []\ncases: [{prompt: hi}]\n")
    assert_error(error, tmp_path, 2, "top level: unknown key 'casses'")


def test_unknown_case_key_at_its_line(tmp_path: Path) -> None:
    text = """\
    cases:
      - id: a
        prompt: hi
      - id: b
        prompt: hi
        expect: oops
    """
    assert_error(error_of(tmp_path, text), tmp_path, 6, "cases.1: unknown key 'expect'")


def test_wrong_type(tmp_path: Path) -> None:
    error = error_of(tmp_path, "description: x\nthreshold: high\ncases: [{prompt: hi}]\n")
    assert_error(error, tmp_path, 2, "threshold:", "valid number")


def test_wrong_type_inside_a_case(tmp_path: Path) -> None:
    text = "cases:\n  - prompt: hi\n    expected: [a, b]\n"
    error = error_of(tmp_path, text)
    assert_error(error, tmp_path, 3, "cases.0.expected:")
    assert "expected.str" not in error.message  # no pydantic union member names


def test_threshold_out_of_range(tmp_path: Path) -> None:
    text = "threshold: 0.5\ncases:\n  - prompt: a\n  - prompt: b\n    threshold: 1.5\n"
    assert_error(
        error_of(tmp_path, text), tmp_path, 5, "cases.1.threshold", "less than or equal to 1"
    )


def test_file_threshold_out_of_range(tmp_path: Path) -> None:
    assert_error(
        error_of(tmp_path, "threshold: -0.1\ncases: [{prompt: a}]\n"), tmp_path, 1, "threshold"
    )


def test_unknown_assertion_type_lists_known_types(tmp_path: Path) -> None:
    text = """\
    cases:
      - prompt: hi
        expected: x
        assert:
          - contains
          - containz
    """
    error = error_of(tmp_path, text)
    assert_error(error, tmp_path, 6, "cases.0.assert.1", "unknown assertion type 'containz'")
    assert "known types:" in error.message
    for known in ("contains", "regex", "equals", "icontains"):
        assert known in error.message


def test_bad_regex(tmp_path: Path) -> None:
    text = """\
    cases:
      - prompt: hi
        assert:
          - type: regex
            value: "(unclosed"
    """
    assert_error(error_of(tmp_path, text), tmp_path, 5, "cases.0.assert.0.value", "invalid regex")


def test_contains_without_value_or_expected(tmp_path: Path) -> None:
    text = """\
    cases:
      - id: fine
        prompt: hi
        expected: x
        assert: [contains]
      - id: broken
        prompt: hi
        assert:
          - {type: regex, value: x}
          - contains
    """
    error = error_of(tmp_path, text)
    assert_error(error, tmp_path, 10, "case 'broken'", "`contains` needs a value or `expected`")


def test_file_level_contains_without_expected_points_at_the_case(tmp_path: Path) -> None:
    text = (
        "assert: [contains]\ncases:\n  - {id: a, prompt: x, expected: y}\n  - {id: b, prompt: x}\n"
    )
    error = error_of(tmp_path, text)
    assert_error(error, tmp_path, 4, "case 'b'", "file-level", "needs a value or `expected`")


def test_both_prompt_and_messages(tmp_path: Path) -> None:
    text = """\
    cases:
      - id: both
        prompt: hi
        messages:
          - {role: user, content: hi}
    """
    error = error_of(tmp_path, text)
    assert_error(error, tmp_path, 4, "case 'both'", "either `prompt` or `messages`, not both")


def test_missing_dataset_file(tmp_path: Path) -> None:
    error = error_of(tmp_path, "description: x\ndataset: data/missing.csv\n")
    assert_error(error, tmp_path, 2, "dataset:", "not found", "data/missing.csv")


def test_no_cases(tmp_path: Path) -> None:
    assert_error(error_of(tmp_path, "description: nothing\ncases: []\n"), tmp_path, 1, "no cases")


def test_empty_file(tmp_path: Path) -> None:
    assert_error(error_of(tmp_path, ""), tmp_path, 1, "empty")
    assert_error(error_of(tmp_path, "# only a comment\n"), tmp_path, 1, "empty")


def test_top_level_list(tmp_path: Path) -> None:
    error = error_of(tmp_path, "- prompt: a\n- prompt: b\n")
    assert_error(error, tmp_path, 1, "must be a mapping", "not a list")


def test_non_utf8_file(tmp_path: Path) -> None:
    error = error_of(tmp_path, b"description: ok\ncases:\n  - prompt: caf\xe9\n")
    assert_error(error, tmp_path, 3, "not UTF-8")


def test_utf8_bom_is_tolerated(tmp_path: Path) -> None:
    path = tmp_path / "bom.eval.yaml"
    path.write_bytes("\ufeffcases:\n  - prompt: café\n".encode())
    assert load_spec(path).cases[0].prompt == "café"


#: One-line files that are errors: (text, line, fragments of the message).
BAD_FILES = [
    pytest.param(
        "cases:\n  - {id: 'a b', prompt: x}\n  - {id: 'a/b', prompt: y}\n",
        3,
        ("duplicate case id 'a-b'", "line 2"),
        id="duplicate_ids_after_sanitizing",
    ),
    pytest.param(
        "assert:\n  - contains\n  - nope\ncases: [{prompt: hi, expected: x}]\n",
        3,
        ("assert.1", "unknown assertion type 'nope'"),
        id="unknown_file_level_assertion_type",
    ),
    pytest.param(
        "cases:\n  - prompt: hi\n    assert:\n      - type: contains\n        value: x\n        wieght: 2\n",
        6,
        ("unknown key 'wieght'",),
        id="unknown_assertion_key_at_its_line",
    ),
    pytest.param(
        "cases:\n  - id: ok\n    prompt: x\n  - id: empty\n    expected: y\n",
        4,
        ("case 'empty'", "no prompt"),
        id="no_prompt_at_all",
    ),
    pytest.param(
        "cases:\n  - messages:\n      - role: user\n        content: a\n      - role: bot\n        content: b\n",
        5,
        ("cases.0.messages.1.role",),
        id="bad_message_role",
    ),
    pytest.param(
        "description: x\ncases:\n  - prompt: hi\n   expected: [unclosed\n",
        4,
        ("invalid YAML",),
        id="yaml_syntax_error",
    ),
    pytest.param(
        "cases:\n  - prompt: one\n    expected: a\n    prompt: two\n",
        4,
        ("duplicate key 'prompt'",),
        id="duplicate_yaml_keys",
    ),
    pytest.param(
        "cases:\n  - prompt: hi\n  - prompt: !env SECRET\n",
        3,
        ("invalid YAML value", "!env"),
        id="unknown_yaml_tag",
    ),
    pytest.param(
        "description: x\ncases: &loop\n  - prompt: hi\n    vars: {again: *loop}\n",
        4,  # the alias's line: where the value is made to contain itself
        ("invalid YAML: recursive alias: *loop is inside the value &loop names",),
        id="recursive_alias",
    ),
]


@pytest.mark.parametrize(("text", "line", "fragments"), BAD_FILES)
def test_bad_file_is_an_error_at_its_line(
    tmp_path: Path, text: str, line: int, fragments: tuple[str, ...]
) -> None:
    assert_error(error_of(tmp_path, text), tmp_path, line, *fragments)


@pytest.mark.parametrize(
    ("key", "message"),
    [
        (
            "../escape.txt",
            "workdir file '../escape.txt' must be a relative path inside the workdir",
        ),
        ("/etc/passwd", "workdir file '/etc/passwd' must be a relative path inside the workdir"),
        (".", "workdir file '.' must be a relative path inside the workdir"),
        # Issue 25: an INTERNALERROR when the agent's workdir was made ahead of the item.
        (
            "n" * 300,
            f"workdir file {'n' * 40!r}...{'n' * 40!r} has a name of 300 bytes; the filesystem "
            "allows 255",
        ),
        (
            "d/" + "é" * 128 + "/f.txt",
            "has a name of 256 bytes ('ééé",
        ),
        (
            "/".join(["d" * 200] * 16),
            "is a path of 3,215 bytes; the filesystem allows 3,072 inside a workdir",
        ),
        # A RecursionError in pathlib's mkdir (found by the fuzzer).
        ("x/" * 1500 + "f", "is nested 1,500 folders deep; at most 63 are allowed"),
    ],
    ids=[
        "parent",
        "absolute",
        "dot",
        "name-past-NAME_MAX",
        "utf8-bytes",
        "path-past-PATH_MAX",
        "deep-folders",
    ],
)
def test_files_keys_outside_the_workdir_are_a_collection_error(
    tmp_path: Path, key: str, message: str
) -> None:
    """They were found only at setup, with a traceback per item."""
    # An explicit key (`? key`): YAML's implicit keys stop at 1,024 characters.
    text = f"cases:\n  - id: a\n    prompt: hi\n    files:\n      ? '{key}'\n      : hi\n"
    assert_error(error_of(tmp_path, text), tmp_path, 4, "cases.0.files", message)


def test_a_files_key_that_is_another_ones_folder_is_a_collection_error(tmp_path: Path) -> None:
    text = "cases:\n  - id: a\n    prompt: hi\n    files:\n      d: one\n      d/e.txt: two\n"
    assert_error(error_of(tmp_path, text), tmp_path, 4, "'d' is also a folder of another file")


def test_a_rows_verbatim_prompt_still_gets_the_files_system_rendered(tmp_path: Path) -> None:
    (tmp_path / "rows.jsonl").write_text(
        '{"id": "a", "prompt": "Keep {{braces}} as sent", "vertical": "travel", "expected": "x"}\n'
    )
    text = (
        'system: "You are a {{vertical}} support agent"\ndataset: rows.jsonl\nassert: [contains]\n'
    )
    (case,) = load(tmp_path, text).cases
    assert case.messages == (
        {"role": "system", "content": "You are a travel support agent"},
        {"role": "user", "content": "Keep {{braces}} as sent"},  # the row's prompt: verbatim
    )


def test_an_unknown_name_in_system_for_a_dataset_row_is_a_collection_error(
    tmp_path: Path,
) -> None:
    (tmp_path / "rows.jsonl").write_text('{"id": "a", "prompt": "hi", "expected": "x"}\n')
    text = 'assert: [contains]\nsystem: "You are a {{vertical}} agent"\ndataset: rows.jsonl\n'
    error = error_of(tmp_path, text)
    assert_error(error, tmp_path, 2, "dataset row 'a'", "system", "'vertical'", "known: ")


def test_a_file_level_task_applies_to_cases_and_rows_without_their_own(tmp_path: Path) -> None:
    (tmp_path / "rows.jsonl").write_text(
        '{"id": "r1", "prompt": "a", "expected": "x"}\n'
        '{"id": "r2", "prompt": "b", "expected": "x", "task": {"task_type": "qa"}}\n'
    )
    text = """
task: {task_type: summarization, task_criteria: Short and faithful}
assert: [contains]
dataset: rows.jsonl
cases:
  - {id: own, prompt: p, expected: x, task: {task_type: extraction}}
  - {id: inherits, prompt: p, expected: x}
"""
    tasks = {case.id: case.task for case in load(tmp_path, text).cases}
    suite = {"task_type": "summarization", "task_criteria": "Short and faithful"}
    assert tasks["inherits"] == suite and tasks["r1"] == suite
    assert tasks["own"] == {"task_type": "extraction", "task_criteria": None}
    assert tasks["r2"]["task_type"] == "qa"


def test_a_jsonl_rows_own_assert_and_judge_metrics_reach_its_case(tmp_path: Path) -> None:
    (tmp_path / "rows.jsonl").write_text(
        '{"id": "a", "prompt": "p", "expected": "x", "assert": [{"type": "regex", "value": "^x"}],'
        ' "user_defined_metrics": "brand voice", "country": "Chile", "file": "a.txt"}\n'
        '{"id": "b", "prompt": "q", "expected": "y", "file": "b.txt", "country": "France"}\n'
    )
    text = 'assert: [contains]\ndataset: rows.jsonl\nprompt: "{{prompt}} in {{country}}"\n'
    used = text.replace("[contains]", '[contains, {type: icontains, value: "{{file}}"}]')
    # Used by no template, or by the prompt and an assertion's value: keys that are no case
    # keys are variables of the row's case.
    cases = {case.id: case for case in load(tmp_path, used).cases}
    assert [a.type for a in cases["a"].assertions] == ["regex", "contains", "icontains"]
    assert cases["a"].judge_metrics == ("brand_voice",)
    assert cases["b"].vars["file"] == "b.txt"
    assert cases["b"].messages[-1]["content"] == "q in France"
    # A typo of a case key would leave the case without its assertions: an error at its line.
    with (tmp_path / "rows.jsonl").open("a") as rows:
        rows.write('{"id": "c", "prompt": "r", "country": "Peru", "asert": ["contains"]}\n')
    error = error_of(tmp_path, used)
    assert "rows.jsonl:3: unknown key 'asert' (did you mean 'assert'?)" in str(error)
