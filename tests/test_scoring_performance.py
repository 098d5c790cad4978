"""scoring.performance: the latency, cost and tokens assertions, parsed, checked and run."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from conftest import Bench, Rule

from pytest_llmbench.scoring.assertions import (
    AssertionContext,
    AssertionSpecError,
    Verdict,
    evaluate,
    parse_assertion,
    score_verdicts,
)
from pytest_llmbench.scoring.base import CallMeasures

MEASURED = CallMeasures(
    latency_s=1.5, ttft_s=0.25, cost_usd=0.001, input_tokens=40, output_tokens=200
)


def check(raw: Any, measures: CallMeasures | None = MEASURED) -> Verdict:
    """Parse ``raw`` and check it against ``measures`` for model m."""
    return evaluate(
        parse_assertion(raw), "any text", AssertionContext(model="m", measures=measures)
    )


# --- parsing ---------------------------------------------------------------------------------


def test_defaults_and_options_are_parsed() -> None:
    latency = parse_assertion({"type": "latency", "threshold": 2})
    assert (latency.base_type, latency.negate, latency.weight) == ("latency", False, 1.0)
    assert latency.options == {"threshold": 2.0, "metric": "total"}
    cost = parse_assertion({"type": "cost", "threshold": 0.002, "include_judges": True})
    assert cost.options == {"threshold": 0.002, "include_judges": True}
    tokens = parse_assertion({"type": "tokens", "max": 300, "which": "total", "weight": 0.5})
    assert (tokens.options, tokens.weight) == ({"max": 300, "which": "total"}, 0.5)


@pytest.mark.parametrize(
    ("raw", "field", "message"),
    [
        ({"type": "not-latency", "threshold": 1}, "type", "latency cannot be negated with not-"),
        ("latency", "threshold", "latency needs a threshold: the most seconds"),
        ({"type": "cost"}, "threshold", "cost needs a threshold: the most USD"),
        ({"type": "tokens"}, "max", "tokens needs a max"),
        ({"type": "latency", "threshold": -1}, "threshold", "a number of seconds >= 0, got -1"),
        ({"type": "latency", "threshold": "2s"}, "threshold", "got '2s'"),
        ({"type": "cost", "threshold": True}, "threshold", "a number of USD >= 0, got True"),
        ({"type": "tokens", "max": 2.5}, "max", "max must be a whole number >= 0, got 2.5"),
        ({"type": "latency", "threshold": 1, "metric": "p95"}, "metric", "total, ttft"),
        ({"type": "cost", "threshold": 1, "include_judges": "yes"}, "include_judges", "'yes'"),
        ({"type": "tokens", "max": 1, "which": "all"}, "which", "output, input, total"),
        ({"type": "latency", "threshold": 1, "value": 2}, "value", "unknown key 'value'"),
        ({"type": "tokens", "max": 1, "weight": -1}, "weight", "weight must be a number >= 0"),
    ],
)
def test_parse_errors_name_the_key(raw: Any, field: str, message: str) -> None:
    with pytest.raises(AssertionSpecError) as info:
        parse_assertion(raw)
    assert message in str(info.value)
    assert info.value.field == field


# --- checks ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "passed", "reason"),
    [
        ({"type": "latency", "threshold": 2}, True, "latency 1.5 s <= 2 s"),
        ({"type": "latency", "threshold": 1}, False, "latency 1.5 s > 1 s"),
        ({"type": "latency", "threshold": 0.3, "metric": "ttft"}, True, "ttft 0.25 s <= 0.3 s"),
        ({"type": "latency", "threshold": 0.2, "metric": "ttft"}, False, "ttft 0.25 s > 0.2 s"),
        ({"type": "cost", "threshold": 0.002}, True, "cost 0.001 USD <= 0.002 USD"),
        ({"type": "cost", "threshold": 0.0005}, False, "cost 0.001 USD > 0.0005 USD"),
        ({"type": "tokens", "max": 200}, True, "output tokens 200 <= 200"),
        ({"type": "tokens", "max": 199}, False, "output tokens 200 > 199"),
        ({"type": "tokens", "max": 40, "which": "input"}, True, "input tokens 40 <= 40"),
        ({"type": "tokens", "max": 239, "which": "total"}, False, "total tokens 240 > 239"),
    ],
)
def test_limits_pass_and_fail(raw: Any, passed: bool, reason: str) -> None:
    verdict = check(raw)
    assert (verdict.passed, verdict.score, verdict.unchecked) == (passed, float(passed), False)
    assert verdict.reason == reason


def test_include_judges_adds_the_judge_cost() -> None:
    measures = CallMeasures(cost_usd=0.001, judge_cost=0.002, judge_calls=1)
    raw = {"type": "cost", "threshold": 0.002}
    assert check(raw, measures).passed
    verdict = check({**raw, "include_judges": True}, measures)
    assert not verdict.passed and verdict.reason == "cost with judges 0.003 USD > 0.002 USD"
    # No judge call: nothing to add, the check is made on the model's cost.
    assert check({**raw, "include_judges": True}, CallMeasures(cost_usd=0.001)).passed


@pytest.mark.parametrize(
    ("raw", "measures", "reason"),
    [
        (
            {"type": "latency", "threshold": 100},
            CallMeasures(latency_s=0.1, cached=True),
            "the answer came from the response cache: no call was timed",
        ),
        (
            {"type": "latency", "threshold": 100, "metric": "ttft"},
            CallMeasures(latency_s=0.1),
            "no time to first token: the call was not streamed",
        ),
        ({"type": "cost", "threshold": 100}, CallMeasures(), "cost unknown: no price for m"),
        (
            {"type": "cost", "threshold": 100, "include_judges": True},
            CallMeasures(cost_usd=0.0, judge_calls=2),
            "the judges' cost is unknown",
        ),
        (
            {"type": "tokens", "max": 10**9, "which": "total"},
            CallMeasures(input_tokens=3),
            "no total",
        ),
        ({"type": "tokens", "max": 10**9}, None, "the answer carries no measurements"),
    ],
)
def test_what_was_not_measured_is_unchecked_never_a_pass(
    raw: Any, measures: CallMeasures | None, reason: str
) -> None:
    verdict = check(raw, measures)
    assert (verdict.passed, verdict.unchecked) == (False, True)
    assert reason in verdict.reason
    assert verdict.to_dict()["unchecked"] is True


def test_unchecked_verdicts_are_left_out_of_the_score() -> None:
    failed = Verdict("contains", False, 0.0, 1.0, "no")
    unchecked = Verdict("latency", False, 0.0, 3.0, "cached", unchecked=True)
    assert score_verdicts([failed, unchecked]) == 0.0
    assert score_verdicts([Verdict("contains", True, 1.0, 1.0, "yes"), unchecked]) == 1.0
    assert score_verdicts([unchecked]) is None
    assert "unchecked" not in failed.to_dict()


# --- in a run, on the fake server's delays ---------------------------------------------------

TIMED = """
cases:
  - id: slow
    prompt: a slow question
    assert:
      - {type: latency, threshold: 0.3}
  - id: quick
    prompt: a quick question
    assert:
      - {type: latency, threshold: 30}
      - {type: cost, threshold: 1.0}
      - {type: tokens, max: 100}
