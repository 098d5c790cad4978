"""Multiple choice: the answer key, the choice a reply names, and the ``choice`` assertion."""

from __future__ import annotations

from typing import Any

import pytest

from pytest_llmbench.scoring.assertions import (
    AssertionContext,
    AssertionSpecError,
    evaluate,
    parse_assertion,
)
from pytest_llmbench.scoring.choices import (
    LETTERS,
    answer_index,
    choice_marks,
    choice_outcome,
    choice_prompt,
    extract_choice,
    format_choices,
)

CAPITALS = ("Paris", "London", "Berlin", "Madrid")  # A B C D
ARC_LABELS = ("1", "2", "3", "4")


# --- showing the choices ---------------------------------------------------------------------


def test_format_choices_marks_each_choice_with_a_letter() -> None:
    assert LETTERS[:4] == "ABCD" and len(LETTERS) == 26
    assert format_choices(["Paris", "London"]) == "A. Paris\nB. London"
    assert format_choices(["Paris", "London"], ["1", "2"]) == "1. Paris\n2. London"


def test_choice_prompt_has_the_question_the_choices_and_the_instruction() -> None:
    prompt = choice_prompt("What is the capital of France?  ", CAPITALS)
    assert prompt == (
        "What is the capital of France?\n\n"
        "A. Paris\nB. London\nC. Berlin\nD. Madrid\n\n"
        "Answer with the letter of the correct choice (A, B, C or D)."
    )
    assert choice_prompt("Pick", ["yes", "no"], ["1", "2"]).endswith("choice (1 or 2).")


@pytest.mark.parametrize(
    ("choices", "labels", "message"),
    [
        ([], None, "needs a non-empty list of choices"),
        ("Paris", None, "needs a non-empty list of choices"),
        ([str(n) for n in range(27)], None, "27 choices is more than the 26 letters"),
        (["a", "b"], ["1"], "1 labels for 2 choices"),
        (["a", "b"], ["x", "X"], "labels must be distinct and non-empty"),
        (["a", "b"], ["x", " "], "labels must be distinct and non-empty"),
    ],
)
def test_unusable_choices_or_labels_raise(choices: Any, labels: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        choice_marks(choices, labels)


# --- the answer key --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("answer", "labels", "base", "index"),
    [
        ("B", None, 0, 1),
        ("b", None, 0, 1),
        (" C ", None, 0, 2),
        (0, None, 0, 0),
        (3, None, 0, 3),
        ("2", None, 0, 2),  # a digit string from a CSV column
        (2.0, None, 0, 2),  # an int column read as floats
        ("1", None, 1, 0),  # Winogrande: "1"/"2"
        (2, None, 1, 1),
        ("3", ARC_LABELS, 0, 2),  # ARC: answerKey "3" of labels "1".."4"
        ("c", ("A", "B", "C", "D"), 0, 2),
        ("London", None, 0, 1),
        ("madrid", None, 0, 3),
        ("Berlin", ARC_LABELS, 0, 2),
    ],
)
def test_answer_index_normalises_letters_indices_labels_and_texts(
    answer: Any, labels: Any, base: int, index: int
) -> None:
    assert answer_index(answer, CAPITALS, labels, base) == index


def test_answer_index_takes_a_choice_text_that_is_out_of_range_as_an_index() -> None:
    assert answer_index("4", ["1", "2", "3", "4"]) == 3  # the text "4", not index 4
    assert answer_index("2", ["1", "2"], base=1) == 1  # both readings agree


