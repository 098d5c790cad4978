"""Pairwise judging (``type: pairwise``) end to end, against the fake judge server.

The fake server scripts the evaluated model's answers (``fake-model``) and the judge's choice
(``fake-model-2``) by the answer it is shown first (``[Answer A]``). A first run writes the
baseline folder; a second run, with ``--baseline``, judges its answers against it.
"""

from __future__ import annotations

import csv
import json
import textwrap
from typing import Any

import pytest
from conftest import Bench, Rule

OLD = "Paris is the capital."
NEW = "The capital of France is Paris, on the Seine."


def pairwise_file(extra: str = "") -> str:
    return textwrap.dedent(
        """\
        cases:
          - id: paris
            prompt: What is the capital of France?
            assert:
              - type: pairwise
                value: the more informative answer
                judges: [fake2]
        """
    ) + "".join(f"    {line}\n" for line in extra.splitlines())


def answer_with(bench: Bench, text: str) -> None:
    bench.server.reset()
    bench.server.add_rule(Rule(model="fake-model", reply=text))


def judge_picks(bench: Bench, first_shown: str, choice: str) -> None:
    """The judge picks ``choice`` when ``first_shown`` is answer A."""
    rule = Rule(
        model="fake-model-2",
        match=f"[Answer A]\n{first_shown}",
        reply=json.dumps({"choice": choice}),
    )
    bench.server.add_rule(rule)


def judge_requests(bench: Bench) -> list[dict[str, Any]]:
    return [r.body for r in bench.server.chat_requests() if r.body["model"] == "fake-model-2"]


def baseline_run(bench: Bench, *args: str) -> None:
    """The baseline: the old answer, its pairwise item unchecked (no baseline of its own)."""
    answer_with(bench, OLD)
    bench.run("--models=fake", "--results-dir=base", *args)


def test_a_consistent_preference_is_a_win(bench: Bench) -> None:
    bench.eval_file("pair", pairwise_file())
    baseline_run(bench)
    answer_with(bench, NEW)
    judge_picks(bench, NEW, "A")  # the model's answer, shown first
    judge_picks(bench, OLD, "B")  # the model's answer, shown second
    bench.run("--models=fake", "--baseline=base").assert_outcomes(passed=1)
    (record,) = bench.records()
    (verdict,) = record["assertions"]
    assert verdict["score"] == 1.0 and record["dimensions"] == {"pairwise": 1.0}
    assert verdict["reason"].startswith("pairwise win against the baseline's fake (repeat 0)")
    orders = [
        (j["details"][0]["order"], j["details"][0]["picked"], j["choice"]) for j in record["judges"]
    ]
    assert sorted(orders) == [("baseline-first", "model", "B"), ("model-first", "model", "A")]
    prompts = sorted(r["messages"][0]["content"] for r in judge_requests(bench))
    assert len(prompts) == 2
    assert f"[Answer A]\n{OLD}\n\n[Answer B]\n{NEW}" in prompts[0]
    assert f"[Answer A]\n{NEW}\n\n[Answer B]\n{OLD}" in prompts[1]
    assert "[Question]\nWhat is the capital of France?" in prompts[0]
    assert "better (the more informative answer)" in prompts[0]


def test_a_position_disagreement_is_a_tie(bench: Bench) -> None:
    bench.eval_file("pair", pairwise_file())
    baseline_run(bench)
    answer_with(bench, NEW)
    judge_picks(bench, NEW, "A")  # A both times: the first shown wins, whichever it is
    judge_picks(bench, OLD, "A")
    bench.run("--models=fake", "--baseline=base").assert_outcomes(passed=1)
    (record,) = bench.records()
    (verdict,) = record["assertions"]
    assert verdict["score"] == 0.5 and record["dimensions"] == {"pairwise": 0.5}
    assert verdict["reason"].startswith(
        "pairwise tie against the baseline's fake (repeat 0): model shown first: prefers the "
        "model; baseline shown first: prefers the baseline"
    )


