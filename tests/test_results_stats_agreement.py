"""Tests for pytest_llmbench.results.stats.agreement: Krippendorff's interval alpha per dimension."""

from __future__ import annotations

import random
from typing import Any

import pytest

from pytest_llmbench.results.stats.agreement import (
    DimensionAgreement,
    dimension_agreement,
    dimension_order,
    interval_alpha,
    nominal_alpha,
)

# --- interval_alpha ------------------------------------------------------------------------


def test_two_raters_three_units_by_hand() -> None:
    # Units (A, B): (1, 2), (3, 3), (4, 5); n = 6 pairable values.
    # D_o = (1/n) * sum_u 1/(m_u - 1) * sum_{i != j} (v_i - v_j)^2 = (2 + 0 + 2) / 6 = 2/3.
    # D_e: mean 3, sum (v - 3)^2 = 4+1+0+0+1+4 = 10, ordered pairs sum = 2 * 6 * 10 = 120,
    # D_e = 120 / (6 * 5) = 4.  alpha = 1 - (2/3) / 4 = 5/6.
    units = {"u1": {"A": 1.0, "B": 2.0}, "u2": {"A": 3.0, "B": 3.0}, "u3": {"A": 4.0, "B": 5.0}}
    assert interval_alpha(units) == pytest.approx(5 / 6)


def test_unit_of_three_raters_weights_by_m_minus_one() -> None:
    # Units: (1, 1, 4) and (2, 2); n = 5.
    # Unit 1 ordered pairs: 4 pairs of (1, 4) -> 4 * 9 = 36, divided by m - 1 = 2 -> 18.
    # D_o = 18 / 5 = 3.6.  D_e: mean 2, sum of squares 1+1+4+0+0 = 6, 2 * 5 * 6 / (5 * 4) = 3.
    # alpha = 1 - 3.6 / 3 = -0.2 (worse than chance).
    units = {1: {"A": 1.0, "B": 1.0, "C": 4.0}, 2: {"A": 2.0, "B": 2.0}}
    assert interval_alpha(units) == pytest.approx(-0.2)


def test_krippendorff_2011_example_with_missing_values() -> None:
    # Krippendorff (2011), "Computing Krippendorff's Alpha-Reliability": 4 observers x 12 units.
    rows = {
        "A": "1 2 3 3 2 1 4 1 2 . . .",
        "B": "1 2 3 3 2 2 4 1 2 5 . 3",
        "C": ". 3 3 3 2 3 4 2 2 5 1 .",
        "D": "1 2 3 3 2 4 4 1 2 5 1 .",
    }
    units: dict[int, dict[str, float]] = {}
    for observer, row in rows.items():
        for unit, value in enumerate(row.split()):
            if value != ".":
                units.setdefault(unit, {})[observer] = float(value)
    alpha = interval_alpha(units)
    assert alpha is not None
    assert round(alpha, 3) == 0.849


def test_perfect_agreement_is_one() -> None:
    units = {unit: {"A": float(unit), "B": float(unit), "C": float(unit)} for unit in range(1, 6)}
    assert interval_alpha(units) == pytest.approx(1.0)


def test_no_variation_is_undefined() -> None:
    units = {unit: {"A": 4.0, "B": 4.0} for unit in range(5)}
    assert interval_alpha(units) is None


def test_nothing_pairable_is_undefined() -> None:
    assert interval_alpha({}) is None
    assert interval_alpha({"u1": {"A": 1.0}, "u2": {"B": 5.0}}) is None


def test_single_value_units_are_dropped() -> None:
    units: dict[str, dict[str, float]] = {
        "u1": {"A": 1.0, "B": 2.0},
        "u2": {"A": 3.0, "B": 3.0},
        "u3": {"A": 4.0, "B": 5.0},
    }
    lonely = {**units, "u4": {"A": 100.0}, "u5": {"C": -50.0}}
    assert interval_alpha(lonely) == pytest.approx(5 / 6)


# --- nominal_alpha (a user's grader's labels) ----------------------------------------------


