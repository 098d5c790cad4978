"""A user's own grader (``type: model-graded``) end to end, against the fake judge server.

The fake server scripts the evaluated model's answer (``fake-model``) and each judge's choice
(``fake-model-2``, or ``judge-1..3`` for a jury); the tests read what the judges were sent,
the records and the agreement table.
"""

from __future__ import annotations

import csv
import json
import textwrap
from typing import Any

import pytest
from conftest import FAKE_KEY_ENV, Bench, Rule
from judged_runs import replayed_with_no_request, same_under_xdist

ANSWER = "The capital of France is Paris."
PROMPT = (
    "Topic: {{vars.topic}} ({{topic}}).\\n[Question]: {{input}}\\n[Expert]: {{expected}}\\n"
    "[Submission]: {{output}}\\nA: consistent, B: partly, C: disagrees."
)


def grader_file(
    extra: str = "", prompt: str = PROMPT, choices: str = "{A: 1.0, B: 0.5, C: 0}"
) -> str:
    return textwrap.dedent(
        f"""\
        cases:
          - id: paris
            prompt: What is the capital of France?
            vars: {{topic: geography}}
            expected: Paris
            assert:
              - type: model-graded
                judges: [fake2]
                prompt: "{prompt}"
                choices: {choices}
        """
    ) + "".join(f"    {line}\n" for line in extra.splitlines())


def judge_requests(bench: Bench, model: str = "fake-model-2") -> list[dict[str, Any]]:
    return [r.body for r in bench.server.chat_requests() if r.body["model"] == model]


def answer_with(bench: Bench, text: str = ANSWER) -> None:
    bench.server.add_rule(Rule(model="fake-model", reply=text))


def judge_says(bench: Bench, reply: str | dict[str, Any], model: str = "fake-model-2") -> None:
    text = reply if isinstance(reply, str) else json.dumps(reply)
    bench.server.add_rule(Rule(model=model, reply=text))


# --- a choice and its score ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("choice", "score", "outcome"),
    [("A", 1.0, "passed"), ("B", 0.5, "passed"), ("C", 0.0, "failed")],
)
def test_a_choice_maps_to_its_score(bench: Bench, choice: str, score: float, outcome: str) -> None:
    answer_with(bench)
    judge_says(bench, {"choice": choice})
    bench.eval_file("grader", grader_file())
    bench.run("--models=fake").assert_outcomes(**{outcome: 1})
    (record,) = bench.records()
    (verdict,) = record["assertions"]
    assert verdict["score"] == score and record["dimensions"] == {"model_graded": score}
    assert f"choice {choice}" in verdict["reason"] and "(pass >= 0.5)" in verdict["reason"]
    (judge,) = record["judges"]
    assert judge["choice"] == choice and judge["scores"] == {"model_graded": score}
    (request,) = judge_requests(bench)
    (message,) = request["messages"]
    assert message["role"] == "user"
    assert message["content"].startswith(
        "Topic: geography (geography).\n[Question]: What is the capital of France?\n"
        f"[Expert]: Paris\n[Submission]: {ANSWER}\nA: consistent"
    )
    assert message["content"].endswith(
        '\n\nReply with only a JSON object of one key, "choice": one of A, B, C.'
    )
    schema = request["response_format"]["json_schema"]["schema"]
    assert schema["properties"] == {"choice": {"type": "string", "enum": ["A", "B", "C"]}}


def test_chain_of_thought_reasons_first_and_its_reasoning_is_the_reason(bench: Bench) -> None:
    answer_with(bench)
    judge_says(bench, {"reasoning": "The submission names Paris, as the expert.", "choice": "A"})
    bench.eval_file("grader", grader_file("    chain_of_thought: true"))
    bench.run("--models=fake").assert_outcomes(passed=1)
    (record,) = bench.records()
    (verdict,) = record["assertions"]
    assert "choice A; The submission names Paris, as the expert." in verdict["reason"]
    (judge,) = record["judges"]
    assert judge["reasons"] == {"model_graded": "The submission names Paris, as the expert."}
    (request,) = judge_requests(bench)
    schema = request["response_format"]["json_schema"]["schema"]
    assert list(schema["properties"]) == ["reasoning", "choice"]  # reasoning comes first
    assert schema["required"] == ["reasoning", "choice"]
    assert request["messages"][0]["content"].endswith(
        'first "reasoning", your reasoning step by step, then "choice", one of A, B, C.'
    )


