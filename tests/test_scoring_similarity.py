"""Tests for pytest_llmbench.scoring.similarity: ROUGE-L F1 and cosine similarity."""

from __future__ import annotations

import math

import pytest

from pytest_llmbench.scoring.similarity import cosine, rouge_l

# --- rouge_l -------------------------------------------------------------------------------


def test_rouge_l_by_hand() -> None:
    # LCS "the cat on the mat" = 5 of 6 tokens each: P = R = 5/6, F1 = 5/6.
    assert rouge_l("the cat sat on the mat", "the cat is on the mat") == pytest.approx(5 / 6)


def test_rouge_l_unequal_lengths_by_hand() -> None:
    # Candidate 2 tokens, reference 4, LCS "a c" = 2: P = 1, R = 1/2, F1 = 2 * 0.5 / 1.5 = 2/3.
    assert rouge_l("a c", "a b c d") == pytest.approx(2 / 3)
    # F1 is symmetric in candidate and reference.
    assert rouge_l("a b c d", "a c") == pytest.approx(2 / 3)


def test_rouge_l_is_order_sensitive() -> None:
    # Same bag of words, reversed: the LCS is one token, P = R = 1/3.
    assert rouge_l("one two three", "three two one") == pytest.approx(1 / 3)
    assert rouge_l("one two three", "one two three") == 1.0


def test_rouge_l_ignores_case_and_punctuation() -> None:
    assert rouge_l("The capital is PARIS!", "the capital, is... paris") == 1.0


def test_rouge_l_subsequence_not_substring() -> None:
    # "a b c" is a subsequence of "a x b y c" (not a substring): LCS 3, P = 1, R = 3/5, F = 3/4.
    assert rouge_l("a b c", "a x b y c") == pytest.approx(0.75)


def test_rouge_l_empty_texts() -> None:
    assert rouge_l("", "") == 1.0
    assert rouge_l("...", "  ") == 1.0  # no word tokens on either side
    assert rouge_l("", "paris") == 0.0
    assert rouge_l("paris", "") == 0.0
    assert rouge_l("london", "paris") == 0.0


# --- cosine --------------------------------------------------------------------------------


def test_cosine_basics() -> None:
    assert cosine([1.0, 0.0], [0.0, 1.0]) == 0.0
    assert cosine([1.0, 2.0, 3.0], [2.0, 4.0, 6.0]) == 1.0
    assert cosine([1.0, 2.0], [-1.0, -2.0]) == -1.0
    # (1, 1) . (1, 0) = 1; |(1, 1)| = sqrt 2.
    assert cosine([1.0, 1.0], [1.0, 0.0]) == pytest.approx(1 / math.sqrt(2))
    assert cosine([3, 4], [4, 3]) == pytest.approx(24 / 25)


def test_cosine_of_a_zero_vector_is_zero() -> None:
    assert cosine([0.0, 0.0], [1.0, 2.0]) == 0.0
    assert cosine([], []) == 0.0


def test_cosine_length_mismatch() -> None:
    with pytest.raises(ValueError, match="2 != 3"):
        cosine([1.0, 2.0], [1.0, 2.0, 3.0])


def test_cosine_stays_in_range() -> None:
    vector = [0.1, 0.2, 0.3, 0.7, 1e-9]
    assert -1.0 <= cosine(vector, vector) <= 1.0
    assert cosine(vector, vector) == pytest.approx(1.0)
