"""results.gates.decide: every exit-status gate, in one place."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pandas as pd
import pytest
from conftest import Bench, Rule

from pytest_llmbench.results.gates import (
    BUDGET_EXIT_CODE,
    RunState,
    decide,
    judge_repeats,
    quantile,
)
from pytest_llmbench.results.stats import CaseVerdict

OK, FAILED = pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED


def _run(**options: Any) -> Any:
    defaults = {
        "min_pass_rate": None,
        "repeat_policy": "all",
        "fail_on_regression": False,
        "max_latency_p95": None,
        "max_ttft_p50": None,
        "max_cost_per_item": None,
    }
    return SimpleNamespace(**{**defaults, **options})


def _state(status: int, other_failures: int = 0, cut_short: bool = False) -> RunState:
    return RunState(exitstatus=status, other_failures=other_failures, cut_short=cut_short)


BOARD = pd.DataFrame({"model": ["good", "bad"], "pass_rate": [1.0, 0.25]})


def test_min_pass_rate_passes_a_run_failed_only_by_low_scores() -> None:
    decision = decide(_state(FAILED), _run(min_pass_rate=0.2), board=BOARD, repeats=None)
    assert decision.exitstatus == OK and decision.failures == ()


def test_min_pass_rate_fails_an_ok_run_and_names_the_model() -> None:
    decision = decide(_state(OK), _run(min_pass_rate=0.5), board=BOARD, repeats=None)
    assert decision.exitstatus == FAILED
    assert [f.describe() for f in decision.failures] == [
        "bad: pass rate 25.0% < --min-pass-rate 50.0%"
    ]


@pytest.mark.parametrize(
    "state", [_state(FAILED, other_failures=1), _state(FAILED, cut_short=True)]
)
def test_a_gate_never_passes_other_failures_or_a_run_cut_short(state: RunState) -> None:
    decision = decide(state, _run(min_pass_rate=0.2), board=BOARD, repeats=None)
    assert decision.exitstatus == FAILED


def test_a_worse_status_is_kept() -> None:
    interrupted = pytest.ExitCode.INTERRUPTED
    run = _run(min_pass_rate=0.5, fail_on_regression=True)
    decision = decide(_state(interrupted), run, board=BOARD, repeats=None, regressed=["bad"])
    assert decision.exitstatus == interrupted and decision.regression_failed


@pytest.mark.parametrize("status", [OK, FAILED])
def test_a_run_stopped_by_the_budget_has_its_own_exit_status(status: int) -> None:
    state = RunState(exitstatus=status, other_failures=0, cut_short=False, over_budget=3)
    assert decide(state, _run(), board=BOARD, repeats=None).exitstatus == BUDGET_EXIT_CODE
    # An interrupt or an internal error still says so.
    worse = RunState(pytest.ExitCode.INTERRUPTED, 0, False, over_budget=3)
    assert decide(worse, _run(), board=BOARD, repeats=None).exitstatus == 2
    assert decide(_state(OK), _run(), board=BOARD, repeats=None).exitstatus == OK


def test_repeat_policy_decides_without_min_pass_rate() -> None:
    flaky = CaseVerdict("m", "s", "c", 2, 1, 0, 0.5, "flaky")
    run = _run(repeat_policy="all")
    for policy, status in (("any", OK), ("majority", FAILED)):
        repeats = judge_repeats([flaky], policy)
        decision = decide(_state(FAILED), _run(repeat_policy=policy), board=None, repeats=repeats)
        assert decision.exitstatus == status
    assert decide(_state(FAILED), run, board=None, repeats=None).exitstatus == FAILED


def test_a_regression_fails_the_run_after_the_aggregate_gate_passed_it() -> None:
    run = _run(min_pass_rate=0.2, fail_on_regression=True)
    decision = decide(
        _state(FAILED), run, board=BOARD, repeats=None, regressed=["bad"], baseline=Path("b")
    )
    assert decision.exitstatus == FAILED and decision.regression_failed
    assert [f.describe() for f in decision.failures] == [
        "--fail-on-regression: bad regressed against b"
    ]


def test_a_regression_without_fail_on_regression_changes_nothing() -> None:
    decision = decide(_state(OK), _run(), board=BOARD, repeats=None, regressed=["bad"])
    assert decision.exitstatus == OK and not decision.regression_failed


# --- latency and cost limits ----------------------------------------------------------------


def _record(model: str, **fields: Any) -> dict[str, Any]:
    return {"model": model, "outcome": "passed", "cached": False, **fields}


#: Model a: latencies 1..20 s (p95 19.05), TTFT 0.1..2.0, 0.01 USD each; model b: fast, free
#: of price; an error and a cached answer that would break every limit but count in none.
RECORDS = [
    *(_record("a", latency_s=float(i), ttft_s=i / 10, cost_usd=0.01) for i in range(1, 21)),
    *(_record("b", latency_s=0.5, ttft_s=0.1, cost_usd=None) for _ in range(3)),
    _record("b", outcome="error", latency_s=999.0, ttft_s=999.0, cost_usd=9.0),
    _record("b", cached=True, latency_s=999.0, ttft_s=999.0),
]


def test_quantile_interpolates_as_pandas_does() -> None:
    values = [float(i) for i in range(1, 21)]
    series = pd.Series(values)
    for q in (0.0, 0.5, 0.95, 1.0):
        assert quantile(values, q) == pytest.approx(series.quantile(q))
    assert quantile([3.0], 0.95) == 3.0


@pytest.mark.parametrize(
    ("option", "bound", "line"),
    [
        ("max_latency_p95", 19.0, "a: latency p95 19.05 s > --max-latency-p95 19 s (over 20 "),
        ("max_ttft_p50", 1.0, "a: TTFT p50 1.05 s > --max-ttft-p50 1 s (over 20 uncached answers)"),
        (
            "max_cost_per_item",
            0.005,
            "a: cost per item 0.01 USD > --max-cost-per-item 0.005 USD (over 20 answers with a ",
        ),
    ],
)
def test_a_limit_fails_an_ok_run_and_names_the_model(option: str, bound: float, line: str) -> None:
    decision = decide(
        _state(OK), _run(**{option: bound}), board=BOARD, repeats=None, records=RECORDS
    )
    assert decision.exitstatus == FAILED
    (failure,) = decision.failures
    assert failure.describe().startswith(line)


@pytest.mark.parametrize(
    ("option", "bound"),
    [("max_latency_p95", 19.1), ("max_ttft_p50", 1.05), ("max_cost_per_item", 0.01)],
)
def test_a_limit_met_by_every_model_passes(option: str, bound: float) -> None:
    decision = decide(
        _state(OK), _run(**{option: bound}), board=BOARD, repeats=None, records=RECORDS
    )
    assert (decision.exitstatus, decision.failures) == (OK, ())


def test_a_limit_does_not_pass_a_run_failed_by_its_items() -> None:
    decision = decide(_state(FAILED), _run(max_latency_p95=100), board=BOARD, repeats=None)
    assert decision.exitstatus == FAILED


def test_a_limit_fails_a_run_the_pass_rate_gate_passed() -> None:
    run = _run(min_pass_rate=0.2, max_latency_p95=1.0)
    decision = decide(_state(FAILED), run, board=BOARD, repeats=None, records=RECORDS)
    assert decision.exitstatus == FAILED
    assert [f.describe().split(":")[0] for f in decision.failures] == ["a"]


def test_a_model_with_nothing_to_measure_is_said_not_gated() -> None:
    run = _run(max_cost_per_item=1.0, max_latency_p95=1000.0)
    cached = [_record("c", cached=True, latency_s=1.0, cost_usd=0.5)]
    decision = decide(_state(OK), run, board=BOARD, repeats=None, records=RECORDS + cached)
    assert decision.exitstatus == OK
    assert decision.unmeasured == (
        "c: --max-latency-p95 not applied: every answered item came from the response cache "
        "(no call was timed)",
        "b: --max-cost-per-item not applied: no answered item has a known cost (no price for the "
        "model)",
    )


# --- in a run, on the fake server's delays ---------------------------------------------------


def _gated_run(bench: Bench, *args: str) -> tuple[Any, dict[str, Any]]:
    bench.server.add_rule(Rule(model="fake-model", delay_s=0.4))  # fake is slow, fake2 quick
    bench.eval_file("gated", "cases:\n  - {id: c, prompt: p, expected: ok}\n")
    result = bench.run("--models=fake,fake2", "--repeat=2", *args)
    return result, json.loads(bench.out("run.json").read_text())


def test_p95_gate_fails_the_slow_model_with_exit_1(bench: Bench) -> None:
    result, run = _gated_run(bench, "--max-latency-p95=0.3")
    result.assert_outcomes(passed=4)
    assert result.ret == FAILED
    (failure,) = run["gate_failures"]
    assert failure.startswith("fake: latency p95 0.4") and "> --max-latency-p95 0.3 s" in failure
    result.stdout.fnmatch_lines(["llmbench gate FAILED: fake: latency p95 *s > --max-latency-p95*"])
    assert run["config"]["max_latency_p95"] == 0.3


def test_p95_gate_passes_under_a_generous_limit(bench: Bench) -> None:
    result, run = _gated_run(bench, "--max-latency-p95=60", "--max-cost-per-item=1")
    assert result.ret == OK and run["gate_failures"] == []


def test_ttft_gate_fails_with_exit_1_and_passes(bench: Bench) -> None:
    result, run = _gated_run(bench, "--stream=all", "--max-ttft-p50=0.3")
    assert result.ret == FAILED
    assert [line.split(":")[0] for line in run["gate_failures"]] == ["fake"]
    assert "TTFT p50" in run["gate_failures"][0]
    bench.pytester.makeini("[pytest]\nllmbench_max_ttft_p50 = 60\n")
    result, run = _gated_run(bench, "--stream=all")
    assert result.ret == OK and run["gate_failures"] == []


def test_cost_gate_fails_the_pricier_model(bench: Bench) -> None:
    # fake costs 0.001/0.002 USD per 1k tokens, fake2 ten times more.
    result, run = _gated_run(bench, "--max-cost-per-item=0.00001")
    assert result.ret == FAILED
    assert [line.split(":")[0] for line in run["gate_failures"]] == ["fake2"]
    result.stdout.fnmatch_lines(["*gate FAILED: fake2: cost per item * USD > --max-cost-per-item*"])


def test_cached_answers_are_not_timed_by_the_gate(bench: Bench) -> None:
    _gated_run(bench, "--cache=use", "--cache-dir=c")
    result, run = _gated_run(bench, "--cache=use", "--cache-dir=c", "--max-latency-p95=0.3")
    assert result.ret == OK and run["gate_failures"] == []
    result.stdout.fnmatch_lines(["llmbench gate: fake: --max-latency-p95 not applied: every *"])


@pytest.mark.parametrize(
    ("flag", "value"),
    [
        ("--max-latency-p95", "-1"),
        ("--max-latency-p95", "fast"),
        ("--max-ttft-p50", "0"),
        ("--max-cost-per-item", "0"),
        ("--max-cost-per-item", "nan"),
    ],
)
def test_a_bad_limit_is_a_usage_error(bench: Bench, flag: str, value: str) -> None:
    bench.eval_file("gated", "cases:\n  - {id: c, prompt: p, expected: ok}\n")
    result = bench.run("--models=fake", f"{flag}={value}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*{flag} must be *"])


def test_a_broken_limit_is_in_the_step_summary_and_an_unmeasured_one_apart(
    bench: Bench, monkeypatch: pytest.MonkeyPatch
) -> None:
    summary = bench.pytester.path / "step_summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    bench.unpriced_profile()
    bench.eval_file("gated", "cases:\n  - {id: c, prompt: p, expected: ok}\n")
    result = bench.run("--models=fake2,free", "--max-cost-per-item=0.00001")
    assert result.ret == FAILED
    text = summary.read_text()
    failed, _, unmeasured = text.partition("**Gates not applied**")
    assert "**Failed gates**" in failed and "- fake2: cost per item " in failed
    assert (
        "- free: --max-cost-per-item not applied: no answered item has a known cost" in unmeasured
    )
    result.stdout.fnmatch_lines(["llmbench gate: free: --max-cost-per-item not applied: *"])


def test_the_p95_gate_under_xdist(bench: Bench) -> None:
    bench.server.add_rule(Rule(model="fake-model", delay_s=0.4))
    bench.eval_file("gated", "cases:\n  - {id: c, prompt: p, expected: ok}\n")
    args = ("-n", "2", "--models=fake,fake2", "--repeat=2", "--max-latency-p95=0.3")
    result = bench.run_subprocess(*args)
    assert result.ret == FAILED
    (failure,) = json.loads(bench.out("run.json").read_text())["gate_failures"]
    assert failure.startswith("fake: latency p95 0.4")
    assert failure.endswith("(over 2 uncached answers)")