def test_a_consistent_preference_for_the_baseline_is_a_loss(bench: Bench) -> None:
    bench.eval_file("pair", pairwise_file())
    baseline_run(bench)
    answer_with(bench, NEW)
    judge_picks(bench, NEW, "B")
    judge_picks(bench, OLD, "A")
    result = bench.run("--models=fake", "--baseline=base")
    result.assert_outcomes(failed=1)
    (record,) = bench.records()
    assert record["assertions"][0]["score"] == 0.0
    assert "pairwise loss against the baseline's fake" in record["assertions"][0]["reason"]


def test_a_reply_outside_a_and_b_is_a_judge_error_not_a_score(bench: Bench) -> None:
    bench.eval_file("pair", pairwise_file())
    baseline_run(bench)
    answer_with(bench, NEW)
    judge_picks(bench, NEW, "A")
    judge_picks(bench, OLD, "C")
    bench.run("--models=fake", "--baseline=base").assert_outcomes(errors=1)
    (record,) = bench.records()
    assert record["outcome"] == "error" and record["assertions"] == []
    failed = [j for j in record["judges"] if j["error"]]
    assert len(failed) == 1 and failed[0]["call_attempts"] == 2
    assert failed[0]["details"][0]["order"] == "baseline-first"


@pytest.mark.parametrize("with_baseline", [True, False])
def test_no_baseline_answer_is_unchecked_with_the_reason(bench: Bench, with_baseline: bool) -> None:
    bench.eval_file("pair", pairwise_file())
    if with_baseline:  # a baseline of another case: this case's hash is not in it
        bench.eval_file("other", pairwise_file().replace("France", "Spain"))
        baseline_run(bench, "other.eval.yaml")
    answer_with(bench, NEW)
    args = ["--baseline=base"] if with_baseline else []
    result = bench.run("--models=fake", "pair.eval.yaml", *args)
    (record,) = bench.records()
    assert (record["outcome"], record["error_kind"]) == ("skipped", "unchecked")
    (verdict,) = record["assertions"]
    assert verdict["unchecked"] is True and verdict["passed"] is False
    why = "the baseline has no answer to this case" if with_baseline else "no --baseline run"
    assert verdict["reason"].startswith(f"unchecked: {why}")
    assert judge_requests(bench) == []
    result.assert_outcomes(skipped=1)


TWO_CASES = textwrap.dedent(
    """\
    assert:
      - type: pairwise
        judges: [fake2]
    cases:
      - id: paris
        prompt: What is the capital of France?
      - id: rome
        prompt: What is the capital of Italy?
    """
)


def outcomes(bench: Bench) -> list[tuple[str, float, str]]:
    return sorted(
        (r["case_id"], r["assertions"][0]["score"], r["assertions"][0]["reason"])
        for r in bench.records()
    )


def two_case_judge(bench: Bench) -> None:
    """The new answer wins France in both orders; Italy ties (A both times)."""
    bench.server.add_rule(Rule(model="fake-model", match="France", reply=NEW))
    bench.server.add_rule(Rule(model="fake-model", match="Italy", reply="Rome."))
    italy = Rule(model="fake-model-2", match="Italy", reply=json.dumps({"choice": "A"}))
    bench.server.add_rule(italy)
    judge_picks(bench, NEW, "A")
    judge_picks(bench, OLD, "B")


def test_identical_under_two_xdist_workers(bench: Bench) -> None:
    bench.eval_file("pair", TWO_CASES)
    baseline_run(bench)
    bench.server.reset()
    two_case_judge(bench)
    bench.run("--models=fake", "--baseline=base").assert_outcomes(passed=2)
    serial = outcomes(bench)
    assert [(case, score) for case, score, _ in serial] == [("paris", 1.0), ("rome", 0.5)]
    result = bench.run_subprocess("-n", "2", "--models=fake", "--baseline=base")
    result.assert_outcomes(passed=2)
    assert outcomes(bench) == serial
    assert {r["worker"] for r in bench.records()} <= {"gw0", "gw1"}


