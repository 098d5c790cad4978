"""Tests for pytest_llmbench.results.stats: verdicts, pass@k, clustered CIs, paired comparisons.

Expected values are worked out by hand in the comments, so a wrong formula cannot hide behind
the same code computing both sides.
"""

from __future__ import annotations

import math
import random
import statistics
from dataclasses import astuple
from typing import Any

import pytest
from conftest import assert_imported_lazily

from pytest_llmbench.results import stats
from pytest_llmbench.results.record import build_record
from pytest_llmbench.results.stats import CaseVerdict, Interval


def rec(**values: Any) -> dict[str, Any]:
    """A complete record; model m1, suite s1, case c1, repeat 0, passed unless told."""
    values.setdefault("model", "m1")
    values.setdefault("suite", "s1")
    values.setdefault("case_id", "c1")
    values.setdefault("repeat", 0)
    values.setdefault("outcome", "passed")
    return build_record(**values)


def repeats(case_id: str, *outcomes: str, model: str = "m1", **values: Any) -> list[dict[str, Any]]:
    """One record per outcome, repeats 0, 1, ...; passed scores 1.0, failed 0.0 unless told."""
    return [
        rec(
            model=model,
            case_id=case_id,
            repeat=index,
            outcome=outcome,
            score=values.get("score", {"passed": 1.0, "failed": 0.0}.get(outcome)),
        )
        for index, outcome in enumerate(outcomes)
    ]


def approx_interval(interval: Interval | None, estimate: float, low: float, high: float) -> bool:
    """pytest.approx does not look inside dataclasses: compare the fields."""
    assert interval is not None
    assert astuple(interval) == pytest.approx((estimate, low, high), rel=1e-12)
    return True


# --- t quantile ----------------------------------------------------------------------------


def test_t_quantile_matches_closed_forms() -> None:
    # df = 1 is the Cauchy distribution: t = tan(pi * (p - 1/2)) = tan(0.475 pi) = 12.7062.
    assert stats.t_quantile(0.975, 1) == pytest.approx(math.tan(math.pi * 0.475), rel=1e-10)
    # df = 2: t = (2p - 1) / sqrt(2 p (1 - p)) = 0.95 / sqrt(0.04875) = 4.302653.
    assert stats.t_quantile(0.975, 2) == pytest.approx(0.95 / math.sqrt(0.04875), rel=1e-10)
    # Table values: t(0.975, 10) = 2.228139, t(0.975, 30) = 2.042272.
    assert stats.t_quantile(0.975, 10) == pytest.approx(2.228139, abs=1e-6)
    assert stats.t_quantile(0.975, 30) == pytest.approx(2.042272, abs=1e-6)
    # Many degrees of freedom: the normal quantile 1.959964.
    assert stats.t_quantile(0.975, 1e7) == pytest.approx(1.959964, abs=1e-5)


def test_t_quantile_is_symmetric_and_inverts_the_cdf() -> None:
    assert stats.t_quantile(0.025, 5) == pytest.approx(-stats.t_quantile(0.975, 5))
    assert stats.t_quantile(0.5, 3) == 0.0
    for p, df in ((0.9, 4), (0.9995, 1), (0.6, 50)):
        assert stats.t_cdf(stats.t_quantile(p, df), df) == pytest.approx(p, abs=1e-12)


@pytest.mark.parametrize(("p", "df"), [(0.0, 3), (1.0, 3), (0.5, 0)])
def test_t_quantile_rejects_bad_arguments(p: float, df: float) -> None:
    with pytest.raises(ValueError, match="t_quantile"):
        stats.t_quantile(p, df)


# --- clustered mean ------------------------------------------------------------------------


def test_clustered_mean_by_hand_unclamped() -> None:
    # Clusters [1, 3], [5], [7, 9]: N = 5, G = 3, m = 25 / 5 = 5.
    # Cluster sums of deviations: (1 + 3 - 10) = -6, 0, (7 + 9 - 10) = 6; squares 36 + 0 + 36.
    # var = 3/2 * 72 / 25 = 4.32; half width = t(0.975, 2) * sqrt(4.32) = 4.302653 * 2.078461.
    half = 4.302652729749464 * math.sqrt(4.32)
    interval = stats.clustered_mean([[1, 3], [5], [7, 9]])
    assert approx_interval(interval, 5.0, 5.0 - half, 5.0 + half)
    assert interval is not None and interval.low == pytest.approx(-3.943, abs=1e-3)