"""


def test_latency_cost_and_tokens_pass_and_fail_on_a_delayed_answer(bench: Bench) -> None:
    bench.server.add_rule(Rule(match="slow", reply="ok", delay_s=0.6))
    bench.eval_file("timed", TIMED)
    result = bench.run("--models=fake")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        ["*slow on fake*", "*[[]FAIL[]] latency (weight 1): latency *s > 0.3 s"]
    )
    slow, quick = sorted(bench.records(), key=lambda record: record["case_id"] != "slow")
    assert slow["latency_s"] >= 0.6 and slow["assertions"][0]["passed"] is False
    assert [check["passed"] for check in quick["assertions"]] == [True, True, True]
    assert quick["assertions"][1]["reason"].startswith("cost ")


def test_cost_and_tokens_fail_above_their_limit(bench: Bench) -> None:
    bench.pricey_profile()  # 1 USD per token: a few tokens cost several dollars
    bench.eval_file(
        "spend",
        """
cases:
  - id: dear
    prompt: a question
    assert:
      - {type: cost, threshold: 0.5}
      - {type: tokens, max: 0}
""",
    )
    bench.run("--models=pricey").assert_outcomes(failed=1)
    (record,) = bench.records()
    cost, tokens = record["assertions"]
    assert not cost["passed"] and cost["reason"].startswith(f"cost {record['cost_usd']:.10g} USD")
    assert not tokens["passed"] and tokens["reason"] == "output tokens 1 > 0"


def test_a_cached_answers_latency_is_unchecked_and_the_item_not_passed(bench: Bench) -> None:
    bench.eval_file(
        "cached",
        """
cases:
  - id: only-latency
    prompt: one
    assert: [{type: latency, threshold: 30}]
  - id: with-contains
    prompt: two
    expected: ok
    assert: [contains, {type: latency, threshold: 30}]
