"""Judges against people: Cohen's kappa, its interval, the rates and the leaning, checked against
values worked out by hand (the arithmetic is in each test's comment), and the edge cases."""

from __future__ import annotations

import math

import pytest

from pytest_llmbench.results.reviews import MachineVerdict, Review, ReviewKey
from pytest_llmbench.results.stats.calibration import (
    Calibration,
    Confusion,
    JudgeGroup,
    LabelPair,
    calibrate,
    calibrate_group,
    calibration_row,
    cohen_kappa,
    kappa_interval,
    leaning,
)

GROUP = JudgeGroup(("judge-a",), "llm-rubric", "Is polite")


def of(tp: int = 0, fp: int = 0, fn: int = 0, tn: int = 0) -> Calibration:
    """The calibration of a table given by its cells (judge first: fp = judge pass, person fail)."""
    cells = [(True, True)] * tp + [(False, True)] * fp + [(True, False)] * fn
    cells += [(False, False)] * tn
    return calibrate_group(GROUP, [LabelPair(GROUP, human, judge) for human, judge in cells])


def test_a_mixed_table_matches_the_hand_computed_figures() -> None:
    # tp=20 fp=5 fn=10 tn=15, n=50.
    # observed agreement po = (20+15)/50 = 0.7
    # judge passes 25/50 = 0.5, people pass 30/50 = 0.6
    # chance pe = 0.5*0.6 + 0.5*0.4 = 0.5;  kappa = (0.7-0.5)/(1-0.5) = 0.4
    # Fleiss-Cohen-Everitt variance, cells p (judge row, person column):
    #   p = [[.4, .1], [.2, .3]], rows (judge) = [.5, .5], cols (person) = [.6, .4]
    #   diagonal: .4*(1-(.5+.6)*.6)^2 + .3*(1-(.5+.4)*.6)^2 = .4*.1156 + .3*.2116 = .10972
    #   off:  (1-.4)^2 * (.1*(.6+.5)^2 + .2*(.4+.5)^2) = .36 * (.121 + .162) = .10188
    #   minus (kappa - pe*(1-kappa))^2 = (.4 - .3)^2 = .01
    #   var = (.10972 + .10188 - .01) / (50 * .5^2) = .2016 / 12.5 = .016128
    #   half = 1.959964 * sqrt(.016128) = 1.959964 * .126996 = .248908
    #   CI = [.151092, .648908]
    # TPR = 20/30 = .666667, Wilson (z^2 = 3.841459, n = 30):
    #   centre = (.666667 + 3.841459/60) / (1 + 3.841459/30) = .730691 / 1.128049 = .647747
    #   half = 1.959964*sqrt(.666667*.333333/30 + 3.841459/3600) / 1.128049 = .159947
    #   CI = [.487800, .807695]
    # FPR = 5/20 = .25, Wilson: centre = (.25 + .096036)/1.192073 = .290283,
    #   half = 1.959964*sqrt(.009375 + .002401)/1.192073 = .178420, CI = [.111862, .468701]
    # leaning: fp=5 against fn=10, sign test P(X<=5 | 15, 1/2) = 4944/32768 = .150879,
    #   two-sided .301758 >= .05: balanced
    c = of(tp=20, fp=5, fn=10, tn=15)
    assert c.n == 50 and c.agreement == pytest.approx(0.7)
    assert c.kappa == pytest.approx(0.4)
    assert c.kappa_ci == pytest.approx((0.151092, 0.648908), abs=1e-6)
    assert c.tpr == pytest.approx(20 / 30)
    assert c.tpr_ci == pytest.approx((0.487800, 0.807695), abs=1e-6)
    assert c.fpr == pytest.approx(0.25)
    assert c.fpr_ci == pytest.approx((0.111862, 0.468701), abs=1e-6)
    assert c.leaning == "balanced"


def test_a_lenient_judge_is_told_by_the_sign_test() -> None:
    # fp=9 fn=1: P(X<=1 | 10, 1/2) = (1+10)/1024 = .010742, two-sided .021484 < .05: lenient
    # kappa: po = (10+10)/30 = 2/3; judge passes 19/30, people 11/30;
    #   pe = (19*11 + 11*19)/900 = 418/900 = .464444; kappa = (.666667-.464444)/.535556 = .377593
    c = of(tp=10, fp=9, fn=1, tn=10)
    assert c.leaning == "lenient"
    assert c.kappa == pytest.approx(0.377593, abs=1e-6)
    assert of(tp=10, fp=1, fn=9, tn=10).leaning == "strict"
    # fp=5 fn=0: P = 2 * (1/32) = .0625 >= .05: not enough to say
    assert leaning(Confusion(tp=3, fp=5, fn=0, tn=3)) == "balanced"