def test_without_structured_output_the_last_line_names_the_choice(bench: Bench) -> None:
    answer_with(bench)
    judge_says(bench, "The submission agrees with the expert.\nIt is brief.\n**Choice: B**")
    extra = "    chain_of_thought: true\n    structured: false"
    bench.eval_file("grader", grader_file(extra))
    bench.run("--models=fake").assert_outcomes(passed=1)
    (record,) = bench.records()
    (judge,) = record["judges"]
    assert judge["choice"] == "B" and judge["scores"] == {"model_graded": 0.5}
    assert judge["reasons"] == {
        "model_graded": "The submission agrees with the expert.\nIt is brief."
    }
    (request,) = judge_requests(bench)
    assert "response_format" not in request
    assert (
        'on the last line, write "Choice: X", where X is one of A, B, C'
        in (request["messages"][0]["content"])
    )


@pytest.mark.parametrize(
    ("extra", "reply", "problem"),
    [
        ("", {"choice": "D"}, "the choice must be one of A, B, C, got 'D'"),
        ("", {"verdict": "A"}, "missing 'choice'"),
        ("    structured: false", "I think it is fine.", "the choice must be one of A, B, C"),
        ("    structured: false", "Choice: maybe", "got 'maybe'"),
    ],
)
def test_a_reply_outside_the_choices_is_a_judge_error_after_the_retry_never_a_score(
    bench: Bench, extra: str, reply: str | dict[str, Any], problem: str
) -> None:
    answer_with(bench)
    judge_says(bench, reply)
    bench.eval_file("grader", grader_file(extra))
    bench.run("--models=fake").assert_outcomes(errors=1)
    (record,) = bench.records()
    assert record["error_kind"] == "judge" and record["score"] is None
    assert problem in record["error"]
    (judge,) = record["judges"]
    assert judge["call_attempts"] == 2 and judge["scores"] == {} and "choice" not in judge
    first, retry = judge_requests(bench)
    assert retry["messages"][:1] == first["messages"]
    assert retry["messages"][-1]["content"].startswith("That reply was not valid: ")


def test_a_retry_that_picks_a_choice_is_scored(bench: Bench) -> None:
    answer_with(bench)
    bench.server.add_rule(Rule(model="fake-model-2", reply="Paris, clearly.", times=1))
    judge_says(bench, "Choice: a")  # a label is matched ignoring case when that is unambiguous
    bench.eval_file("grader", grader_file("    structured: false"))
    bench.run("--models=fake").assert_outcomes(passed=1)
    (record,) = bench.records()
    (judge,) = record["judges"]
    assert (judge["choice"], judge["call_attempts"]) == ("A", 2)
    _, retry = judge_requests(bench)
    assert retry["messages"][-1]["content"].endswith(
        'Answer again, ending with the line "Choice: X" (X one of A, B, C).'
    )


def test_a_prompt_from_a_file_and_the_context(bench: Bench) -> None:
    answer_with(bench)
    judge_says(bench, {"choice": "yes"})
    bench.pytester.makefile(
        ".txt", **{"graders/grounded": "Docs:\n{{context}}\nAnswer: {{output}}"}
    )
    bench.eval_file(
        "grader",
        """
cases:
  - id: paris
    prompt: Capital?
    context: [Paris is the capital of France., It is on the Seine.]
    assert:
      - {type: model-graded, judges: [fake2], prompt: file://graders/grounded.txt,
         choices: {"yes": 1, "no": 0}}
""",
    )
    bench.run("--models=fake").assert_outcomes(passed=1)
    (request,) = judge_requests(bench)
    assert request["messages"][0]["content"].startswith(
        f"Docs:\nParis is the capital of France.\n\nIt is on the Seine.\nAnswer: {ANSWER}\n\n"
    )


# --- a jury, xdist, the cache ----------------------------------------------------------------

JUDGES = """
models:
  j1: {{model: openai/judge-1, api_base: "{base}", api_key_env: {env}}}
  j2: {{model: openai/judge-2, api_base: "{base}", api_key_env: {env}}}
  j3: {{model: openai/judge-3, api_base: "{base}", api_key_env: {env}}}
sets:
  jury: [j1, j2, j3]
"""
TWO_CASES = """
prompt: "Q: {{q}}"
assert:
  - type: model-graded
    judges: '@jury'
    prompt: "Grade the answer to {{input}}: {{output}}"
    choices: {A: 1.0, B: 0.5, C: 0}
cases:
  - {id: a, vars: {q: Question A}}
  - {id: b, vars: {q: Question B}}
"""