@pytest.mark.parametrize("again", ["--cache=replay", "--rescore"])
def test_replayed_from_the_cache_with_no_judge_request(bench: Bench, again: str) -> None:
    bench.eval_file("pair", TWO_CASES)
    baseline_run(bench)
    bench.server.reset()
    two_case_judge(bench)
    bench.run("--models=fake", "--baseline=base", "--cache=use", "--cache-dir=c")
    first = outcomes(bench)
    bench.server.reset()  # nothing scripted: any call would be answered "ok", a bad verdict
    bench.run("--models=fake", "--baseline=base", again, "--cache-dir=c").assert_outcomes(passed=2)
    assert judge_requests(bench) == []
    assert outcomes(bench) == first
    assert all(j["cached"] for r in bench.records() for j in r["judges"])


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ("    scope: conversation", "`scope` applies to judged assertions"),
        ("    dimensions: [tone]", "'dimensions' applies to jury only"),
        ("    threshold: 2", "threshold must be between 0 and 1"),
    ],
)
def test_a_bad_pairwise_is_a_collection_error_at_its_line(
    bench: Bench, extra: str, message: str
) -> None:
    bench.eval_file("pair", pairwise_file(extra))
    result = bench.run("--models=fake")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines([f"*pair.eval.yaml:*{message}*"])
    assert "Traceback" not in result.stdout.str()
    assert judge_requests(bench) == []


# --- the baseline's answer and the outcome, by hand -------------------------------------------


def rec(model: str, repeat: int, response: str | None, case_hash: str = "h1") -> dict[str, Any]:
    return {"case_hash": case_hash, "model": model, "repeat": repeat, "response": response}


def test_the_baseline_answer_of_a_case_prefers_the_same_model_and_repeat() -> None:
    from pytest_llmbench.scoring.pairwise import BaselineAnswer, baseline_answer

    records = [rec("a", 0, "a0"), rec("b", 0, "b0"), rec("b", 1, "b1"), rec("a", 1, None)]
    assert baseline_answer(records, "h1", "b", 1) == BaselineAnswer("b1", "b", 1)
    assert baseline_answer(records, "h1", "a", 1) == BaselineAnswer("a0", "a", 0)  # no answer
    assert "with a, b, not c" in str(baseline_answer(records, "h1", "c", 0))  # which one?
    only = [rec("gpt", 0, "g0")]  # one other model: compare with its answer
    assert baseline_answer(only, "h1", "c", 0) == BaselineAnswer("g0", "gpt", 0)
    assert "no answer to this case" in str(baseline_answer(records, "h2", "a", 0))


@pytest.mark.parametrize(
    ("first", "second", "expected"),
    [
        (["model"], ["model"], "win"),
        (["baseline"], ["baseline"], "loss"),
        (["model"], ["baseline"], "tie"),  # position bias: A both times
        (["model", "model", "baseline"], ["model", "baseline", "model"], "win"),  # majorities
        (["model", "baseline"], ["model"], "tie"),  # an even split prefers neither
    ],
)
def test_the_outcome_of_two_orders(first: list[str], second: list[str], expected: str) -> None:
    from pytest_llmbench.scoring.pairwise import outcome, preference

    assert outcome(str(preference(first)), str(preference(second))) == expected


# --- win rates: the leaderboard's columns and the report's matrix ------------------------------


def pair_record(model: str, score: float | None, opponent: str = "base") -> dict[str, Any]:
    """An answered record with one pairwise verdict (None: unchecked)."""
    verdict = {"type": "pairwise", "score": score or 0.0, "unchecked": score is None}
    judge = {"type": "pairwise", "details": [{"order": "model-first", "opponent": opponent}]}
    return {"model": model, "outcome": "passed", "assertions": [verdict], "judges": [judge]}