def test_nominal_alpha_of_krippendorff_2011_example() -> None:
    # The same reliability data read as categories: Krippendorff (2011) gives nominal 0.743.
    rows = {
        "A": "1 2 3 3 2 1 4 1 2 . . .",
        "B": "1 2 3 3 2 2 4 1 2 5 . 3",
        "C": ". 3 3 3 2 3 4 2 2 5 1 .",
        "D": "1 2 3 3 2 4 4 1 2 5 1 .",
    }
    units: dict[int, dict[str, str]] = {}
    for observer, row in rows.items():
        for unit, value in enumerate(row.split()):
            if value != ".":
                units.setdefault(unit, {})[observer] = f"label {value}"
    alpha = nominal_alpha(units)
    assert alpha is not None and round(alpha, 3) == 0.743


def test_nominal_alpha_undefined_and_perfect() -> None:
    assert nominal_alpha({}) is None
    assert nominal_alpha({"u1": {"A": "Y"}, "u2": {"B": "N"}}) is None  # nothing pairable
    assert nominal_alpha({u: {"A": "Y", "B": "Y"} for u in range(3)}) is None  # one label
    assert nominal_alpha({"u1": {"A": "Y", "B": "Y"}, "u2": {"A": "N", "B": "N"}}) == 1.0


def test_a_graders_dimension_is_nominal_over_the_labels_picked() -> None:
    # Labels A, B score 1.0 both: the interval alpha over scores would be undefined (no
    # variation), the nominal one sees the judges disagree on u1 and agree on u2.
    def entry(judge: str, choice: str, score: float) -> dict[str, Any]:
        scores = {"model_graded": score}
        return {"assertion": 0, "judge": judge, "choice": choice, "scores": scores}

    records = [
        {
            "nodeid": "u1",
            "outcome": "passed",
            "judges": [entry("j1", "A", 1.0), entry("j2", "B", 1.0)],
        },
        {
            "nodeid": "u2",
            "outcome": "passed",
            "judges": [entry("j1", "A", 1.0), entry("j2", "A", 1.0)],
        },
    ]
    (row,) = dimension_agreement(records)
    # n = 4 (A 3, B 1); unit u1 has 2 differing ordered pairs over m - 1 = 1: alpha =
    # 1 - (n - 1) * 2 / (n^2 - (9 + 1)) = 1 - 3 * 2 / 6 = 0.
    assert (row.dimension, row.alpha, row.units, row.judges) == ("model_graded", 0.0, 2, 2)


def test_large_run_matches_the_pairwise_definition() -> None:
    rng = random.Random(7)
    units = {unit: {r: float(rng.randint(1, 5)) for r in "ABC"} for unit in range(40)}
    assert interval_alpha(units) == pytest.approx(_pairwise_alpha(units))
    # 10,000 values stay fast: the expected disagreement is a sum, not a double loop.
    big = {unit: {r: float(rng.randint(1, 5)) for r in "AB"} for unit in range(5000)}
    alpha = interval_alpha(big)
    assert alpha is not None and abs(alpha) < 0.1  # independent random raters: near chance


def _pairwise_alpha(units: dict[int, dict[str, float]]) -> float:
    """The textbook O(n^2) definition, as a cross-check."""
    pairable = [list(r.values()) for r in units.values() if len(r) >= 2]
    values = [v for unit in pairable for v in unit]
    n = len(values)
    d_o = sum(
        sum((a - b) ** 2 for i, a in enumerate(u) for j, b in enumerate(u) if i != j) / (len(u) - 1)
        for u in pairable
    )
    d_e = sum((a - b) ** 2 for i, a in enumerate(values) for j, b in enumerate(values) if i != j)
    return 1 - (d_o / n) / (d_e / (n * (n - 1)))


# --- dimension_agreement -------------------------------------------------------------------


def entry(
    assertion: int, judge: str, scores: dict[str, float], error: str | None = None
) -> dict[str, Any]:
    """A judge entry as the contract shapes it."""
    return {
        "assertion": assertion,
        "type": "jury",
        "judge": judge,
        "model_id": f"openai/{judge}",
        "scores": {} if error else scores,
        "reasons": {key: "because" for key in scores} if not error else {},
        "error": error,
        "call_attempts": 1,
        "input_tokens": 10,
        "output_tokens": 5,
        "cost_usd": None,
        "latency_s": 0.1,
        "cached": False,
    }