def _jury(bench: Bench, cases: str = TWO_CASES) -> None:
    """Choices by judge and case: a -> A, A, B; b -> C, C, C."""
    text = JUDGES.format(base=bench.server.base_url, env=FAKE_KEY_ENV)
    bench.pytester.makefile(".yaml", **{"profiles/judges": text})
    answer_with(bench)
    for n, (on_a, on_b) in enumerate((("A", "C"), ("A", "C"), ("B", "C")), start=1):
        for question, choice in (("Question A", on_a), ("Question B", on_b)):
            reply = json.dumps({"choice": choice})
            bench.server.add_rule(Rule(model=f"judge-{n}", match_any=question, reply=reply))
    bench.eval_file("jury", cases)


def test_a_jury_of_three_votes_by_choice_with_nominal_alpha(bench: Bench) -> None:
    # Nominal alpha over the labels: n = 6 values (A 2, B 1, C 3). Unit a (A, A, B) has
    # 3^2 - (2^2 + 1^2) = 4 ordered disagreeing pairs over m - 1 = 2: 2; unit b agrees: 0.
    # alpha = 1 - (n - 1) * 2 / (n^2 - sum n_c^2) = 1 - 5 * 2 / (36 - 14) = 12/22 = 6/11.
    _jury(bench)
    result = bench.run("--models=fake")
    result.assert_outcomes(passed=1, failed=1)  # a: mean 2.5/3 = 0.833; b: 0
    records = {r["case_id"]: r for r in bench.records()}
    assert records["a"]["dimensions"] == {"model_graded": pytest.approx(2.5 / 3)}
    assert records["b"]["dimensions"] == {"model_graded": 0.0}
    assert "votes A 2, B 1 (mean)" in records["a"]["assertions"][0]["reason"]
    assert "votes C 3 (mean)" in records["b"]["assertions"][0]["reason"]
    assert sorted(j["choice"] for j in records["a"]["judges"]) == ["A", "A", "B"]
    rows = {r["dimension"]: r for r in csv.DictReader(bench.out("judge_agreement.csv").open())}
    assert float(rows["model_graded"]["alpha"]) == pytest.approx(6 / 11)
    assert (rows["model_graded"]["units"], rows["model_graded"]["judges"]) == ("2", "3")


def test_majority_passes_when_most_judges_pick_a_passing_choice(bench: Bench) -> None:
    _jury(
        bench, TWO_CASES.replace("choices:", "aggregate: majority\n    threshold: 1\n    choices:")
    )
    bench.run("--models=fake").assert_outcomes(passed=1, failed=1)  # a: 2 of 3 pick A (1.0)


def judged_fields(bench: Bench) -> dict[str, Any]:
    keep = ("outcome", "score", "assertions", "dimensions")
    return {
        r["case_id"]: (
            {key: r[key] for key in keep},
            sorted((j["judge"], j["choice"], json.dumps(j["scores"])) for j in r["judges"]),
        )
        for r in bench.records()
    }


@pytest.mark.slow
def test_grader_records_are_the_same_under_xdist(bench: Bench) -> None:
    _jury(bench)
    same_under_xdist(bench, judged_fields)


@pytest.mark.parametrize("again", ["--cache=replay", "--rescore"])
def test_grader_verdicts_replay_from_the_cache_with_no_request(bench: Bench, again: str) -> None:
    _jury(bench)
    replayed_with_no_request(bench, again, judged_fields)


def test_rescore_applies_changed_choice_scores_without_calls(bench: Bench) -> None:
    # The judges see the labels, not their scores: new scores re-score the cached choices.
    _jury(bench)
    bench.run("--models=fake", "--cache=use", "--cache-dir=c").assert_outcomes(passed=1, failed=1)
    bench.server.reset()
    bench.eval_file("jury", TWO_CASES.replace("{A: 1.0, B: 0.5, C: 0}", "{A: 0, B: 0, C: 1}"))
    bench.run("--models=fake", "--rescore", "--cache-dir=c").assert_outcomes(passed=1, failed=1)
    assert bench.server.chat_requests() == []
    outcomes = {r["case_id"]: (r["outcome"], r["dimensions"]) for r in bench.records()}
    assert outcomes == {
        "a": ("failed", {"model_graded": 0.0}),
        "b": ("passed", {"model_graded": 1.0}),
    }