def test_clustered_mean_by_hand_clamped_to_unit() -> None:
    # 0/1 values, G = 6, N = 12, m = 9 / 12 = 0.75.
    # Sums of deviations: [1, 1] -> 2 - 1.5 = 0.5 (x4, squares 0.25 each = 1.0);
    # [1, 0] -> -0.5 (0.25); [0, 0] -> -1.5 (2.25); total 3.5.
    # var = 6/5 * 3.5 / 144 = 0.0291667; half = t(0.975, 5) * sqrt(var) = 2.570582 * 0.170783.
    half = 2.570581835636 * math.sqrt(6 / 5 * 3.5 / 144)
    clusters = [[1, 1], [1, 1], [1, 1], [1, 1], [1, 0], [0, 0]]
    interval = stats.clustered_mean(clusters)
    assert interval is not None
    assert interval.estimate == 0.75
    assert interval.low == pytest.approx(0.75 - half) == pytest.approx(0.31099, abs=1e-5)
    assert interval.high == 1.0  # 0.75 + 0.439 is past 1: clamped, values are in [0, 1]


def test_clustered_mean_with_singleton_clusters_is_the_classical_t_interval() -> None:
    # One value per cluster: var = s^2 / N. Values 2, 4, 9: m = 5, s^2 = (9 + 1 + 16) / 2 = 13.
    half = stats.t_quantile(0.975, 2) * math.sqrt(13 / 3)
    assert approx_interval(stats.clustered_mean([[2], [4], [9]]), 5.0, 5 - half, 5 + half)


def test_repeats_widen_the_interval_against_independent_samples() -> None:
    # Same 12 values; counted as 6 cases of 2 perfectly correlated repeats vs 12 independent
    # samples. The clustered interval must be wider: repeats are not new evidence.
    values = [0.2, 0.2, 0.4, 0.4, 0.5, 0.5, 0.6, 0.6, 0.7, 0.7, 0.9, 0.9]
    clustered = stats.clustered_mean([values[i : i + 2] for i in range(0, 12, 2)])
    independent = stats.clustered_mean([[value] for value in values])
    assert clustered is not None and independent is not None
    assert clustered.estimate == pytest.approx(independent.estimate)
    assert clustered.high - clustered.low > independent.high - independent.low


def test_clustered_mean_degenerate_inputs() -> None:
    assert stats.clustered_mean([]) is None
    assert stats.clustered_mean([[], []]) is None
    # One cluster of values in [0, 1]: the Wilson interval of one observation, never a point.
    # Wilson, n = 1, p = 0.5, z = 1.959964: centre 0.5, half = z*sqrt(0.25 + z²/4) / (1 + z²)
    z = statistics.NormalDist().inv_cdf(0.975)  # 1.959964
    half = z * math.sqrt(0.25 + z * z / 4) / (1 + z * z)
    assert approx_interval(stats.clustered_mean([[0.5, 0.5]]), 0.5, 0.5 - half, 0.5 + half)
    assert stats.clustered_mean([[3.0, 7.0]]) == Interval(5.0, 3.0, 7.0)
    # Empty clusters do not count; identical values still get the Wilson floor of 2 cases:
    # p = 1, n = 2: low = 2 / (2 + z²) = 0.342372.
    same = stats.clustered_mean([[1.0], [], [1.0, 1.0]])
    assert approx_interval(same, 1.0, 2 / (2 + z * z), 1.0)


def test_equal_case_means_do_not_give_a_zero_width_interval() -> None:
    # 20 cases each passing 2 of 3: CR1's spread is 0; the Wilson floor on 20 cases is not.
    interval = stats.clustered_mean([[1.0, 1.0, 0.0]] * 20)
    assert interval is not None and interval.estimate == pytest.approx(2 / 3)
    assert interval.low == pytest.approx(0.4487, abs=1e-4)
    assert interval.high == pytest.approx(0.8309, abs=1e-4)