def test_everything_passed_on_both_sides_leaves_kappa_undefined() -> None:
    # judge and people pass all 10: pe = 1*1 + 0*0 = 1, kappa = 0/0: undefined
    c = of(tp=10)
    assert (c.kappa, c.kappa_ci) == (None, None)
    assert c.tpr == 1.0 and c.fpr is None and c.fpr_ci is None
    # Wilson of 10/10: centre (1 + .192073)/1.384146 = .861240, half .138760 -> [.722467, 1]
    assert c.tpr_ci == pytest.approx((0.722467, 1.0), abs=1e-6)


def test_no_negatives_gives_kappa_zero_and_no_false_positive_rate() -> None:
    # people pass all 10, the judge 8: po = .8, pe = .8*1 + .2*0 = .8, kappa = 0/.2 = 0
    # (scikit-learn says 0 too); nobody failed anything: FPR undefined
    c = of(tp=8, fn=2)
    assert c.kappa == 0.0
    assert c.fpr is None and c.fpr_ci is None
    assert c.tpr == pytest.approx(0.8)


def test_one_label_is_a_table_of_one() -> None:
    # n = 1, judge pass, person fail: po = 0, pe = 1*0 + 0*1 = 0, kappa = 0
    c = of(fp=1)
    assert (c.n, c.kappa, c.tpr, c.fpr) == (1, 0.0, None, 1.0)
    # n = 1, both pass: pe = 1, undefined
    assert of(tp=1).kappa is None


def test_perfect_agreement_and_perfect_disagreement() -> None:
    # 5 pass + 5 fail, all agreed: po = 1, pe = .5, kappa = 1; the large-sample variance is 0
    perfect = of(tp=5, tn=5)
    assert perfect.kappa == 1.0 and perfect.kappa_ci == pytest.approx((1.0, 1.0))
    assert (perfect.tpr, perfect.fpr) == (1.0, 0.0)
    # all disagreed: po = 0, pe = .5, kappa = -1
    opposite = of(fp=5, fn=5)
    assert opposite.kappa == -1.0 and opposite.kappa_ci == pytest.approx((-1.0, -1.0))
    assert (opposite.tpr, opposite.fpr) == (0.0, 1.0)
    assert opposite.leaning == "balanced"  # as many wrong passes as wrong fails


def test_kappa_and_interval_of_an_empty_table_are_none() -> None:
    assert cohen_kappa(Confusion()) is None and kappa_interval(Confusion()) is None


def test_the_interval_always_holds_kappa_and_stays_in_range() -> None:
    for cells in [(1, 2, 3, 4), (30, 1, 1, 0), (0, 3, 1, 0), (2, 0, 0, 1), (7, 7, 7, 7)]:
        c = of(*cells)
        assert c.kappa is not None and c.kappa_ci is not None
        low, high = c.kappa_ci
        assert -1.0 <= low <= c.kappa + 1e-12 and c.kappa - 1e-12 <= high <= 1.0
        assert not math.isnan(low)


def label(passed: bool | None, human: str, criterion: str | None, n: int) -> Review:
    machine = MachineVerdict(passed, "llm-rubric", ("judge-a",), criterion)
    return Review(ReviewKey(f"case{n}", "m", 0, 0), "d", human, machine=machine)


def test_calibrate_groups_by_criterion_even_beside_one_without_criterion() -> None:
    # a per-turn verdict without a criterion beside one with: both groups, no TypeError sorting
    reviews = [
        label(True, "pass", "Is polite", 1),
        label(False, "pass", None, 2),
        label(True, "unsure", None, 3),
        label(None, "fail", "Is polite", 4),  # the machine decided nothing: not paired
    ]
    found = calibrate(reviews)
    assert [g.criterion for g in found] == [None, "Is polite"]
    none, polite = found.values()
    assert (none.n, none.unsure, none.confusion) == (1, 1, Confusion(fn=1))
    assert (polite.n, polite.confusion) == (1, Confusion(tp=1))
    row = calibration_row(polite)
    assert (row["judges"], row["criterion"], row["tp"], row["kappa"]) == (
        "judge-a",
        "Is polite",
        1,
        None,
    )


def test_one_answer_counts_once_per_group_the_assertions_label_winning() -> None:
    machine = MachineVerdict(False, "llm-rubric", ("judge-a",), "Is polite")
    on_item = Review(ReviewKey("case1", "m", 0, None), "d", "pass", machine=machine)
    on_rubric = Review(ReviewKey("case1", "m", 0, 0), "d", "fail", machine=machine)
    other = Review(ReviewKey("case2", "m", 0, None), "d", "pass", machine=machine)
    (found,) = calibrate([on_item, on_rubric, other]).values()
    assert (found.n, found.confusion) == (2, Confusion(fn=1, tn=1))
    # alone, the item's label pairs
    (alone,) = calibrate([on_item]).values()
    assert alone.confusion == Confusion(fn=1)