# --- bad input -------------------------------------------------------------------------------


def collection_error(bench: Bench, text: str) -> pytest.RunResult:
    bench.eval_file("grader", text)
    result = bench.run("--models=fake")
    result.assert_outcomes(errors=1)
    assert "Traceback" not in result.stdout.str()
    assert bench.server.chat_requests() == []
    return result


@pytest.mark.parametrize(
    ("prompt", "message"),
    [
        ("Is {{output}} {{tone}}?", "unknown template variable 'tone'"),
        ("Is {{output}} {{vars.tone}}?", "unknown template variable 'vars.tone'"),
        ("Is {{output}} {{input.text}}?", "unknown template variable 'input.text'"),
    ],
)
def test_a_prompt_naming_an_unknown_variable_is_a_collection_error(
    bench: Bench, prompt: str, message: str
) -> None:
    text = f"""
cases:
  - id: has-tone
    prompt: Hi
    vars: {{tone: polite}}
  - id: no-tone
    prompt: Hello
assert:
  - type: model-graded
    prompt: "{prompt}"
    choices: {{Y: 1, N: 0}}
"""
    if "input.text" in prompt:
        text = text.replace("vars: {tone: polite}", "vars: {x: 1}")
    result = collection_error(bench, text)
    case = "has-tone" if "input.text" in prompt else "no-tone"
    result.stdout.fnmatch_lines([f"*grader.eval.yaml:9: case '{case}': model-graded: {message}*"])


def test_a_prompt_using_expected_on_a_case_without_one_is_a_collection_error(bench: Bench) -> None:
    text = """
cases:
  - id: open
    prompt: Hi
    assert:
      - type: model-graded
        prompt: "{{output}} vs {{expected}}"
        choices: {Y: 1, N: 0}
"""
    result = collection_error(bench, text)
    result.stdout.fnmatch_lines(
        ["*grader.eval.yaml:6: case 'open': model-graded: the prompt uses {{expected}}*"]
    )


@pytest.mark.parametrize(
    ("choices", "message"),
    [
        ("{}", "choices must name at least one choice"),
        ("{A: high, B: 0}", "the score of 'A' must be a number, got 'high'"),
        ("{A: 1.5, B: 0}", "the score of 'A' must be between 0 and 1, got 1.5"),
        ("[A, B]", "choices must be a mapping of label to score, got list"),
    ],
)
def test_bad_choices_are_a_collection_error_at_their_line(
    bench: Bench, choices: str, message: str
) -> None:
    text = f"""
cases:
  - id: c
    prompt: Hi
    assert:
      - type: model-graded
        prompt: "{{{{output}}}}"
        choices: {choices}
"""
    result = collection_error(bench, text)
    result.stdout.fnmatch_lines([f"*grader.eval.yaml:7*{message}*"])


@pytest.mark.parametrize(
    ("path", "message"),
    [
        (
            "graders/missing.txt",
            "cannot read file://graders/missing.txt: No such file or directory",
        ),
        ("/etc/hostname", "is outside the project"),
        ("graders/empty.txt", "file://graders/empty.txt is empty"),
    ],
)
def test_an_unreadable_prompt_file_is_a_collection_error(
    bench: Bench, path: str, message: str
) -> None:
    bench.pytester.makefile(".txt", **{"graders/empty": ""})
    text = f"""
cases:
  - id: c
    prompt: Hi
    assert:
      - type: model-graded
        prompt: file://{path}
        choices: {{Y: 1, N: 0}}
"""
    result = collection_error(bench, text)
    result.stdout.fnmatch_lines(
        [f"*grader.eval.yaml:6: case 'c': model-graded: prompt: *{message}*"]
    )