def test_clustered_mean_confidence_level() -> None:
    narrow = stats.clustered_mean([[2], [4], [9]], confidence=0.5)
    wide = stats.clustered_mean([[2], [4], [9]])
    assert narrow is not None and wide is not None
    # t(0.75, 2) = 0.5 / sqrt(2 * 0.75 * 0.25) = 0.816497 (the df = 2 closed form).
    assert narrow.high - 5 == pytest.approx(0.816497 * math.sqrt(13 / 3), rel=1e-6)
    assert narrow.high < wide.high


# --- pass@k --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("n", "c", "k", "expected"),
    [
        (3, 1, 1, 1 / 3),  # k = 1 is the pass rate
        (3, 1, 2, 2 / 3),  # 1 - C(2, 2) / C(3, 2) = 1 - 1/3
        (5, 2, 2, 0.7),  # 1 - C(3, 2) / C(5, 2) = 1 - 3/10
        (3, 2, 3, 1.0),  # 1 - C(1, 3) / C(3, 3) = 1 - 0: every draw of 3 holds a pass
        (4, 0, 2, 0.0),
        (4, 4, 4, 1.0),
    ],
)
def test_pass_at_k(n: int, c: int, k: int, expected: float) -> None:
    assert stats.pass_at_k(n, c, k) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("n", "c", "k", "expected"),
    [
        (3, 2, 1, 2 / 3),  # k = 1 is the pass rate
        (3, 2, 2, 1 / 3),  # C(2, 2) / C(3, 2) = 1/3
        (5, 3, 2, 0.3),  # C(3, 2) / C(5, 2) = 3/10
        (5, 3, 4, 0.0),  # C(3, 4) = 0: four draws cannot all pass
        (4, 4, 4, 1.0),
    ],
)
def test_pass_hat_k(n: int, c: int, k: int, expected: float) -> None:
    assert stats.pass_hat_k(n, c, k) == pytest.approx(expected)


@pytest.mark.parametrize(("n", "c", "k"), [(3, 1, 0), (3, 1, 4), (3, 4, 1), (3, -1, 1)])
def test_pass_at_k_rejects_impossible_counts(n: int, c: int, k: int) -> None:
    with pytest.raises(ValueError, match="pass@k"):
        stats.pass_at_k(n, c, k)
    with pytest.raises(ValueError, match="pass@k"):
        stats.pass_hat_k(n, c, k)


def test_mean_pass_at_k_uses_the_fewest_repeats() -> None:
    verdicts = [
        CaseVerdict("m", "s", "a", 3, 1, 0, 1 / 3, "flaky"),
        CaseVerdict("m", "s", "b", 2, 2, 1, 1.0, "passed"),
        CaseVerdict("m", "s", "c", 0, 0, 2, None, "error"),  # no answered repeat: left out
    ]
    result = stats.mean_pass_at_k(verdicts)
    assert result is not None and result.k == 2
    # a: pass@2 = 2/3, pass^2 = C(1, 2) / C(3, 2) = 0; b: 1 and 1.
    assert result.pass_at_k == pytest.approx((2 / 3 + 1) / 2)
    assert result.pass_hat_k == pytest.approx(0.5)
    assert stats.mean_pass_at_k(verdicts[2:]) is None


# --- case verdicts -------------------------------------------------------------------------


def verdict_records() -> list[dict[str, Any]]:
    return [
        *repeats("always", "passed", "passed", "passed"),
        *repeats("never", "failed", "failed"),
        *repeats("flaky", "passed", "failed", "passed"),
        *repeats("down", "error", "error"),
        *repeats("half-down", "passed", "error"),
        *repeats("skipped", "skipped", "skipped"),
        *repeats("always", "failed", model="m0"),
        rec(model=None, suite="plain", case_id="test_x", outcome="passed"),
    ]