""",
    )
    cache = ("--models=fake", "--cache=use", "--cache-dir=c")
    bench.run(*cache).assert_outcomes(passed=2)
    again = bench.run(*cache)
    again.assert_outcomes(passed=1, skipped=1)
    only, both = sorted(bench.records(), key=lambda record: record["case_id"])
    assert (only["outcome"], only["error_kind"], only["cached"]) == ("skipped", "unchecked", True)
    (latency,) = only["assertions"]
    assert latency["unchecked"] is True and latency["passed"] is False
    assert "response cache" in latency["reason"]
    assert both["outcome"] == "passed" and both["score"] == 1.0
    assert [check.get("unchecked", False) for check in both["assertions"]] == [False, True]


def test_a_model_without_a_price_leaves_its_cost_check_unchecked(bench: Bench) -> None:
    bench.unpriced_profile()
    bench.eval_file(
        "free", "cases:\n  - id: c\n    prompt: p\n    assert: [{type: cost, threshold: 1}]\n"
    )
    bench.run("--models=free").assert_outcomes(skipped=1)
    (record,) = bench.records()
    assert record["cost_usd"] is None and record["error_kind"] == "unchecked"
    assert record["assertions"][0]["reason"].startswith("cost unknown: no price for free")


def test_a_bad_limit_is_a_collection_error_at_its_line(bench: Bench) -> None:
    bench.eval_file(
        "bad",
        "cases:\n  - id: c\n    prompt: p\n    assert:\n      - {type: latency, metric: ttft}\n",
    )
    result = bench.run("--models=fake")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(["*bad.eval.yaml:5*latency needs a threshold*"])
    assert "Traceback" not in result.stdout.str()


def test_include_judges_adds_what_the_judges_cost_in_a_run(bench: Bench) -> None:
    from pytest_llmbench.scoring.base import number_text

    bench.server.add_rule(Rule(model="fake-model-2", reply='{"score": 0.9, "reason": "fine"}'))
    bench.eval_file(
        "judged",
        """
cases:
  - id: c
    prompt: p
    assert:
      - {type: llm-rubric, value: answers the question}
      - {type: cost, threshold: 1}
      - {type: cost, threshold: 1, include_judges: true}
""",
    )
    bench.run("--models=fake", "--judges=fake2").assert_outcomes(passed=1)
    (record,) = bench.records()
    assert record["judge_cost_usd"] > 0
    _, own, with_judges = (check["reason"] for check in record["assertions"])
    assert own == f"cost {number_text(record['cost_usd'])} USD <= 1 USD"
    total = number_text(record["cost_usd"] + record["judge_cost_usd"])
    assert with_judges == f"cost with judges {total} USD <= 1 USD"


def test_a_failure_shows_an_unchecked_check_as_such(bench: Bench) -> None:
    bench.eval_file(
        "mixed",
        "cases:\n  - id: c\n    prompt: p\n    expected: Paris\n"
        "    assert: [contains, {type: latency, threshold: 30, metric: ttft}]\n",
    )
    result = bench.run("--models=fake", "--stream=off")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*[[]FAIL[]] contains (weight 1): *",
            "*[[]UNCHECKED[]] latency (weight 1): no time to first token: the call was not streamed*",
        ]
    )


def test_the_pytest_html_row_shows_an_unchecked_check_as_such() -> None:
    from pytest_llmbench.report.html_columns import render_extra

    unchecked = Verdict("latency", False, 0.0, 1.0, "cached", unchecked=True).to_dict()
    failed = Verdict("contains", False, 0.0, 1.0, "no").to_dict()
    html = render_extra({"assertions": [unchecked, failed]})
    assert "<td>UNCHECKED</td><td>latency</td>" in html and "<td>FAIL</td><td>contains</td>" in html


@pytest.mark.parametrize(
    ("said", "expected", "passed", "reason"),
    [
        ("stop", "stop", True, "finished with 'stop'"),
        ("end_turn", "stop", True, "finished with 'end_turn' (read as 'stop')"),
        ("eos_token", "stop", True, "finished with 'eos_token' (read as 'stop')"),
        ("max_tokens", "stop", False, "finished with 'max_tokens' (read as 'length'), not stop"),
        ("tool_use", ["tool_calls"], True, "finished with 'tool_use' (read as 'tool_calls')"),
        ("abort", "stop", False, "finished with 'abort', not stop"),
    ],
)
def test_a_servers_own_word_for_a_finish_reason_is_read_as_openais(
    said: str, expected: Any, passed: bool, reason: str
) -> None:
    measures = dataclasses.replace(MEASURED, finish_reason=said)
    verdict = check({"type": "finish-reason", "value": expected}, measures)
    assert (verdict.passed, verdict.reason) == (passed, reason)
