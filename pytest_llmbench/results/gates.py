"""Every exit-status gate of a run, decided in one place before run.json is written.

The gates only judge low scores: ``--min-pass-rate``, else a ``--repeat-policy`` other than
``all``, may fail an OK run or pass a run failed only by low scores; ``--baseline`` with
``--fail-on-regression`` then fails a run whose score or pass rate regressed significantly.
Any other failure or error keeps the run failed, a run cut short by ``-x``/``--maxfail`` is not
passed by a gate (what never ran cannot pass one), and a worse status (interrupted, internal
error) is kept. With ``--min-pass-rate``, single cases do not fail the run by themselves,
whatever the repeat policy. Last, a run that ``--max-cost`` stopped (items that did not run for
lack of budget) exits with :data:`BUDGET_EXIT_CODE` instead of 0 or 1: it is incomplete, whatever
its scores. A judge below the judge gate (``--judge-gate`` or a file's ``judge_gate:``) in
``fail`` mode fails the run too, named (:mod:`.judge_gate`).

The limits on latency and cost (``--max-latency-p95``, ``--max-ttft-p50``,
``--max-cost-per-item``) are judged per model over its answered (passed or failed) records, the
timings over the uncached, live ones only (a cached answer's latency is an old call's, a
batched answer's the batch's wait, nothing of the model's): a model above
one fails the run, whatever the other gates said; a model with nothing to measure is listed as
not gated (:attr:`GateDecision.unmeasured`), never passed silently.

``llmbench trend`` decides its exit status here too (:func:`trend_status`): with
``--fail-on-drift``, a series whose pass rate drifted down exits :data:`DRIFT_EXIT_CODE`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    import pandas as pd

    from ..config import RunConfig
    from .stats import CaseVerdict
    from .trend import TrendReport


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
    #: The limits a model could not be judged on: nothing measured (every answer cached,
    #: no streamed call, no price), one line each.
    unmeasured: tuple[str, ...] = ()


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
    records: Sequence[Mapping[str, Any]] = (),
) -> GateDecision:
    """Apply every gate to ``state``: ``board`` is the leaderboard (None when the aggregates
    failed), ``regressed`` the models that regressed significantly against ``baseline``,
    ``records`` the run's records (the latency and cost limits read them)."""
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
    judged = [judge(records) for judge in _limit_judges(run)]
    unmeasured = tuple(line for limit in judged for line in limit.unmeasured)
    above = [failure for limit in judged for failure in limit.failures]
    if above:
        failures += above
        status = _failed(status)
    judges = _failing_judges(records)
    if judges:
        failures += [GateNote(line) for line in judges]
        status = _failed(status)
    regression = bool(regressed) and run.fail_on_regression
    if regression:
        status = _failed(status)
        names = ", ".join(regressed)
        failures.append(GateNote(f"--fail-on-regression: {names} regressed against {baseline}"))
    if state.over_budget and status in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED):
        status = BUDGET_EXIT_CODE
    return GateDecision(status, tuple(failures), regression, unmeasured)


@dataclass(frozen=True)
class LimitOutcome:
    """One latency or cost limit judged on every model: who is above it, who had nothing."""

    failures: tuple[GateNote, ...] = ()
    unmeasured: tuple[str, ...] = ()