def test_a_grader_without_prompt_or_with_an_unknown_key_is_a_collection_error(
    bench: Bench,
) -> None:
    text = """
cases:
  - id: c
    prompt: Hi
    assert:
      - {type: model-graded, choices: {Y: 1}}
"""
    result = collection_error(bench, text)
    result.stdout.fnmatch_lines(["*grader.eval.yaml:5*model-graded needs a `prompt`*"])
    text = text.replace("choices: {Y: 1}", "prompt: x, choices: {Y: 1}, rubric: y")
    result = collection_error(bench, text)
    result.stdout.fnmatch_lines(["*unknown key 'rubric' in model-graded assertion*"])


# --- dataset rows ------------------------------------------------------------------------------


def test_dataset_columns_are_a_graders_vars_and_a_row_without_one_names_its_case(
    bench: Bench,
) -> None:
    answer_with(bench, "Paris.")
    judge_says(bench, {"choice": "Y"})
    rows = [
        {"id": "fr", "question": "Capital of France?", "style": "terse"},
        {"id": "de", "question": "Capital of Germany?", "style": "formal"},
    ]
    bench.pytester.makefile(".jsonl", rows="\n".join(json.dumps(row) for row in rows))
    text = """
prompt: "{{question}}"
dataset: rows.jsonl
assert:
  - type: model-graded
    judges: [fake2]
    prompt: "Is {{output}} a {{style}} answer to {{vars.question}}?"
    choices: {Y: 1, N: 0}
"""
    bench.eval_file("grader", text)
    bench.run("--models=fake").assert_outcomes(passed=2)
    sent = sorted(r["messages"][0]["content"].split("\n\n")[0] for r in judge_requests(bench))
    assert sent == [
        "Is Paris. a formal answer to Capital of Germany??",
        "Is Paris. a terse answer to Capital of France??",
    ]
    bench.server.reset()
    rows[1].pop("style")
    bench.pytester.makefile(".jsonl", rows="\n".join(json.dumps(row) for row in rows))
    result = collection_error(bench, text)
    result.stdout.fnmatch_lines(
        ["*grader.eval.yaml:6: case 'de': model-graded: unknown template variable 'style'*"]
    )


def test_in_a_conversation_input_is_the_user_turn_the_reply_answered(bench: Bench) -> None:
    answer_with(bench, "I am an assistant.")
    judge_says(bench, {"choice": "Y"})
    bench.eval_file(
        "grader",
        """
cases:
  - id: talk
    turns:
      - user: Hello, I am Ada.
      - user: What is your name?
        assert:
          - {type: model-graded, judges: [fake2], prompt: "Q: {{input}} A: {{output}}",
             choices: {Y: 1, N: 0}}
""",
    )
    bench.run("--models=fake").assert_outcomes(passed=1)
    (request,) = judge_requests(bench)
    assert request["messages"][0]["content"].startswith(
        "Q: What is your name? A: I am an assistant.\n\n"
    )


# --- a solver's context ----------------------------------------------------------------------

APP = """
def no_context(case, client):
    return {"answer": client.complete(case.prompt).text}


def empty_context(case, client):
    return {"answer": client.complete(case.prompt).text, "context": []}
"""
GROUNDED = """
solver: app:{solver}
cases:
  - id: paris
    prompt: Capital?
    assert:
      - {{type: model-graded, judges: [fake2], prompt: "Docs: {{{{context}}}} Answer: {{{{output}}}}",
         choices: {{"yes": 1, "no": 0}}}}
"""


def test_a_solver_returning_no_context_for_a_grader_reading_it_is_a_solver_error(
    bench: Bench,
) -> None:
    bench.pytester.makepyfile(app=APP)
    answer_with(bench)
    judge_says(bench, {"choice": "yes"})
    bench.eval_file("grader", GROUNDED.format(solver="no_context"))
    result = bench.run("--models=fake")
    result.assert_outcomes(errors=1)
    (record,) = bench.records()
    assert record["error_kind"] == "solver"
    assert "returned no `context`" in record["error"] and "model-graded need" in record["error"]
    assert judge_requests(bench) == []


def test_a_solvers_empty_context_leaves_a_grader_reading_it_unchecked(bench: Bench) -> None:
    bench.pytester.makepyfile(app=APP)
    answer_with(bench)
    judge_says(bench, {"choice": "yes"})
    bench.eval_file("grader", GROUNDED.format(solver="empty_context"))
    bench.run("--models=fake")
    (record,) = bench.records()
    (verdict,) = record["assertions"]
    assert verdict["unchecked"] is True and "the context is empty" in verdict["reason"]
    assert judge_requests(bench) == []
