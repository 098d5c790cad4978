"""Tests for pytest_llmbench.results.stats.stopping: when a case's verdict is settled.

The closed forms are checked against a brute force over every future (each remaining repeat a
pass, a fail or an error) judged by the repeat policy of :mod:`.repeats`; the simulation draws
seeded outcomes and compares the stopped verdict with the one of all N repeats on the same path.
"""

from __future__ import annotations

import itertools
import math
import random

import pytest

from pytest_llmbench.results.stats import CaseVerdict, policy_passes
from pytest_llmbench.results.stats.stopping import (
    binomial_cdf,
    clopper_pearson,
    expected,
    rule_name,
    settled,
)

POLICIES = ("all", "majority", "any", "at-least:3")
GRID = (0.0, 0.05, 0.2, 0.5, 0.8, 0.95, 1.0)


def full_passes(policy: str, passed: int, failed: int, errors: int = 0) -> bool:
    """The policy's verdict as the results compute it (:func:`policy_passes`)."""
    n = passed + failed
    verdict = CaseVerdict("m", "s", "c", n, passed, errors, passed / n if n else None, "-")
    return policy_passes(verdict, policy)


def brute(policy: str, planned: int, c: int, f: int, e: int) -> str | None:
    """The verdict every future of the remaining repeats agrees on, or None; a repeat that
    ended in an error may yet pass or fail (``--retry-errors`` runs it again)."""
    if c + f + e == planned:
        return "pass" if full_passes(policy, c, f) else "fail"
    remaining = planned - c - f
    finals = {
        full_passes(policy, c + x, f + y)
        for x in range(remaining + 1)
        for y in range(remaining + 1 - x)
    }
    if finals == {True}:
        return "pass"
    return "fail" if finals == {False} else None


@pytest.mark.parametrize("policy", [*POLICIES, "at-least:1", "at-least:7"])
def test_exact_rule_is_the_brute_force_over_every_future(policy: str) -> None:
    planned = 6
    for c, f, e in itertools.product(range(planned + 1), repeat=3):
        if c + f + e > planned:
            continue
        got = settled(policy, planned, c, f, e, min_repeats=0)
        assert got == brute(policy, planned, c, f, e), (policy, c, f, e)


@pytest.mark.parametrize(
    ("policy", "counts", "verdict"),
    [
        # all: one fail settles it; passes never do before the last repeat
        ("all", (3, 1, 0), "fail"),
        ("all", (9, 0, 0), None),
        ("all", (10, 0, 0), "pass"),
        # any: one pass settles it; fails never do before the last
        ("any", (1, 1, 0), "pass"),
        ("any", (0, 9, 0), None),
        ("any", (0, 10, 0), "fail"),
        # at-least:3: pass at c >= 3, fail when c + r < 3 (1 pass of 8 taken, r = 2: 3 >= 3)
        ("at-least:3", (3, 0, 0), "pass"),
        ("at-least:3", (0, 8, 0), "fail"),
        ("at-least:3", (1, 7, 0), None),
        ("at-least:3", (1, 8, 0), "fail"),
        # majority of 10: pass when c > f + r (6 > 0 + 4), fail when c + r <= f
        ("majority", (6, 0, 0), "pass"),
        ("majority", (5, 0, 0), None),
        ("majority", (0, 5, 0), "fail"),
        ("majority", (4, 3, 0), None),
        # an errored repeat may pass or fail on a retry: it counts as open, like one not run
        ("majority", (4, 0, 3), None),  # open 6: 4 > 0 + 6 is false, 4 + 6 <= 0 too
        ("majority", (7, 0, 2), "pass"),  # open 3: 7 > 0 + 3
        ("majority", (0, 5, 2), "fail"),  # open 5: 0 + 5 <= 5
        ("majority", (4, 0, 6), "pass"),  # none remains: the policy's verdict
    ],
)
def test_closed_forms_at_ten_repeats(
    policy: str, counts: tuple[int, int, int], verdict: str | None
) -> None:
    assert settled(policy, 10, *counts) == verdict


def test_no_stop_before_the_floor_of_answered_repeats() -> None:
    # all: a fail after one repeat settles it, but the floor of 2 answered repeats holds
    assert settled("all", 10, 0, 1, 0) is None
    assert settled("all", 10, 0, 1, 0, min_repeats=1) == "fail"
    # errors are not answered: 1 fail + 3 errors is still below a floor of 2
    assert settled("all", 10, 0, 1, 3) is None
    # with no repeat left the verdict is the policy's, floor or not; all errors fail
    assert settled("all", 2, 0, 0, 2) == "fail"
    assert settled("any", 3, 1, 0, 2, min_repeats=5) == "pass"


def test_bad_counts_and_policies_are_errors() -> None:
    with pytest.raises(ValueError, match="sum to at most N=3"):
        settled("all", 3, 2, 2, 0)
    with pytest.raises(ValueError, match="unknown repeat policy 'most'"):
        settled("most", 3, 1, 0, 0)
    with pytest.raises(ValueError, match="confidence must be in"):
        settled("all", 3, 1, 0, 0, confidence=0.0)


