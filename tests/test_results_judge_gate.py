"""The judge gate: judges that disagree with people's labels are demoted (their verdicts left
unchecked) or fail the run; a good judge is untouched; too few labels says so. Against the fake
server: a first run's records are labelled with ``append_review`` (the machine snapshot real),
then a second run is gated on those labels."""

from __future__ import annotations

import csv
import dataclasses
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest
from conftest import Bench
from fakeserver import Rule

from pytest_llmbench.config import JudgeGate, RunConfig, parse_judge_gate
from pytest_llmbench.engine import JudgeRuling
from pytest_llmbench.results.judge_gate import (
    below_gate,
    failing_judges,
    gate_block,
    gate_lines,
    rule,
)
from pytest_llmbench.results.reviews import (
    Review,
    answer_digest,
    append_review,
    machine_verdict,
    review_key,
)
from pytest_llmbench.results.stats.calibration import Confusion, JudgeGroup, calibrate_group

#: Six cases judged by two rubrics: BAD-RUBRIC's judge passes q1-q3 and fails q4-q6 (people say
#: the opposite), GOOD-RUBRIC's agrees with people; q4 has a check of its own besides.
EVAL = """
{gate}cases:
{cases}
"""


def _cases(rubric: str) -> str:
    lines = []
    for n in range(1, 7):
        extra = "\n      - {type: contains, value: ok}" if n == 4 else ""
        lines.append(
            f"  - id: q{n}\n    prompt: question Q{n}\n    assert:\n"
            f"      - {{type: llm-rubric, value: {rubric} answers, judges: [fake2]}}{extra}"
        )
    return "\n".join(lines)


def _judge(bench: Bench) -> None:
    server = bench.server
    server.add_rule(Rule(model="fake-model", reply="ok"))
    for n in range(1, 7):
        score = 0.9 if n <= 3 else 0.1
        reply = json.dumps({"score": score, "reason": f"judge on Q{n}"})
        server.add_rule(Rule(model="fake-model-2", match_any=f"question Q{n}", reply=reply))


def _write(bench: Bench, rubric: str, gate: str = "") -> None:
    bench.eval_file("gate", EVAL.format(gate=gate, cases=_cases(rubric)))


def _label(bench: Bench, agree: bool, count: int = 6) -> Path:
    """Label the first run's first ``count`` items: the judge's verdict when ``agree``, the
    opposite otherwise; in ./labels/reviews.jsonl. The labels are keyed to another model's
    answers (an earlier model's, judged by the same judge): they calibrate the judge but decide
    none of the gated run's items (a label on an item of the run would: a person's verdict)."""
    path = bench.pytester.path / "labels" / "reviews.jsonl"
    records = sorted(bench.records(), key=lambda r: r["case_id"])[:count]
    for record in records:
        passed = machine_verdict(record, 0).passed
        assert passed is not None
        label = "pass" if passed == agree else "fail"
        key = dataclasses.replace(review_key(record, 0), model="earlier-model")
        review = Review(key, answer_digest(record), label, machine=machine_verdict(record, 0))
        append_review(path, review)
    return path


def _first_run(bench: Bench, rubric: str) -> None:
    _judge(bench)
    _write(bench, rubric)
    bench.run("--models=fake").assert_outcomes(passed=3, failed=3)


def _run_json(bench: Bench) -> dict[str, Any]:
    info: dict[str, Any] = json.loads(bench.out("run.json").read_text())
    return info


def test_a_judge_people_disagree_with_has_its_verdicts_demoted(bench: Bench) -> None:
    _first_run(bench, "BAD-RUBRIC")
    _label(bench, agree=False)
    result = bench.run(
        "--models=fake", "--reviews-dir=labels", "--judge-gate=min_kappa=0.6,min_labels=5"
    )
    # q1-q3 (judge passed) and q5, q6 (judge failed, nothing else checked): skipped; q4 passes
    # on its own check.
    result.assert_outcomes(passed=1, skipped=5)
    records = {r["case_id"]: r for r in bench.records()}
    entry = records["q5"]["assertions"][0]
    assert entry["demoted"] is True and entry["unchecked"] is True
    assert entry["judge_gate"] == "demoted"
    assert entry["passed"] is False  # as the judge said: a label on it still calibrates
    assert entry["reason"].startswith(
        'demoted: judge fake2 llm-rubric "BAD-RUBRIC answers" kappa -1.00 ['
    )
    assert (
        "< 0.6 on 6 labels (balanced) (the judge said fail: rubric 0.10 (pass >= 0.5); judge on Q5)"
        in entry["reason"]
    )
    assert records["q4"]["outcome"] == "passed"
    assert records["q4"]["assertions"][1].get("demoted") is None
    block = _run_json(bench)["judge_gate"]
    assert block["settings"] == {"min_kappa": 0.6, "min_labels": 5, "on_fail": "demote"}
    (group,) = block["groups"]
    assert group["judges"] == ["fake2"] and group["decision"] == "demoted"
    assert group["n"] == 6 and group["kappa"] == pytest.approx(-1.0)
    assert group["verdicts_demoted"] == 6
    result.stdout.fnmatch_lines(["*judge gate: fake2 llm-rubric*6 verdict(s) demoted*"])
    assert _run_json(bench)["exitstatus"] == 0


