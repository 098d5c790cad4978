"""``--stop-early``: a case's repeats stop once its verdict under the repeat policy is settled.

Against the fake server, under ``-n 0`` and ``-n 2`` (pytest-xdist for real): a stable case
stops at the floor, a flaky one runs every repeat, the server sees one request per repeat taken
and none for a skipped one, the records and the summary say so, and the verdicts are those of a
run without early stopping on the same answers.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pandas  # noqa: F401  (imported once: numpy cannot be re-imported by pytester's runs)
import pytest
from conftest import Bench, Rule

from pytest_llmbench.engine import CallPlan, StopEarly
from pytest_llmbench.results import StopRule

STABILITY = """
description: Stable and flaky cases
model_params: {temperature: 0, max_tokens: 16}
cases:
  - id: right
    prompt: What is the capital of France?
    expected: Paris
    assert: [contains]
  - id: wrong
    prompt: What is the capital of Japan?
    expected: Tokyo
    assert: [contains]
  - id: flaky
    prompt: Is it flaky?
    expected: "yes"
    assert: [contains]
"""


def _answers(bench: Bench) -> None:
    """France always right, Japan always wrong, 'flaky' yes, no, then yes for good."""
    bench.server.reset()
    for rule in (
        Rule(match="France", reply="Paris."),
        Rule(match="Japan", reply="Kyoto."),
        Rule(match="flaky", reply="yes", times=1),
        Rule(match="flaky", reply="no", times=1),
        Rule(match="flaky", reply="yes"),
    ):
        bench.server.add_rule(rule)


def _requests_by_case(bench: Bench) -> Counter[str]:
    counts: Counter[str] = Counter()
    for request in bench.server.chat_requests():
        text = json.dumps(request.body)
        counts["right" if "France" in text else "wrong" if "Japan" in text else "flaky"] += 1
    return counts


def _verdicts(bench: Bench) -> tuple[dict[str, str], Any]:
    """Each case's verdict (case_verdicts.csv) and the policy's counts (run.json)."""
    import csv

    with bench.out("case_verdicts.csv").open(newline="", encoding="utf-8") as handle:
        verdicts = {row["case_id"]: row["verdict"] for row in csv.DictReader(handle)}
    run_info = json.loads(bench.out("run.json").read_text(encoding="utf-8"))
    return verdicts, run_info["repeat_policy"]


def _run(bench: Bench, workers: str, *extra: str) -> pytest.RunResult:
    _answers(bench)
    args = ("--models=fake", "--repeat=3", "--repeat-policy=majority", "-n", workers, *extra)
    if workers == "0":
        return bench.run(*args)
    return bench.run_subprocess(*args)


@pytest.mark.parametrize("workers", ["0", "2"])
def test_settled_cases_stop_and_skipped_repeats_send_no_request(bench: Bench, workers: str) -> None:
    bench.eval_file("stability", STABILITY)
    full = _run(bench, workers)
    full.assert_outcomes(passed=5, failed=4)  # flaky: yes, no, yes
    full_verdicts = _verdicts(bench)
    assert sum(_requests_by_case(bench).values()) == 9

    stopped = _run(bench, workers, "--stop-early")
    # right: 2 passes settle a majority of 3; wrong: 2 fails; flaky: 1-1 runs the third
    stopped.assert_outcomes(passed=4, failed=3, skipped=2)
    assert _requests_by_case(bench) == {"right": 2, "wrong": 2, "flaky": 3}
    assert _verdicts(bench) == full_verdicts

    records = bench.records()
    assert {record["samples_planned"] for record in records} == {3}
    skipped = sorted(
        (record["case_id"], record["repeat"], record["error"])
        for record in records
        if record["stopped_early"]
    )
    assert skipped == [
        ("right", 2, "stopped early: pass settled after 2 of 3 repeats (exact)"),
        ("wrong", 2, "stopped early: fail settled after 2 of 3 repeats (exact)"),
    ]
    assert all(r["outcome"] == "skipped" for r in records if r["stopped_early"])
    assert all(r["cost_usd"] is None for r in records if r["stopped_early"])
    stopped.stdout.fnmatch_lines(
        [
            "*llmbench leaderboard*",
            "pass@k, pass^k and CIs computed on the samples taken (early stopping: conditional "
            "on the stopping rule); 2 repeat(s) not run",
            "*early stopping: 2 of 9 repeats not run, ≈ $* saved (exact stopping rule)",
        ]
    )
    report = bench.out("report.html").read_text(encoding="utf-8")
    assert "computed on the samples taken (early stopping: conditional" in report
    (board,) = _rows(bench, "leaderboard.csv")
    assert board["n_stopped_early"] == "2" and board["n_skipped"] == "2"
    run_info = json.loads(bench.out("run.json").read_text(encoding="utf-8"))
    assert run_info["stop_early"]["repeats_planned"] == 9
    assert run_info["stop_early"]["repeats_not_run"] == 2
    assert run_info["stop_early"]["rule"] == "exact"


def test_pass_at_k_keeps_the_floor_as_its_k(bench: Bench) -> None:
    bench.eval_file("stability", STABILITY)
    _answers(bench)
    bench.run("--models=fake", "--repeat=4", "--stop-early", "--stop-early-min=3")
    records = bench.records()
    taken = Counter(r["case_id"] for r in records if r["outcome"] in ("passed", "failed"))
    # all: right needs all 4; wrong stops at the floor of 3 answered; flaky fails at 3 too
    assert taken == {"right": 4, "wrong": 3, "flaky": 3}
    (board,) = _rows(bench, "leaderboard.csv")
    assert board["k"] == "3"  # the floor, not 1 or 2


def _rows(bench: Bench, name: str) -> list[dict[str, str]]:
    import csv

    with bench.out(name).open(newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def test_the_ini_key_turns_the_predictive_rule_on(bench: Bench) -> None:
    bench.eval_file("stability", STABILITY)
    bench.pytester.makeini("[pytest]\nllmbench_stop_early = 0.95\n")
    _answers(bench)
    bench.run("--models=fake", "--repeat=3", "--repeat-policy=majority")
    run_info = json.loads(bench.out("run.json").read_text(encoding="utf-8"))
    assert run_info["config"]["stop_early"] == 0.95
    assert run_info["stop_early"]["rule"] == "95% predictive"
    # at N = 3 the predictive rule stops where the exact one does
    assert run_info["stop_early"]["repeats_not_run"] == 2
    reasons = {r["error"] for r in bench.records() if r["stopped_early"]}
    assert reasons == {
        "stopped early: pass settled after 2 of 3 repeats (95% predictive)",
        "stopped early: fail settled after 2 of 3 repeats (95% predictive)",
    }


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--stop-early",), "--stop-early needs --repeat N with N > 1"),
        (("--repeat=3", "--stop-early=1.5"), "--stop-early takes a confidence in (0, 1]"),
        (("--repeat=3", "--stop-early=often"), "got 'often'"),
        (
            ("--repeat=3", "--stop-early", "--stop-early-min=0"),
            "--stop-early-min must be at least 1",
        ),
    ],
)
def test_bad_stop_early_options_are_usage_errors(
    bench: Bench, args: tuple[str, ...], message: str
) -> None:
    bench.eval_file("stability", STABILITY)
    result = bench.run("--models=fake", *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*{message}*"])


# -- the gate, directly ------------------------------------------------------------------------


@dataclass(frozen=True)
class _Case:
    id: str


@dataclass(frozen=True)
class _Plan:
    """What the gate reads of a :class:`CallPlan`."""

    nodeid: str
    repeat: int
    path: Path = Path("quiz.eval.yaml")
    case: _Case = _Case("c1")
    label: str = "fake"


@dataclass
class _Report:
    nodeid: str
    outcome: str
    llmbench_record: dict[str, Any]


def _gate(policy: str, planned: int) -> tuple[StopEarly, list[Any]]:
    config = cast(pytest.Config, SimpleNamespace(stash=pytest.Stash()))
    gate = StopEarly(config, StopRule(policy, planned))
    plans = [_Plan(f"quiz.eval.yaml::c1[fake-r{r}]", r) for r in range(planned)]
    gate.track(cast(list[CallPlan], plans))
    return gate, plans


def _report(gate: StopEarly, plan: Any, outcome: str, pytest_outcome: str = "") -> None:
    report = _Report(plan.nodeid, pytest_outcome or outcome, {"outcome": outcome})
    gate.pytest_runtest_logreport(cast(pytest.TestReport, report))


def test_a_repeat_past_the_floor_waits_for_the_earlier_ones_to_be_scored() -> None:
    gate, plans = _gate("majority", 5)
    assert [gate.may_start(plan) for plan in plans] == [True, True, False, False, False]
    _report(gate, plans[1], "passed")  # out of order: r0 not scored yet
    assert not gate.may_start(plans[2]) and gate.held(plans[2])
    _report(gate, plans[0], "failed", "rerun")  # an earlier attempt: not counted
    assert not gate.may_start(plans[2])
    _report(gate, plans[0], "passed")
    assert gate.may_start(plans[2]) and not gate.may_start(plans[3])
    _report(gate, plans[2], "passed")  # 3 passes of 5: a majority, whatever follows
    assert gate.verdict(plans[3]) == "pass"
    assert not gate.may_start(plans[3]) and not gate.held(plans[3])


def test_errors_neither_pass_nor_fail_and_do_not_count_towards_the_floor() -> None:
    gate, plans = _gate("all", 4)
    _report(gate, plans[0], "error")
    _report(gate, plans[1], "failed")
    assert gate.verdict(plans[2]) is None  # one answered repeat: under the floor of 2
    _report(gate, plans[2], "passed")
    assert gate.verdict(plans[3]) == "fail"


def test_held_repeats_do_not_narrow_the_window_nor_cost_a_request(bench: Bench) -> None:
    """Many cases, a small look-ahead: every repeat taken is one request, none is sent twice
    or for a repeat then skipped, whatever the window lets start ahead."""
    cases = "".join(
        f"  - {{id: right{i}, prompt: 'Capital of France? ({i})', expected: Paris, "
        "assert: [contains]}\n"
        f"  - {{id: wrong{i}, prompt: 'Capital of Japan? ({i})', expected: Tokyo, "
        "assert: [contains]}\n"
        for i in range(4)
    )
    bench.eval_file("many", f"model_params: {{temperature: 0}}\ncases:\n{cases}")
    _answers(bench)
    args = ("--models=fake", "--repeat=5", "--repeat-policy=majority", "--stop-early")
    bench.run(*args, "--concurrency=2").assert_outcomes(passed=12, failed=12, skipped=16)
    # a majority of 5 is settled by 3 like answers: 3 of 5 taken per case
    assert sum(_requests_by_case(bench).values()) == 24
    taken = Counter(r["case_id"] for r in bench.records() if not r["stopped_early"])
    assert set(taken.values()) == {3}