def test_win_rates_on_a_hand_worked_example() -> None:
    from pytest_llmbench.results.winrates import model_win_rates, pairs, win_matrix

    records = [
        *(pair_record("m1", score) for score in (1.0, 1.0, 0.5, 0.0)),  # 2.5 wins of 4
        pair_record("m1", None),  # unchecked: no pair
        {**pair_record("m1", 1.0), "outcome": "error"},  # errored: no pair
        pair_record("m2", 0.5, "other"),
        pair_record("m2", 0.5, "other"),
    ]
    rates = model_win_rates(pairs(records))
    m1, m2 = rates["m1"], rates["m2"]
    # Wilson, z = 1.96: centre (0.625 + z²/8) / (1 + z²/4), half z·sqrt(0.625·0.375/4 + z²/64) / (1 + z²/4)
    assert (m1.rate, m1.n) == (0.625, 4)
    assert (m1.low, m1.high) == pytest.approx((0.2194, 0.9081), abs=1e-4)
    assert (m2.rate, m2.n) == (0.5, 2)  # two ties: half a win each
    assert (m2.low, m2.high) == pytest.approx((0.0945, 0.9055), abs=1e-4)
    matrix = win_matrix(pairs(records))
    # A baseline run's model is marked: a model of this run (select-best) may have its name.
    assert {model: list(row) for model, row in matrix.items()} == {
        "m1": ["base (baseline)"],
        "m2": ["other (baseline)"],
    }
    assert matrix["m1"]["base (baseline)"] == m1


def test_the_leaderboard_and_the_report_show_win_rates(bench: Bench) -> None:
    bench.eval_file("pair", TWO_CASES)
    baseline_run(bench)
    bench.server.reset()
    two_case_judge(bench)  # paris a win, rome a tie: 1.5 of 2; Wilson(0.75, n=2) by hand
    bench.run("--models=fake", "--baseline=base").assert_outcomes(passed=2)
    with bench.out("leaderboard.csv").open() as handle:
        (row,) = csv.DictReader(handle)
    assert float(row["win_rate"]) == 0.75 and row["n_pairs"] == "2"
    assert float(row["win_rate_ci_low"]) == pytest.approx(0.1979, abs=1e-4)
    assert float(row["win_rate_ci_high"]) == pytest.approx(0.9733, abs=1e-4)
    html = bench.out("report.html").read_text(encoding="utf-8")
    assert '<section id="pairwise"><h2>Pairwise</h2>' in html
    assert '<th class="num">vs fake (baseline)</th>' in html
    assert '<td>fake</td><td class="num">0.75 [0.20, 0.97] (n=2)</td>' in html
    board = html.split('<table class="leaderboard">')[1].split("</table>")[0]
    assert '<th class="num">win rate (95% CI)</th>' in board
    assert '<td class="num">0.75 [0.20, 0.97] (n=2)</td>' in board


def test_a_run_without_pairs_has_no_win_rate_columns(bench: Bench) -> None:
    bench.server.add_rule(Rule(model="fake-model", reply="Paris"))
    bench.eval_file(
        "plain",
        "cases:\n  - id: a\n    prompt: Capital?\n    assert: [{type: contains, value: Paris}]\n",
    )
    bench.run("--models=fake").assert_outcomes(passed=1)
    with bench.out("leaderboard.csv").open() as handle:
        (row,) = csv.DictReader(handle)
    assert "win_rate" not in row
    assert "Pairwise</h2>" not in bench.out("report.html").read_text(encoding="utf-8")


def test_a_pairwise_on_a_conversation_turn_is_unchecked(bench: Bench) -> None:
    bench.server.add_rule(Rule(model="fake-model", reply=NEW))
    bench.eval_file(
        "talk",
        textwrap.dedent(
            """\
            cases:
              - id: talk
                turns:
                  - user: Hello.
                  - user: What is the capital of France?
                    assert: [{type: pairwise, judges: [fake2]}]
            """
        ),
    )
    bench.run("--models=fake", "--results-dir=base")
    bench.run("--models=fake", "--baseline=base").assert_outcomes(skipped=1)
    (record,) = bench.records()
    (verdict,) = record["conversation"][-1]["assertions"]
    assert verdict["unchecked"] is True
    assert "a conversation's replies have no baseline to match" in verdict["reason"]
    assert judge_requests(bench) == []
