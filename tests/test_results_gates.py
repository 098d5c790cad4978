"""results.gates.decide: every exit-status gate, in one place."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pandas as pd
import pytest

from pytest_llmbench.results.gates import BUDGET_EXIT_CODE, RunState, decide, judge_repeats
from pytest_llmbench.results.stats import CaseVerdict

OK, FAILED = pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED


def _run(**options: Any) -> Any:
    defaults = {"min_pass_rate": None, "repeat_policy": "all", "fail_on_regression": False}
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