def test_fail_mode_keeps_the_verdicts_and_fails_the_run_naming_the_judge(bench: Bench) -> None:
    _first_run(bench, "BAD-RUBRIC")
    _label(bench, agree=False)
    result = bench.run(
        "--models=fake", "--reviews-dir=labels", "--judge-gate=min_labels=5", "--judge-gate-fail"
    )
    result.assert_outcomes(passed=3, failed=3)
    assert result.ret == 1
    records = {r["case_id"]: r for r in bench.records()}
    assert records["q1"]["assertions"][0]["judge_gate"] == "failing"
    assert "demoted" not in records["q1"]["assertions"][0]
    info = _run_json(bench)
    assert info["gate_failures"] == [
        'judge gate: fake2 llm-rubric "BAD-RUBRIC answers" disagrees with people (6 verdict(s))'
    ]
    assert info["judge_gate"]["groups"][0]["decision"] == "failing"
    result.stdout.fnmatch_lines(["*llmbench gate FAILED: judge gate: fake2 llm-rubric*"])


def test_a_judge_people_agree_with_is_untouched(bench: Bench) -> None:
    _first_run(bench, "GOOD-RUBRIC")
    _label(bench, agree=True)
    result = bench.run("--models=fake", "--reviews-dir=labels", "--judge-gate=min_labels=5")
    result.assert_outcomes(passed=3, failed=3)
    records = bench.records()
    assert all(r["assertions"][0]["judge_gate"] == "ok" for r in records)
    assert not any(r["assertions"][0].get("unchecked") for r in records)
    (group,) = _run_json(bench)["judge_gate"]["groups"]
    assert group["decision"] == "ok" and group["kappa"] == pytest.approx(1.0)
    assert group["verdicts_demoted"] == 0
    assert "judge gate:" not in result.stdout.str()


def test_labels_without_a_machine_verdict_count_as_in_the_calibration_csv(bench: Bench) -> None:
    # imported labels keep no machine verdict: paired with the records of the run they were
    # given on (the results folder's), the gate counts them as judge_calibration.csv does
    _first_run(bench, "BAD-RUBRIC")
    path = _label(bench, agree=False)
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    # keyed to the run's own items (the records they pair with): each is then a person's
    # verdict on its item too, people saying the opposite of the judge
    bench.out("reviews.jsonl").write_text(
        "".join(json.dumps({**line, "model": "fake", "machine": None}) + "\n" for line in lines)
    )
    path.unlink()
    result = bench.run("--models=fake", "--judge-gate=min_kappa=0.6,min_labels=5")
    result.assert_outcomes(passed=3, failed=3)
    assert {r["verdict_source"] for r in bench.records()} == {"human"}
    (group,) = _run_json(bench)["judge_gate"]["groups"]
    assert (group["decision"], group["n"]) == ("demoted", 6)
    (row,) = list(csv.DictReader(bench.out("judge_calibration.csv").open()))
    assert row["n"] == "6"


def test_too_few_labels_says_so_and_gates_nothing(bench: Bench) -> None:
    _first_run(bench, "BAD-RUBRIC")
    _label(bench, agree=False, count=4)
    result = bench.run("--models=fake", "--reviews-dir=labels", "--judge-gate=min_labels=50")
    result.assert_outcomes(passed=3, failed=3)
    (group,) = _run_json(bench)["judge_gate"]["groups"]
    assert group["decision"] == "too_few_labels" and group["n"] == 4
    lines = [line for line in result.stdout.lines if "judge gate:" in line]
    assert lines == [
        'llmbench: judge gate: fake2 llm-rubric "BAD-RUBRIC answers": 4 labels < 50, not gated'
    ]