@dataclass(frozen=True)
class Limit:
    """A per-model limit: its option, what it measures, and which records it reads."""

    option: str  #: the flag, e.g. ``--max-latency-p95``
    what: str  #: the measure as a line says it, e.g. ``latency p95``
    field: str  #: the record field measured
    unit: str  #: ``s`` or ``USD``
    statistic: Callable[[Sequence[float]], float]  #: the records' values to the measure
    timed: bool  #: whether cached answers are left out (an old call's timing)
    bound: float  #: the limit

    def __call__(self, records: Sequence[Mapping[str, Any]]) -> LimitOutcome:
        values = self.values(records)
        batched = self._batched(records)
        failures, unmeasured = [], []
        for model, found in values.items():
            if not found:
                nothing = self._nothing(*batched.get(model, (0, 0)))
                unmeasured.append(f"{model}: {self.option} not applied: {nothing}")
                continue
            measured = self.statistic(found)
            if measured > self.bound:
                failures.append(GateNote(self._above(model, measured, len(found))))
        return LimitOutcome(tuple(failures), tuple(unmeasured))

    def _batched(self, records: Sequence[Mapping[str, Any]]) -> dict[str, tuple[int, int]]:
        """Each model's answered records left out of a timed limit as batched, and its
        answered records."""
        counts: dict[str, tuple[int, int]] = {}
        for record in records:
            model = record.get("model")
            if model is None or record.get("outcome") not in ("passed", "failed"):
                continue
            batched, answered = counts.get(str(model), (0, 0))
            counts[str(model)] = (batched + bool(record.get("batched")), answered + 1)
        return counts

    def values(self, records: Sequence[Mapping[str, Any]]) -> dict[str, list[float]]:
        """Each model's measured values, over its answered records (uncached and not batched
        when ``timed``); a model whose answered records have none maps to an empty list."""
        values: dict[str, list[float]] = {}
        for record in records:
            model = record.get("model")
            if model is None or record.get("outcome") not in ("passed", "failed"):
                continue
            found = values.setdefault(str(model), [])
            value: Any = record.get(self.field)
            untimed = record.get("cached") or record.get("batched")
            if (self.timed and untimed) or not _is_measure(value):
                continue
            found.append(float(value))
        return values

    def _above(self, model: str, measured: float, count: int) -> str:
        items = "uncached answers" if self.timed else "answers with a price"
        return (
            f"{model}: {self.what} {measured:.4g} {self.unit} > {self.option} "
            f"{self.bound:g} {self.unit} (over {count} {items})"
        )

    def _nothing(self, batched: int = 0, answered: int = 0) -> str:
        if self.field == "cost_usd":
            return "no answered item has a known cost (no price for the model)"
        if self.timed and batched:
            why = "a batch's wait says nothing of the model's latency"
            if batched == answered:
                return f"every answered item was batched ({why})"
            rest = "not streamed uncached" if self.field == "ttft_s" else "from the response cache"
            return f"{batched} answered items were batched ({why}), the others {rest}"
        if self.field == "ttft_s":
            return "no answered item was streamed uncached (TTFT is measured on streamed calls)"
        return "every answered item came from the response cache (no call was timed)"


def _failing_judges(records: Sequence[Mapping[str, Any]]) -> list[str]:
    """The judges below the judge gate under ``on_fail: fail`` (their verdicts stand: the run
    fails instead), one line each; none without a gate."""
    if not any(
        isinstance(entry, Mapping) and entry.get("judge_gate") == "failing"
        for record in records
        for entry in record.get("assertions") or []
    ):
        return []
    from .judge_gate import failing_judges

    return failing_judges(records)


def _limit_judges(run: RunConfig) -> list[Limit]:
    """The latency and cost limits the run sets, in the order they are reported."""
    limits: list[Limit] = []
    if run.max_latency_p95 is not None:
        bound = run.max_latency_p95
        limits.append(
            Limit("--max-latency-p95", "latency p95", "latency_s", "s", _p95, True, bound)
        )
    if run.max_ttft_p50 is not None:
        bound = run.max_ttft_p50
        limits.append(Limit("--max-ttft-p50", "TTFT p50", "ttft_s", "s", _p50, True, bound))
    if run.max_cost_per_item is not None:
        bound = run.max_cost_per_item
        limits.append(
            Limit("--max-cost-per-item", "cost per item", "cost_usd", "USD", _mean, False, bound)
        )
    return limits


def _is_measure(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def quantile(values: Sequence[float], q: float) -> float:
    """The ``q`` quantile of ``values``, interpolated linearly between the two nearest ranks,
    as pandas' ``quantile`` (so the gate agrees with the leaderboard's p50 and p95)."""
    ordered = sorted(values)
    position = (len(ordered) - 1) * q
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def _p95(values: Sequence[float]) -> float:
    return quantile(values, 0.95)


def _p50(values: Sequence[float]) -> float:
    return quantile(values, 0.5)


def _mean(values: Sequence[float]) -> float:
    return math.fsum(values) / len(values)


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


#: ``llmbench trend --fail-on-drift``'s exit status when a series' pass rate drifted down.
DRIFT_EXIT_CODE = 1


def trend_status(report: TrendReport, fail_on_drift: bool) -> tuple[int, list[str]]:
    """``llmbench trend``'s exit status and the lines saying why it is not 0.

    Only a downward drift fails, and only under ``fail_on_drift``: a pass rate that rose is
    reported, never failed; without the flag the trend only reports."""
    drops = [
        f"{series.model} on {series.eval_file}: pass rate drifted down at {series.drift.at_run}"
        f" (since {series.drift.since_run or 'the first run'})"
        for series in report.series
        if series.drift.detected and series.drift.direction == "down"
    ]
    if fail_on_drift and drops:
        return DRIFT_EXIT_CODE, drops
    return 0, []