def record(nodeid: str, judges: list[dict[str, Any]], outcome: str = "passed") -> dict[str, Any]:
    return {"nodeid": nodeid, "outcome": outcome, "judges": judges}


def test_dimension_agreement_over_records() -> None:
    records = [
        record(
            "t::a",
            [
                entry(0, "j1", {"correctness": 1, "coherence": 5, "brand_voice": 2}),
                entry(0, "j2", {"correctness": 2, "coherence": 5, "brand_voice": 2}),
                entry(0, "j3", {}, error="not JSON: Expecting value at 1:1"),
            ],
        ),
        record(
            "t::b",
            [
                entry(0, "j1", {"correctness": 3, "coherence": 5}),
                entry(0, "j2", {"correctness": 3, "coherence": 5}),
                # A second model-graded assertion of the same item is a unit of its own.
                entry(1, "j1", {"correctness": 4}),
                entry(1, "j2", {"correctness": 5}),
            ],
            outcome="failed",
        ),
        # Not answered: their judges (if any) do not count.
        record(
            "t::c",
            [entry(0, "j1", {"correctness": 1}), entry(0, "j2", {"correctness": 5})],
            "error",
        ),
        record(
            "t::d",
            [entry(0, "j1", {"correctness": 5}), entry(0, "j2", {"correctness": 1})],
            "skipped",
        ),
        # Older records have no judges at all.
        {"nodeid": "t::e", "outcome": "passed"},
    ]
    rows = dimension_agreement(records)
    assert [row.dimension for row in rows] == ["correctness", "coherence", "brand_voice"]
    correctness, coherence, brand_voice = rows
    # Same units as the hand-computed case above: (1, 2), (3, 3), (4, 5).
    assert correctness.alpha == pytest.approx(5 / 6)
    assert (correctness.units, correctness.judges, correctness.values) == (3, 2, 6)
    assert coherence == DimensionAgreement("coherence", None, 2, 2, 4)
    assert brand_voice == DimensionAgreement("brand_voice", None, 1, 2, 2)


def test_dimension_with_one_judge_has_no_pairable_unit() -> None:
    rows = dimension_agreement(
        [
            record("t::a", [entry(0, "solo", {"rubric": 0.5})]),
            record("t::b", [entry(0, "solo", {"rubric": 1.0}), entry(0, "gone", {}, "timeout")]),
        ]
    )
    assert rows == [DimensionAgreement("rubric", None, 0, 0, 0)]


def test_dimension_agreement_of_nothing() -> None:
    assert dimension_agreement([]) == []
    assert dimension_agreement([record("t::a", [])]) == []


def test_dimension_order_standard_first_then_alphabetical() -> None:
    keys = ["zeal", "following_instructions", "brand_voice", "correctness", "format", "zeal"]
    assert dimension_order(keys) == [
        "correctness",
        "format",
        "following_instructions",
        "brand_voice",
        "zeal",
    ]


def test_each_order_of_a_judged_pair_or_contest_is_a_unit_of_its_own() -> None:
    """Pairwise's two orders (and select-best's rotations) ask each judge once per order: one
    unit per order, so a judge's vote in the second order does not replace its first."""

    def voted(judge: str, order: str, choice: str) -> dict[str, Any]:
        picked = {**entry(0, judge, {"pairwise": float(choice == "A")}), "type": "pairwise"}
        return {**picked, "choice": choice, "details": [{"order": order}]}

    records = [
        record(
            "t::a",
            [
                voted("j1", "model-first", "A"),
                voted("j2", "model-first", "A"),
                voted("j1", "baseline-first", "B"),
                voted("j2", "baseline-first", "A"),
            ],
        )
    ]
    (row,) = dimension_agreement(records)
    assert row.dimension == "pairwise" and row.units == 2 and row.judges == 2