def test_a_files_judge_gate_overrides_the_ini(bench: Bench) -> None:
    _first_run(bench, "BAD-RUBRIC")
    _label(bench, agree=False)
    bench.pytester.makeini("[pytest]\nllmbench_judge_gate = min_kappa=0.6,min_labels=500\n")
    _write(bench, "BAD-RUBRIC", gate="judge_gate: {min_labels: 5}\n")
    result = bench.run("--models=fake", "--reviews-dir=labels")
    result.assert_outcomes(passed=1, skipped=5)
    # without the file's key the ini's 500 labels are too many to gate on
    _write(bench, "BAD-RUBRIC")
    bench.run("--models=fake", "--reviews-dir=labels").assert_outcomes(passed=3, failed=3)
    assert _run_json(bench)["judge_gate"]["groups"][0]["decision"] == "too_few_labels"


def test_under_xdist_the_records_are_those_of_one_process(bench: Bench) -> None:
    _first_run(bench, "BAD-RUBRIC")
    _label(bench, agree=False)
    args = ("--models=fake", "--reviews-dir=labels", "--judge-gate=min_labels=5")
    bench.run(*args).assert_outcomes(passed=1, skipped=5)
    alone = _comparable(bench.records())
    result = bench.run_subprocess(*args, "-n", "2")
    result.assert_outcomes(passed=1, skipped=5)
    assert _comparable(bench.records()) == alone


def _comparable(records: list[dict[str, Any]]) -> list[Any]:
    return sorted((r["case_id"], r["outcome"], r["assertions"]) for r in records)


