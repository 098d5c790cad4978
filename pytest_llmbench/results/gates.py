"""Every exit-status gate of a run, decided in one place before run.json is written.

The gates only judge low scores: ``--min-pass-rate``, else a ``--repeat-policy`` other than
``all``, may fail an OK run or pass a run failed only by low scores; ``--baseline`` with
``--fail-on-regression`` then fails a run whose score or pass rate regressed significantly.
Any other failure or error keeps the run failed, a run cut short by ``-x``/``--maxfail`` is not
passed by a gate (what never ran cannot pass one), and a worse status (interrupted, internal
error) is kept. With ``--min-pass-rate``, single cases do not fail the run by themselves,
whatever the repeat policy. Last, a run that ``--max-cost`` stopped (items that did not run for
lack of budget) exits with :data:`BUDGET_EXIT_CODE` instead of 0 or 1: it is incomplete, whatever
its scores.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    import pandas as pd

    from ..config import RunConfig
    from .stats import CaseVerdict


#: The exit status of a run that ``--max-cost`` stopped: outside pytest's own codes (0-5), so
#: CI can tell "over budget, incomplete" from "tests failed".
BUDGET_EXIT_CODE = 6


@dataclass(frozen=True)
class GateFailure:
    """A model that missed the run's aggregate gate."""

    model: str
    pass_rate: float
    required: float

    def describe(self) -> str:
        """One summary line."""
        return f"{self.model}: pass rate {self.pass_rate:.1%} < --min-pass-rate {self.required:.1%}"


@dataclass(frozen=True)
class GateNote:
    """A failed gate described in words (``--fail-on-regression``, ``--repeat-policy``)."""

    text: str

    def describe(self) -> str:
        """One summary line."""
        return self.text


@dataclass(frozen=True)
class RepeatOutcome:
    """The run's cases judged across their repeats under ``--repeat-policy``."""

    policy: str
    #: Every case with an answered or error repeat (see :func:`.stats.case_verdicts`).
    verdicts: tuple[CaseVerdict, ...]
    #: The answered cases the policy does not pass (error-only cases are errors, not these).
    failing: tuple[CaseVerdict, ...]

    def summary(self) -> dict[str, Any]:
        """Counts for run.json: cases per verdict and the cases failing the policy."""
        from .stats import VERDICTS

        counts = {name: sum(1 for v in self.verdicts if v.verdict == name) for name in VERDICTS}
        return {
            "policy": self.policy,
            "cases": len(self.verdicts),
            **counts,
            "failing_policy": len(self.failing),
        }


def judge_repeats(verdicts: Sequence[CaseVerdict], policy: str) -> RepeatOutcome:
    """The cases of ``verdicts`` that fail ``policy``."""
    from .stats import policy_passes

    failing = tuple(v for v in verdicts if v.n and not policy_passes(v, policy))
    return RepeatOutcome(policy, tuple(verdicts), failing)


@dataclass(frozen=True)
class RunState:
    """What the gates read besides the run's summary: how the run itself went."""

    #: pytest's exit status before the gates.
    exitstatus: int
    #: Failures and errors that are not low scores (collection errors included).
    other_failures: int
    #: Whether -x / --maxfail (or an interrupt) stopped the run early.
    cut_short: bool
    #: Items that did not run because ``--max-cost`` was reached.
    over_budget: int = 0


@dataclass(frozen=True)
class GateDecision:
    """The run's final exit status and the gates that failed, in the order they were judged."""

    exitstatus: int
    failures: tuple[GateFailure | GateNote, ...] = ()
    #: Whether ``--fail-on-regression`` failed the run.
    regression_failed: bool = False


#: The controller's gate decision, for plugins that report it at the end.
GATES_KEY = pytest.StashKey[GateDecision]()


def decide(
    state: RunState,
    run: RunConfig,
    *,
    board: pd.DataFrame | None,
    repeats: RepeatOutcome | None,
    regressed: Sequence[str] = (),
    baseline: Path | None = None,
) -> GateDecision:
    """Apply every gate to ``state``: ``board`` is the leaderboard (None when the aggregates
    failed), ``regressed`` the models that regressed significantly against ``baseline``."""
    status = state.exitstatus
    failures: list[GateFailure | GateNote] = []
    if run.min_pass_rate is not None:
        if board is not None:
            failures += _pass_rate_failures(board, run.min_pass_rate)
            status = _gated(status, bool(failures), state)
    elif run.repeat_policy != "all" and repeats is not None:
        failing = len(repeats.failing)
        if failing:
            failures.append(GateNote(f"{failing} case(s) fail --repeat-policy={run.repeat_policy}"))
        status = _gated(status, bool(failing), state)
    regression = bool(regressed) and run.fail_on_regression
    if regression:
        status = _failed(status)
        names = ", ".join(regressed)
        failures.append(GateNote(f"--fail-on-regression: {names} regressed against {baseline}"))
    if state.over_budget and status in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED):
        status = BUDGET_EXIT_CODE
    return GateDecision(status, tuple(failures), regression)


def pass_rate_failures(board: pd.DataFrame, required: float) -> list[GateFailure | GateNote]:
    """The models of ``board`` below the ``required`` pass rate (``--min-pass-rate``)."""
    return _pass_rate_failures(board, required)


def _pass_rate_failures(board: pd.DataFrame, required: float) -> list[GateFailure | GateNote]:
    failures: list[GateFailure | GateNote] = []
    for row in board.itertuples():
        value: Any = row.pass_rate
        rate = float(value) if value == value else 0.0
        if rate < required:
            failures.append(GateFailure(str(row.model), rate, required))
    return failures


def _gated(status: int, failed: bool, state: RunState) -> int:
    """Fail an OK run when ``failed``; pass a run failed only by low scores when not."""
    if failed:
        return _failed(status)
    if status == pytest.ExitCode.TESTS_FAILED and state.other_failures == 0 and not state.cut_short:
        return pytest.ExitCode.OK
    return status


def _failed(status: int) -> int:
    """A failed run's status: an OK run fails; a worse one (interrupted, internal) is kept."""
    return pytest.ExitCode.TESTS_FAILED if status == pytest.ExitCode.OK else status