def test_case_verdicts() -> None:
    verdicts = stats.case_verdicts(verdict_records())
    table = [
        (v.model, v.case_id, v.n, v.passed, v.errors, v.pass_rate, v.verdict) for v in verdicts
    ]
    # Sorted by model ("(" sorts before letters), then suite, then case; all-skipped is left out.
    assert table == [
        ("(no model)", "test_x", 1, 1, 0, 1.0, "passed"),
        ("m0", "always", 1, 0, 0, 0.0, "failed"),
        ("m1", "always", 3, 3, 0, 1.0, "passed"),
        ("m1", "down", 0, 0, 2, None, "error"),
        ("m1", "flaky", 3, 2, 0, pytest.approx(2 / 3), "flaky"),
        ("m1", "half-down", 1, 1, 1, 1.0, "passed"),  # errors are kept out of the verdict
        ("m1", "never", 2, 0, 0, 0.0, "failed"),
    ]
    assert verdicts[0].suite == "plain"


def test_case_verdicts_do_not_depend_on_record_order() -> None:
    records = verdict_records()
    shuffled = records[:]
    random.Random(7).shuffle(shuffled)
    assert shuffled != records
    assert stats.case_verdicts(shuffled) == stats.case_verdicts(records)
    assert stats.score_clusters(shuffled) == stats.score_clusters(records)
    assert stats.pass_clusters(shuffled) == stats.pass_clusters(records)


def test_clusters_hold_answered_values_per_case() -> None:
    records = [
        *repeats("a", "passed", "failed", "error"),
        rec(case_id="b", score=None),  # answered without a score: in pass clusters only
        rec(case_id="c", outcome="skipped", score=0.3),
        rec(case_id="d", score=math.nan),  # pandas' missing value
    ]
    assert stats.score_clusters(records) == [[0.0, 1.0]]
    assert stats.pass_clusters(records) == [[0.0, 1.0], [1.0], [1.0]]


def flaky(passed: int, n: int) -> CaseVerdict:
    verdict = "passed" if passed == n else ("failed" if passed == 0 else "flaky")
    return CaseVerdict("m", "s", "c", n, passed, 0, passed / n, verdict)


@pytest.mark.parametrize(
    ("passed", "n", "policy", "expected"),
    [
        (2, 3, "all", False),
        (3, 3, "all", True),
        (2, 3, "majority", True),
        (1, 2, "majority", False),  # a tie is not a majority
        (1, 3, "majority", False),
        (1, 3, "any", True),
        (0, 3, "any", False),
        (2, 3, "at-least:2", True),
        (2, 3, "at-least:3", False),
        (3, 3, "at-least:4", False),  # more than were run: cannot pass
    ],
)
def test_policy_passes(passed: int, n: int, policy: str, expected: bool) -> None:
    assert stats.policy_passes(flaky(passed, n), policy) is expected


def test_policy_never_passes_a_case_without_answers_and_rejects_unknown_policies() -> None:
    error = CaseVerdict("m", "s", "c", 0, 0, 3, None, "error")
    for policy in ("all", "majority", "any", "at-least:1"):
        assert stats.policy_passes(error, policy) is False
    with pytest.raises(ValueError, match="unknown repeat policy 'most'"):
        stats.policy_passes(flaky(1, 2), "most")


# --- McNemar and the bootstrap -------------------------------------------------------------


@pytest.mark.parametrize(
    ("b", "c", "expected"),
    [
        # n = 10, P(X <= 1) = (C(10,0) + C(10,1)) / 2^10 = 11/1024; two-sided: 22/1024.
        (1, 9, 22 / 1024),
        (9, 1, 22 / 1024),
        # n = 10, P(X <= 2) = (1 + 10 + 45) / 1024 = 56/1024; two-sided: 112/1024.
        (2, 8, 112 / 1024),
        # n = 6, P(X = 0) = 1/64; two-sided: 2/64.
        (0, 6, 2 / 64),
        (0, 5, 2 / 32),  # 0.0625: five one-sided discordant pairs are not enough
        (5, 5, 1.0),  # 2 * P(X <= 5) = 2 * 638/1024 > 1: capped
        (0, 0, 1.0),  # no discordant pair: no evidence
        (0, 1, 1.0),
    ],
)
def test_mcnemar_exact(b: int, c: int, expected: float) -> None:
    assert stats.mcnemar_exact(b, c) == pytest.approx(expected, rel=1e-12)