# -- bad settings -------------------------------------------------------------------------------
def test_a_bad_file_key_names_the_file_and_line(bench: Bench) -> None:
    bench.eval_file("bad", "description: x\njudge_gate: {min_kappa: 2}\ncases:\n  - prompt: hi\n")
    result = bench.run("--models=fake")
    result.stdout.fnmatch_lines(["*bad.eval.yaml:2*min_kappa*"])
    assert result.ret != 0


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("min_kappa=x", "*--judge-gate min_kappa must be between -1 and 1, got 'x'*"),
        ("min_labels=0", "*--judge-gate min_labels must be a whole number >= 1, got '0'*"),
        ("kappa=0.5", "*--judge-gate takes min_kappa=K,min_labels=N*got 'kappa=0.5'*"),
        ("on_fail=warn", "*--judge-gate on_fail must be demote or fail, got 'warn'*"),
    ],
)
def test_a_bad_option_is_a_usage_error_naming_it(bench: Bench, value: str, message: str) -> None:
    bench.eval_file("one", "cases:\n  - prompt: hi\n")
    result = bench.run("--models=fake", f"--judge-gate={value}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])


def test_a_broken_labels_file_is_a_usage_error_naming_its_line(bench: Bench) -> None:
    bench.eval_file("one", "cases:\n  - prompt: hi\n")
    bench.pytester.makefile(".jsonl", **{"labels/reviews": "{not json\n"})
    result = bench.run("--models=fake", "--reviews-dir=labels", "--judge-gate=min_kappa=0.5")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*labels/reviews.jsonl:1: not JSON*"])


# -- the rulings, directly ------------------------------------------------------------------------
GROUP = JudgeGroup(("j",), "llm-rubric", "polite")


def test_parse_judge_gate_fills_the_defaults() -> None:
    assert parse_judge_gate("min_kappa=0.4") == JudgeGate(0.4, 50, False)
    assert parse_judge_gate("min_labels=10,on_fail=fail") == JudgeGate(0.6, 10, True)
    assert parse_judge_gate("min_labels=10", fail=True).mode == "fail"


def test_rule_decides_on_labels_then_kappa() -> None:
    gate = JudgeGate(0.6, 10)
    few = calibrate_group(GROUP, [])
    assert rule(few, gate).decision == "too_few_labels"
    pairs = _pairs(tp=8, fp=6, fn=0, tn=2)
    low = calibrate_group(GROUP, pairs)
    ruling = rule(low, gate)
    assert ruling.decision == "demoted"
    assert ruling.reason == "demoted: " + below_gate(low, 0.6)
    assert ruling.reason.endswith("< 0.6 on 16 labels (lenient)")
    assert rule(low, JudgeGate(0.6, 10, fail=True)).decision == "failing"
    good = calibrate_group(GROUP, _pairs(tp=8, fp=0, fn=0, tn=8))
    assert rule(good, gate).decision == "ok"
    # people and judge always passing: kappa undefined, which is no evidence against the judge
    same = calibrate_group(GROUP, _pairs(tp=60))
    assert (same.kappa, same.agreement) == (None, 1.0)
    assert rule(same, gate) == JudgeRuling("kappa_undefined")
    # the kappa paradox: 59 of 60 agree, yet kappa is 0 (the judge never failed): demoted
    paradox = calibrate_group(GROUP, _pairs(tp=59, fp=1))
    assert paradox.kappa == 0.0 and paradox.kappa_ci == pytest.approx((0.0, 0.0), abs=1e-6)
    assert rule(paradox, gate).decision == "demoted"


def _pairs(**cells: int) -> list[Any]:
    from pytest_llmbench.results.stats.calibration import LabelPair

    confusion = Confusion(**cells)
    out = []
    for judge, human, count in (
        (True, True, confusion.tp),
        (True, False, confusion.fp),
        (False, True, confusion.fn),
        (False, False, confusion.tn),
    ):
        out += [LabelPair(GROUP, human, judge)] * count
    return out


def test_gate_lines_name_each_decision() -> None:
    block = {
        "settings": {"min_labels": 50},
        "groups": [
            {"judges": ["j"], "type": "t", "criterion": None, "n": 3, "decision": "too_few_labels"},
            {"judges": ["k"], "type": "t", "criterion": None, "n": 60, "kappa": 0.2,
             "ci": [0.1, 0.3], "leaning": "strict", "decision": "demoted", "verdicts_demoted": 4},
            {"judges": ["m"], "type": "t", "criterion": None, "n": 60, "kappa": 0.9,
             "ci": [0.8, 1.0], "leaning": "balanced", "decision": "ok", "verdicts_demoted": 0},
            {"judges": ["u"], "type": "t", "criterion": None, "n": 60, "kappa": None,
             "agreement": 1.0, "decision": "kappa_undefined", "verdicts_demoted": 0},
        ],
    }  # fmt: skip
    assert gate_lines(block) == [
        "judge gate: j t: 3 labels < 50, not gated",
        "judge gate: k t: kappa 0.20 [0.10, 0.30] (strict) on 60 labels: 4 verdict(s) demoted "
        "to unchecked",
        "judge gate: u t: kappa undefined: people and the judge each gave one verdict only on 60 "
        "labels (agreement 100%), not gated",
    ]


def _gated_record(criterion: str | None, decision: str) -> dict[str, Any]:
    entry = {"type": "factuality", "passed": True, "criterion": criterion, "judge_gate": decision}
    return {"assertions": [entry], "judges": [{"assertion": 0, "judge": "j", "error": None}]}


def test_groups_with_and_without_a_criterion_sort_in_the_block_and_the_failures() -> None:
    records = [_gated_record(None, "failing"), _gated_record("Paris", "failing")]
    run = SimpleNamespace(judge_gate=JudgeGate(0.6, 2), judge_gate_fail=False)
    block = gate_block(cast(RunConfig, run), records, {})
    assert block is not None
    assert [g["criterion"] for g in block["groups"]] == [None, "Paris"]
    assert failing_judges(records) == [
        "judge gate: j factuality disagrees with people (1 verdict(s))",
        'judge gate: j factuality "Paris" disagrees with people (1 verdict(s))',
    ]
    assert gate_lines(None) == []


TALK = """
cases:
  - id: talk
    turns:
      - user: Hello TURN-ONE
        assert:
          - {type: llm-rubric, value: TURN-RUBRIC greets back, judges: [fake2]}
      - user: Bye TURN-TWO
        assert:
          - {type: contains, value: ok}
"""


def test_a_conversation_turns_judged_verdict_is_demoted_too(bench: Bench) -> None:
    bench.server.add_rule(Rule(model="fake-model", reply="ok"))
    reply = json.dumps({"score": 0.9, "reason": "greets"})
    bench.server.add_rule(Rule(model="fake-model-2", match_any="TURN-RUBRIC", reply=reply))
    bench.eval_file("talk", TALK)
    bench.run("--models=fake").assert_outcomes(passed=1)
    _label(bench, agree=False, count=1)
    result = bench.run("--models=fake", "--reviews-dir=labels", "--judge-gate=min_labels=1")
    result.assert_outcomes(passed=1)  # the second turn's own check passes it
    (record,) = bench.records()
    first, second = record["assertions"]
    assert first["turn"] == 1 and first["demoted"] is True and first["unchecked"] is True
    assert "kappa 0.00 [0.00, 0.00] < 0.6 on 1 labels" in first["reason"]
    assert second["turn"] == 2 and "judge_gate" not in second
    assert _run_json(bench)["judge_gate"]["groups"][0]["judges"] == ["fake2"]


def test_decide_fails_a_run_with_a_failing_judge_and_keeps_a_worse_status() -> None:
    from types import SimpleNamespace

    from pytest_llmbench.results.gates import RunState, decide

    run: Any = SimpleNamespace(
        min_pass_rate=None,
        repeat_policy="all",
        fail_on_regression=False,
        max_latency_p95=None,
        max_ttft_p50=None,
        max_cost_per_item=None,
    )
    entry = {"type": "llm-rubric", "passed": True, "criterion": "polite", "judge_gate": "failing"}
    record = {
        "model": "m",
        "outcome": "passed",
        "assertions": [entry],
        "judges": [{"assertion": 0, "judge": "j", "model_id": "x/j", "error": None}],
    }
    ok = RunState(exitstatus=0, other_failures=0, cut_short=False)
    decision = decide(ok, run, board=None, repeats=None, records=[record])
    assert decision.exitstatus == pytest.ExitCode.TESTS_FAILED
    (failure,) = decision.failures
    assert failure.describe() == (
        'judge gate: j llm-rubric "polite" disagrees with people (1 verdict(s))'
    )
    worse = RunState(exitstatus=pytest.ExitCode.INTERRUPTED, other_failures=0, cut_short=True)
    decided = decide(worse, run, board=None, repeats=None, records=[record])
    assert decided.exitstatus == pytest.ExitCode.INTERRUPTED
    fine = {**record, "assertions": [{**entry, "judge_gate": "ok"}]}
    assert decide(ok, run, board=None, repeats=None, records=[fine]).exitstatus == 0


def test_a_label_on_a_demoted_verdict_still_sees_what_the_judge_said() -> None:
    entry = {"type": "llm-rubric", "passed": True, "unchecked": True, "criterion": "polite"}
    record = {
        "case_hash": "h",
        "model": "m",
        "assertions": [{**entry, "demoted": True, "judge_gate": "demoted"}, entry],
        "judges": [
            {"assertion": 0, "judge": "j", "error": None},
            {"assertion": 1, "judge": "j", "error": None},
        ],
    }
    assert machine_verdict(record, 0).passed is True  # demoted: the judge's verdict
    assert machine_verdict(record, 1).passed is None  # otherwise unchecked: nothing decided


def test_a_judge_that_failed_on_an_item_stays_in_its_panels_group() -> None:
    # one rule for the gate, judges_of and calibration: the panel as configured
    from pytest_llmbench.judging.panel import GradedAssertion, JudgeCall
    from pytest_llmbench.scoring import Verdict

    verdict = Verdict("llm-rubric", True, 1.0, 1.0, "ok")
    calls = (
        JudgeCall(0, "llm-rubric", "b", "openai/b"),
        JudgeCall(0, "llm-rubric", "a", "openai/a", error="timeout"),
    )
    assert GradedAssertion(0, verdict, calls).judges == ("a", "b")
    record = {
        "assertions": [verdict.to_dict()],
        "judges": [call.to_dict() for call in calls],
    }
    assert machine_verdict(record, 0).judges == ("a", "b")


def test_a_retry_of_errors_is_gated_on_the_completed_runs_labels(bench: Bench) -> None:
    # --retry-errors DIR without --results-dir: DIR's reviews.jsonl is the run's
    bench.server.add_rule(Rule(model="fake-model", match="question Q6", status=500))
    _judge(bench)
    _write(bench, "BAD-RUBRIC")
    gate = "--judge-gate=min_kappa=0.6,min_labels=5"
    bench.run("--models=fake", "--max-retries=0", gate).assert_outcomes(
        passed=3, failed=2, errors=1
    )
    labels = _label(bench, agree=False, count=5)
    bench.out("reviews.jsonl").write_text(labels.read_text())
    labels.unlink()
    bench.server.reset()
    _judge(bench)
    bench.pytester.runpytest(
        "-p", "no:cacheprovider", "--models=fake", "--retry-errors=out", "--max-retries=0", gate
    )  # fmt: skip
    records = {r["case_id"]: r for r in bench.records()}
    entry = records["q6"]["assertions"][0]
    assert (entry["judge_gate"], entry["unchecked"]) == ("demoted", True)
