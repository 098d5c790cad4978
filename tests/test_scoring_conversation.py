"""A conversation's verdicts: weighted by their turn, and the first turn that fails."""

from __future__ import annotations

import pytest

from pytest_llmbench.scoring.assertions import score_verdicts
from pytest_llmbench.scoring.base import Verdict
from pytest_llmbench.scoring.conversation import (
    failed_turn,
    failure_headline,
    on_turn,
    transcript_lines,
)


def verdict(passed: bool, score: float | None = None, weight: float = 1.0) -> Verdict:
    value = (1.0 if passed else 0.0) if score is None else score
    return Verdict("regex", passed, value, weight, "no match" if not passed else "match")


def test_a_verdict_on_a_turn_weighs_its_weight_times_the_turns() -> None:
    placed = on_turn(verdict(True, weight=0.5), 2, 3.0)
    assert (placed.turn, placed.weight) == (2, 1.5)
    assert placed.to_dict()["turn"] == 2
    assert "turn" not in verdict(True).to_dict()


def test_the_case_score_is_the_weighted_mean_over_all_turns() -> None:
    verdicts = [on_turn(verdict(True), 1, 1.0), on_turn(verdict(False), 2, 2.0)]
    verdicts.append(on_turn(verdict(True), 3, 1.0))
    assert score_verdicts(verdicts) == pytest.approx(0.5)


def test_the_first_failing_turn_is_found_and_partial_credit_counts_per_turn() -> None:
    verdicts = [
        on_turn(verdict(True), 1, 1.0),
        on_turn(verdict(False), 2, 1.0),
        on_turn(verdict(True), 2, 3.0),  # turn 2 scores 0.75
        on_turn(verdict(False), 3, 1.0),  # turn 3 scores 0
    ]
    assert failed_turn(verdicts, threshold=1.0) == (2, verdicts[1])
    assert failed_turn(verdicts, threshold=0.7) == (3, verdicts[3])
    assert failed_turn(verdicts[:1], threshold=1.0) is None


def test_unchecked_verdicts_neither_fail_nor_pass_a_turn() -> None:
    unchecked = Verdict("latency", False, 0.0, 1.0, "cached", unchecked=True)
    assert failed_turn([on_turn(unchecked, 1, 1.0)], threshold=1.0) is None


def test_the_failure_headline_and_transcript() -> None:
    assert failure_headline(2, verdict(False), 3) == "turn 2 of 3: regex: no match"
    entries = [
        {"turn": 1, "role": "user", "content": "hi", "generated": False},
        {"turn": 2, "role": "assistant", "content": "hello", "generated": False},
        {"turn": 3, "role": "user", "content": "bye\nnow", "generated": False},
        {"turn": 3, "role": "assistant", "content": "x" * 50, "generated": True},
        {"turn": 4, "role": "user", "content": "unseen", "generated": False},
    ]
    lines = transcript_lines(entries, last=3, width=20)
    assert lines[:4] == [
        "  transcript:",
        "    [1] user: hi",
        "    [2] assistant (given): hello",
        "    [3] user: bye now",
    ]
    assert len(lines) == 5 and lines[4].startswith("    [3] assistant: xxx")
    assert len(lines[4]) < 50
