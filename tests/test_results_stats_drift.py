"""The trend's drift test: a two-sided Page-Hinkley test over per-run pass rates."""

from __future__ import annotations

import random

import pytest

from pytest_llmbench.results.stats import DEFAULT_PARAMS, DriftParams, page_hinkley


def _runs(count: int) -> list[str]:
    return [f"run-{index}" for index in range(count)]


def _binomial_rates(rates: list[float], items: int, rng: random.Random) -> list[float]:
    """Each run's observed pass rate over ``items`` items whose true pass rate is given."""
    return [sum(rng.random() < rate for _ in range(items)) / items for rate in rates]


def test_a_sudden_drop_is_detected_downward_just_after_it() -> None:
    values = [0.9] * 8 + [0.6] * 4
    drift = page_hinkley(values, _runs(12))
    assert drift.detected and drift.direction == "down"
    # the drop is at run-8: the alarm comes within two runs, the change is placed before it
    assert drift.at_run in ("run-8", "run-9")
    assert drift.since_run == "run-7"
    assert drift.statistic > drift.threshold == DEFAULT_PARAMS.threshold
    assert drift.method == "page-hinkley"


def test_a_drop_in_a_noisy_series_is_found_at_the_right_run() -> None:
    rng = random.Random(7)
    values = _binomial_rates([0.85] * 10 + [0.55] * 6, 50, rng)
    drift = page_hinkley(values, _runs(16))
    assert drift.detected and drift.direction == "down"
    assert drift.at_run in ("run-10", "run-11", "run-12")
    assert drift.since_run in ("run-8", "run-9", "run-10")


def test_a_rise_is_detected_upward() -> None:
    drift = page_hinkley([0.4] * 6 + [0.8] * 3, _runs(9))
    assert drift.detected and drift.direction == "up"
    assert drift.since_run == "run-5"


def test_the_latest_alarm_is_reported_a_rise_then_a_fall_reports_the_fall() -> None:
    values = [0.4] * 6 + [0.9] * 8 + [0.5] * 6
    drift = page_hinkley(values, _runs(20))
    assert drift.direction == "down"
    assert drift.at_run in ("run-14", "run-15")


def test_a_stable_noisy_series_raises_no_alarm() -> None:
    rng = random.Random(20261130)
    for _ in range(20):
        values = _binomial_rates([0.8] * 30, 50, rng)
        drift = page_hinkley(values, _runs(30))
        assert not drift.detected, values
        assert drift.direction is None and drift.at_run is None and drift.since_run is None
        assert drift.statistic <= drift.threshold


def test_a_short_series_is_never_detected_however_large_the_change() -> None:
    assert not page_hinkley([1.0, 1.0, 0.0, 0.0], _runs(4)).detected
    assert not page_hinkley([], []).detected
    # the same values with a lower min_runs do alarm: it is min_runs that held it back
    assert page_hinkley([1.0, 1.0, 0.0, 0.0], _runs(4), DriftParams(min_runs=3)).detected


def test_a_change_within_the_tolerance_is_never_declared() -> None:
    values = [0.80] * 10 + [0.77] * 30
    assert not page_hinkley(values, _runs(40)).detected
    assert page_hinkley(values, _runs(40), DriftParams(delta=0.0, threshold=0.2)).detected


@pytest.mark.parametrize(
    "bad", [{"delta": -0.1}, {"threshold": 0.0}, {"min_runs": 0}], ids=["delta", "lambda", "min"]
)
def test_bad_parameters_are_refused_by_name(bad: dict[str, float]) -> None:
    with pytest.raises(ValueError, match=next(iter(bad))):
        DriftParams(**bad)  # type: ignore[arg-type]


def test_values_and_runs_must_pair() -> None:
    with pytest.raises(ValueError, match="2 values for 3 runs"):
        page_hinkley([0.5, 0.5], _runs(3))