def test_mcnemar_exact_is_exact_for_large_counts() -> None:
    # 2^1000 overflows a float; integers do not. The chi-square approximation gives
    # (600 - 400)^2 / 1000 = 40 -> p ~ 2.5e-10; the exact test agrees in magnitude.
    p_value = stats.mcnemar_exact(400, 600)
    assert 1e-11 < p_value < 1e-9


def test_paired_bootstrap_is_seeded_and_order_free() -> None:
    diffs = [0.1, -0.2, 0.3, 0.05, 0.0, 0.4, -0.1, 0.2]
    first = stats.paired_bootstrap(diffs, seed=3)
    assert stats.paired_bootstrap(diffs, seed=3) == first
    assert stats.paired_bootstrap(list(reversed(diffs)), seed=3) == first
    assert stats.paired_bootstrap(diffs, seed=4) != first
    low, high, p_value = first
    assert low < sum(diffs) / len(diffs) < high
    assert 0 < p_value <= 1


def test_paired_bootstrap_without_differences() -> None:
    # Every resampled mean is 0: both shares are 1, p = 1; the interval is the point 0.
    assert stats.paired_bootstrap([0.0] * 5) == (0.0, 0.0, 1.0)


def test_paired_bootstrap_p_value_floor_for_few_cases() -> None:
    # Three cases all +0.5: every resample is +0.5, so share(<= 0) = (0 + 1) / 2001 and the raw
    # p would be 2/2001 ~ 0.001. An exact sign-flip test cannot go below 2^(1 - 3) = 0.25.
    assert stats.paired_bootstrap([0.5, 0.5, 0.5]) == (0.5, 0.5, 0.25)
    # Ten cases: the floor 2^-9 = 0.00195 is above 2/2001, so p is the floor.
    assert stats.paired_bootstrap([0.5] * 10)[2] == 2**-9
    # Zeros do not count: one non-zero difference among many is never significant.
    assert stats.paired_bootstrap([0.5] + [0.0] * 40)[2] == 1.0


# --- compare and case changes --------------------------------------------------------------


def model_records(model: str, outcomes: dict[str, list[str]]) -> list[dict[str, Any]]:
    return [
        record for case, runs in outcomes.items() for record in repeats(case, *runs, model=model)
    ]


def test_compare_clear_difference_is_significant() -> None:
    cases = [f"c{i}" for i in range(10)]
    good = model_records("good", {case: ["passed"] for case in cases})
    bad = model_records("bad", {case: ["failed"] for case in cases})
    score, passing = stats.compare(good, bad, "good", "bad")
    # Score: every difference is -1; bootstrap p = 2/2001 is below the floor 2^(1-10) = 1/512.
    assert score == stats.Comparison("good", "bad", "score", 10, -1.0, -1.0, -1.0, 2**-9, True)
    # Pass rate: 10 discordant pairs, all one way: McNemar p = 2 / 2^10; diff = (0 - 10) / 10.
    assert passing == stats.Comparison(
        "good", "bad", "pass_rate", 10, -1.0, -1.0, -1.0, 2 / 1024, True
    )


def test_compare_small_difference_is_not_significant() -> None:
    a = model_records("a", {"x": ["passed"], "y": ["passed"], "z": ["failed"]})
    b = model_records("b", {"x": ["passed"], "y": ["failed"], "z": ["failed"]})
    score, passing = stats.compare(a, b, "a", "b")
    # Differences 0, -1, 0: mean -1/3; one non-zero difference: p floor 2^0 = 1.
    assert (score.n_cases, score.diff, score.p_value, score.significant) == (
        3,
        pytest.approx(-1 / 3),
        1.0,
        False,
    )
    # One discordant pair: McNemar p = min(1, 2 * 1/2) = 1.
    assert (passing.diff, passing.p_value, passing.significant) == (
        pytest.approx(-1 / 3),
        1.0,
        False,
    )
    assert passing.low <= passing.diff <= passing.high