@pytest.mark.parametrize(
    ("answer", "labels", "base", "message"),
    [
        ("E", None, 0, "answer 'E' is past the last choice D"),
        (4, None, 0, r"answer 4 is out of range for 4 choices \(0-based: 0..3\)"),
        (-1, None, 0, "out of range"),
        ("0", None, 1, r"answer '0' is out of range for 4 choices \(1-based: 1..4\)"),
        ("Rome", None, 0, "answer 'Rome' is not a letter A..D, an index or a choice's text"),
        ("B", ARC_LABELS, 0, r"answer 'B' is neither a label \(1, 2, 3, 4\) nor a choice's text"),
        (True, None, 0, "answer True is not a letter, an index or a choice's text"),
        (None, None, 0, "answer None is not"),
        ("", None, 0, "answer '' is not"),
        (2.5, None, 0, "answer 2.5 is not"),
    ],
)
def test_answer_index_rejects_unknown_answers_clearly(
    answer: Any, labels: Any, base: int, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        answer_index(answer, CAPITALS, labels, base)


def test_answer_index_refuses_an_answer_that_names_two_choices() -> None:
    with pytest.raises(ValueError, match="ambiguous: it designates choice 1 by position and"):
        answer_index("1", ["1", "2", "3"])  # index 1 is "2", but "1" is the text of choice 0
    with pytest.raises(ValueError, match="the text of several choices"):
        answer_index("Paris", ["Paris", "Paris "])


# --- the choice a reply names ----------------------------------------------------------------

# (reply, index named or None) with choices A. Paris, B. London, C. Berlin, D. Madrid
REPLIES: list[tuple[str, int | None]] = [
    # bare and wrapped marks
    ("B", 1),
    ("B.", 1),
    ("(B)", 1),
    ("B)", 1),
    ("[B]", 1),
    ("**B**", 1),
    ("  B\n", 1),
    ("\\boxed{B}", 1),
    ("## B", 1),
    ("> **B**", 1),
    # explicit statements
    ("Answer: B", 1),
    ("**Answer:** C", 2),
    ("Answer: **C**", 2),
    ("Final answer: D", 3),
    ("The answer is B) London", 1),
    ("The answer is (B).", 1),
    ("The answer is B because London is the capital of England.", 1),
    ("I choose option B", 1),
    ("I'd go with (C) Berlin.", 2),
    ("I'd say D", 3),
    ("The best option is D", 3),
    ("My pick: B", 1),
    ("Option C is correct.", 2),
    ("(D) is the right answer", 3),
    ("C is incorrect; B is correct", 1),
    ("The correct answer is: C", 2),
    ("The correct answer is: A. Paris", 0),
    ("The correct answer is A. Paris is the capital of France.", 0),
    # statements win over stray letters
    ("B\n\nExplanation: option A is wrong because Paris is in France.", 1),
    ("Answer: C\nExplanation: Paris (A) is in France, London (B) in England.", 2),
    ("A. Paris\nB. London\nC. Berlin\nD. Madrid\n\nThe answer is D", 3),
    ("I would not choose A. I choose C.", 2),
    # lower case: only where it cannot be prose
    ("b", 1),
    ("(b)", 1),
    ("b) London", 1),
    ("c.", 2),
    ("The answer is b", 1),
    ("I think b", None),
    ("The answer is a city in France: Paris", 0),  # "a city" is prose; the text names Paris
    # articles, pronouns and negations are not marks
    ("A good question! The answer is Paris.", 0),
    ("A good question! The answer is B.", 1),
    ("I think the answer is not A", None),
    ("Not A but B", 1),
    ("It is C.", 2),
    ("e.g. C", 2),
    # a choice's text
    ("London", 1),
    ("london.", 1),
    ("The capital of France is Paris.", 0),
    ("**Madrid**", 3),
    # several choices, or none
    ("A or B", None),
    ("Answer: A, B", None),
    ("The answer is A and C", None),
    ("Paris or London", None),
    ("A. Paris\nB. London\nC. Berlin\nD. Madrid", None),  # an echo of the choices
    ("Answer: D. Paris", None),  # the mark and the text disagree
    ("The correct answer is: C. Paris", None),
    ("", None),
    ("   \n", None),
    ("I don't know.", None),
]


@pytest.mark.parametrize(("reply", "index"), REPLIES)
def test_extract_choice_reads_real_looking_replies(reply: str, index: int | None) -> None:
    assert extract_choice(reply, CAPITALS) == index


# What HuggingFaceTB/SmolLM2-135M-Instruct writes for such prompts: chatter around the answer.
SMALL_MODEL_REPLIES: list[tuple[str, int | None]] = [
    ("The correct answer is: A. Paris", 0),
    ("The correct answer is A) Paris.\n\nParis is the capital and largest city of France.", 0),
    ("A. Paris\n\nExplanation: Paris is the capital of France.", 0),
    ("Answer: A\n\nThe capital of France is Paris, which is also known as the City of Light.", 0),
    ("The capital of France is Paris. London is the capital of the UK.", None),
    ("Paris is the capital of France, and it's also one of the most visited cities.", 0),
    ("The answer is (A) Paris. Berlin is in Germany and Madrid is in Spain.", 0),
    ("Sure! The correct answer is **A. Paris**.", 0),
]


@pytest.mark.parametrize(("reply", "index"), SMALL_MODEL_REPLIES)
def test_extract_choice_reads_a_small_models_chatter(reply: str, index: int | None) -> None:
    assert extract_choice(reply, CAPITALS) == index


# Replies SmolLM2-135M-Instruct (Q4_1, the embedded model) gave to choice_prompt(...).
RECORDED: list[tuple[tuple[str, ...], str, int | None]] = [
    (("Venus", "Mercury", "Earth", "Mars"), "D. Mars", 3),
    (("4", "5", "6", "7"), "A. 4", 0),
    (("4", "5", "6", "7"), "2 + 3 equals 5.", 1),
    (("Cat", "Cow", "Dog", "Fish"), "B. Cow", 1),
    (("0", "10", "100", "-10"), "A. 10", None),  # A is 0, and 10 is B: it names both
]


@pytest.mark.parametrize(("choices", "reply", "index"), RECORDED)
def test_extract_choice_reads_the_embedded_models_replies(
    choices: tuple[str, ...], reply: str, index: int | None
) -> None:
    assert extract_choice(reply, choices) == index


def test_extract_choice_prefers_the_longest_choice_text() -> None:
    towns = ("Paris", "Paris, Texas", "Austin")
    assert extract_choice("It is Paris, Texas.", towns) == 1
    assert extract_choice("B. Paris, Texas", towns) == 1
    assert extract_choice("It is Paris, not Austin.", towns) is None


@pytest.mark.parametrize(
    ("reply", "index"),
    [
        ("3", 2),
        ("The answer is 3", 2),
        ("3. Berlin", 2),
        ("(2)", 1),
        ("Answer: 1 or 2", None),
        ("In 1889, Paris hosted the fair.", 0),  # no mark: the text names Paris
        ("B", None),  # letters are not this case's marks
    ],
)
def test_extract_choice_reads_the_cases_own_labels(reply: str, index: int | None) -> None:
    assert extract_choice(reply, CAPITALS, ARC_LABELS) == index


def test_extract_choice_with_numeric_choices() -> None:
    sums = ("12", "15", "18", "21")
    assert extract_choice("C. 18", sums) == 2
    assert extract_choice("18", sums) == 2
    assert extract_choice("The sum is 18, so the answer is C.", sums) == 2
    assert extract_choice("C. 15", sums) is None  # the mark and the text disagree
    temperatures = ("0", "10", "100", "-10")
    assert extract_choice("D. -10", temperatures) == 3  # not "D -" followed by 10
    assert extract_choice("B - 10", temperatures) == 1
    assert extract_choice("B - 100", temperatures) is None  # B is 10, and 100 is C


def test_choice_outcome_is_the_records_field() -> None:
    assert choice_outcome("The answer is C", CAPITALS, 2) == {
        "chosen": "C",
        "answer": "C",
        "correct": True,
    }
    assert choice_outcome("B", CAPITALS, 0) == {"chosen": "B", "answer": "A", "correct": False}
    assert choice_outcome("no idea", CAPITALS, 3) == {
        "chosen": None,
        "answer": "D",
        "correct": False,
    }
    assert choice_outcome("(3)", CAPITALS, 2, ARC_LABELS)["chosen"] == "3"


# --- the choice assertion --------------------------------------------------------------------


def choice_check(
    output: str,
    choices: tuple[str, ...] | None = CAPITALS,
    answer: int | None = 2,
    labels: tuple[str, ...] | None = None,
    raw: Any = "choice",
) -> Any:
    context = AssertionContext(choices=choices, answer_index=answer, choice_labels=labels)
    return evaluate(parse_assertion(raw), output, context)


def test_choice_assertion_parses_without_a_value() -> None:
    assertion = parse_assertion({"type": "choice", "weight": 2})
    assert (assertion.base_type, assertion.value, assertion.weight) == ("choice", None, 2.0)
    assert not assertion.needs_value and not assertion.engine_graded
    with pytest.raises(AssertionSpecError, match="choice takes no value") as info:
        parse_assertion({"type": "choice", "value": "B"})
    assert info.value.field == "value"


@pytest.mark.parametrize(
    ("output", "passed", "reason"),
    [
        ("The answer is C", True, "chose C (Berlin), the answer"),
        ("C. Berlin", True, "chose C (Berlin), the answer"),
        ("Berlin", True, "chose C (Berlin), the answer"),
        ("B", False, "chose B (London); answer C (Berlin)"),
        ("A or C", False, "named no choice; answer C (Berlin)"),
        ("", False, "named no choice; answer C (Berlin)"),
    ],
)
def test_choice_assertion_verdicts(output: str, passed: bool, reason: str) -> None:
    verdict = choice_check(output)
    assert (verdict.type, verdict.passed, verdict.reason) == ("choice", passed, reason)
    assert verdict.score == (1.0 if passed else 0.0) and verdict.weight == 1.0


def test_choice_assertion_with_labels_and_long_choices() -> None:
    assert choice_check("Answer: 3", labels=ARC_LABELS).reason == "chose 3 (Berlin), the answer"
    endings = ("walks to the store " * 5, "sits down on the bench " * 5)
    verdict = choice_check("A", endings, answer=1)
    assert not verdict.passed
    assert verdict.reason == (
        "chose A (walks to the store walks to the store...); "
        "answer B (sits down on the bench sits down on t...)"
    )


def test_negated_choice_inverts_a_verdict() -> None:
    verdict = choice_check("B", raw="not-choice")
    assert (verdict.passed, verdict.score) == (True, 1.0)
    assert verdict.reason == "negated: chose B (London); answer C (Berlin)"


@pytest.mark.parametrize("raw", ["choice", "not-choice"])
@pytest.mark.parametrize(
    ("choices", "answer", "reason"),
    [
        (None, 2, "the case has no choices"),
        ((), 2, "the case has no choices"),
        (CAPITALS, None, "the case has no answer among its 4 choices"),
        (CAPITALS, 4, "the case has no answer among its 4 choices"),
    ],
)
def test_choice_without_choices_or_answer_fails_even_negated(
    raw: str, choices: Any, answer: Any, reason: str
) -> None:
    verdict = choice_check("C", choices, answer, raw=raw)
    assert (verdict.passed, verdict.score, verdict.reason) == (False, 0.0, reason)


def test_choice_with_labels_that_do_not_fit_fails_with_the_reason() -> None:
    verdict = choice_check("C", labels=("1", "2"))
    assert (verdict.passed, verdict.reason) == (False, "2 labels for 4 choices")