def test_clopper_pearson_matches_known_values() -> None:
    # 3 of 10 at 95%: (0.0667, 0.6525) (the Beta quantiles, as R's binom.test gives them)
    low, high = clopper_pearson(3, 10, 0.95)
    assert low == pytest.approx(0.06674, abs=1e-5)
    assert high == pytest.approx(0.65245, abs=1e-5)
    # 0 of n: lower end 0, upper end 1 - (alpha/2)^(1/n)
    assert clopper_pearson(0, 5, 0.9) == (0.0, pytest.approx(1 - 0.05 ** (1 / 5)))
    assert clopper_pearson(5, 5, 0.9) == (pytest.approx(0.05 ** (1 / 5)), 1.0)
    # the ends are where the binomial tails equal alpha/2
    assert binomial_cdf(3, 10, high) == pytest.approx(0.025, abs=1e-9)
    assert 1 - binomial_cdf(2, 10, low) == pytest.approx(0.025, abs=1e-9)


def test_expected_samples_match_the_research_table() -> None:
    """Exact curtailment at N = 10 (no floor): the DP table of the design notes."""
    table = {
        "all": (1, 1.05, 1.25, 2.0, 4.46, 8.03, 10),
        "majority": (5, 5.26, 6.24, 8.29, 7.41, 6.32, 6),
        "any": (10, 8.03, 4.46, 2.0, 1.25, 1.05, 1),
        "at-least:3": (8, 8.39, 8.59, 5.84, 3.75, 3.16, 3),
    }
    for policy, row in table.items():
        for p, want in zip(GRID, row, strict=True):
            got = expected(policy, 10, p, min_repeats=1)
            assert got.samples == pytest.approx(want, abs=0.005), (policy, p)
            assert got.disagreement == pytest.approx(0.0, abs=1e-12)


def test_predictive_rule_stops_sooner_and_within_its_rate() -> None:
    """At N = 50 the 95% rule stops a stable majority case far sooner than exact curtailment
    (12 against 25 repeats at p = 0), and its exact chance of a different verdict is <= 5%."""
    for p in GRID:
        exact = expected("majority", 50, p)
        robust = expected("majority", 50, p, confidence=0.95)
        assert robust.samples <= exact.samples + 1e-9
        assert robust.disagreement <= 0.05
    assert expected("majority", 50, 0.0, confidence=0.95).samples == pytest.approx(12)
    assert expected("majority", 50, 0.0).samples == pytest.approx(25)


def test_rule_names() -> None:
    assert rule_name(1.0) == "exact"
    assert rule_name(0.95) == "95% predictive"


# --- the simulation ------------------------------------------------------------------------


def simulate(
    policy: str, planned: int, p: float, rng: random.Random, *, confidence: float
) -> tuple[bool, int]:
    """One case: draw all N outcomes, stop on the path's prefix; (verdict differs, repeats taken)."""
    path = [rng.random() < p for _ in range(planned)]
    full = full_passes(policy, sum(path), planned - sum(path))
    c = f = 0
    for taken, outcome in enumerate(path):
        verdict = settled(policy, planned, c, f, 0, confidence=confidence)
        if verdict is not None:
            return (verdict == "pass") != full, taken
        c, f = (c + 1, f) if outcome else (c, f + 1)
    return (full_passes(policy, c, f)) != full, planned


def binomial_upper(trials: int, rate: float) -> int:
    """The count a Bin(trials, rate) stays at or below with chance >= 99.9% (the tolerance)."""
    for count in range(trials + 1):
        if binomial_cdf(count, trials, rate) >= 0.999:
            return count
    return trials


def test_simulation_exact_rule_never_disagrees_with_full_sampling() -> None:
    rng = random.Random(39)
    for policy in POLICIES:
        for p in GRID:
            results = [simulate(policy, 10, p, rng, confidence=1.0) for _ in range(400)]
            assert sum(wrong for wrong, _ in results) == 0, (policy, p)


def test_simulation_predictive_rule_disagrees_at_most_delta() -> None:
    rng = random.Random(3939)
    delta, trials = 0.05, 300
    for policy in POLICIES:
        for p in GRID:
            results = [simulate(policy, 20, p, rng, confidence=1 - delta) for _ in range(trials)]
            wrong = sum(w for w, _ in results)
            assert wrong <= binomial_upper(trials, delta), (policy, p, wrong)
            if policy == "majority" and p in (0.0, 1.0):
                # the rule does stop sooner than exact curtailment would (10 and 11 of 20)
                assert max(taken for _, taken in results) < 10 + p


@pytest.mark.parametrize("confidence", [1.0, 0.95])
def test_simulation_samples_saved_on_stable_and_flaky_suites(confidence: float) -> None:
    rng = random.Random(7)
    planned, cases = 10, 200
    for policy in POLICIES:
        saved = {}
        for suite, rates in (("stable", (0.0, 1.0)), ("flaky", (0.3, 0.5, 0.7))):
            taken = [
                simulate(policy, planned, rates[i % len(rates)], rng, confidence=confidence)[1]
                for i in range(cases)
            ]
            saved[suite] = 1 - math.fsum(taken) / (planned * cases)
            assert saved[suite] > 0, (policy, suite)
        print(
            f"{policy} ({rule_name(confidence)}): saved {saved['stable']:.0%} of the repeats "
            f"on a stable suite, {saved['flaky']:.0%} on a flaky one"
        )