def test_compare_pairs_common_cases_and_uses_majority_and_mean_scores() -> None:
    a = [
        *repeats("x", "passed", "failed", "passed", score=0.8),
        *repeats("only-a", "passed"),
        *repeats("no-score", "passed", score=None),
        *repeats("down", "error"),
    ]
    b = [
        *repeats("x", "failed", "failed", "passed", score=0.2),
        *repeats("only-b", "failed"),
        *repeats("no-score", "failed", score=None),
        *repeats("down", "passed"),
    ]
    score, passing = stats.compare(a, b, "a", "b")
    # Common answered cases: no-score, x ("down" has no answer on a). Scored: x only.
    assert (score.n_cases, score.diff) == (1, pytest.approx(0.2 - 0.8))
    assert score.p_value == 1.0 and not score.significant
    # x: a passes 2 of 3 (majority), b 1 of 3; no-score: a passes, b fails -> two discordant.
    assert (passing.n_cases, passing.diff) == (2, -1.0)


def test_compare_without_common_cases() -> None:
    a = model_records("a", {"x": ["passed"]})
    b = model_records("b", {"y": ["passed"]})
    for comparison in stats.compare(a, b, "a", "b"):
        assert comparison.n_cases == 0
        assert math.isnan(comparison.diff) and math.isnan(comparison.low)
        assert (comparison.p_value, comparison.significant) == (1.0, False)


def test_compare_is_deterministic_and_order_free() -> None:
    rng = random.Random(11)
    a = model_records("a", {f"c{i}": [rng.choice(["passed", "failed"])] for i in range(30)})
    b = model_records("b", {f"c{i}": [rng.choice(["passed", "failed"])] for i in range(30)})
    for record in [*a, *b]:
        record["score"] = round(rng.random(), 3)
    first = stats.compare(a, b, "a", "b", seed=5)
    assert stats.compare(a, b, "a", "b", seed=5) == first
    shuffled_a, shuffled_b = a[:], b[:]
    rng.shuffle(shuffled_a)
    rng.shuffle(shuffled_b)
    assert stats.compare(shuffled_a, shuffled_b, "a", "b", seed=5) == first
    assert stats.compare(a, b, "a", "b", seed=6)[0].low != first[0].low


def test_case_changes_regressions_first() -> None:
    a = model_records(
        "a", {"z-reg": ["passed"], "a-same": ["passed"], "m-imp": ["failed"], "b-reg": ["passed"]}
    )
    b = model_records(
        "a", {"z-reg": ["failed"], "a-same": ["passed"], "m-imp": ["passed"], "b-reg": ["failed"]}
    )
    b.append(rec(model="a", case_id="new", outcome="failed"))
    changes = stats.case_changes(a, b, "base", "new")
    assert [(c.case_id, c.change) for c in changes] == [
        ("b-reg", "regressed"),
        ("z-reg", "regressed"),
        ("m-imp", "improved"),
        ("a-same", "same"),
    ]
    first = changes[0]
    assert (first.suite, first.score_a, first.score_b, first.pass_a, first.pass_b) == (
        "s1",
        1.0,
        0.0,
        True,
        False,
    )


# --- import cost ---------------------------------------------------------------------------


def test_import_does_not_load_numpy() -> None:
    assert_imported_lazily(
        "pytest_llmbench.results.stats", "m.paired_bootstrap([1.0, 2.0])", "numpy"
    )


def test_compare_refuses_two_models_on_one_side() -> None:
    mixed = [*repeats("x", "passed", model="m1"), *repeats("x", "failed", model="m2")]
    with pytest.raises(ValueError, match="one model per side: 'm2' repeats s1::x"):
        stats.compare(mixed, repeats("x", "passed"), "a", "b")


def test_summarize_repeats_agrees_with_the_single_functions() -> None:
    records = verdict_records()
    summary = stats.summarize_repeats(records)
    assert summary.verdicts == tuple(stats.case_verdicts(records))
    assert summary.score == stats.clustered_mean(stats.score_clusters(records))
    assert summary.pass_rate == stats.clustered_mean(stats.pass_clusters(records))
    assert summary.at_k == stats.mean_pass_at_k(summary.verdicts)
    assert summary.n_flaky == 1
    empty = stats.summarize_repeats([rec(outcome="skipped")])
    assert (empty.score, empty.pass_rate, empty.verdicts, empty.at_k) == (None, None, (), None)
