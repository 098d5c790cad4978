"""``communicated``: tau2-bench's ``communicate_info`` rule on what the model told the user."""

from __future__ import annotations

import re
from typing import Any

import pytest

from pytest_llmbench.scoring.assertions import (
    AssertionContext,
    AssertionSpecError,
    Verdict,
    evaluate,
    parse_assertion,
)
from pytest_llmbench.scoring.communicated import messages_from_agent, not_communicated


def check(raw: Any, output: str, said: tuple[str, ...] | None = None) -> Verdict:
    return evaluate(parse_assertion(raw), output, AssertionContext(said=said))


@pytest.mark.parametrize(
    ("infos", "said", "missing"),
    [
        # case-insensitive substring, anywhere in any text
        (["W1001"], ["your order w1001 is cancelled"], []),
        (["Refund of 120 USD"], ["You get a REFUND OF 120 USD."], []),
        # commas are removed from the messages: "1,234" said reads as "1234"
        (["1234"], ["the total is 1,234 dollars"], []),
        # but not from the info: an info holding a comma is never found (tau2's quirk)
        (["1,234"], ["the total is 1,234 dollars"], ["1,234"]),
        # texts are joined by a newline: a string across two of them is not found
        (["pending cancelled"], ["pending", "cancelled"], ["pending cancelled"]),
        (["pending\ncancelled"], ["pending", "cancelled"], []),
        # every string is needed; the missing ones in their order
        (["a1", "b2", "c3"], ["b2 only"], ["a1", "c3"]),
        ([], ["anything"], []),
    ],
)
def test_the_rule_is_tau2s(infos: list[str], said: list[str], missing: list[str]) -> None:
    assert not_communicated(infos, said) == missing


def test_the_messages_are_joined_lowercased_and_stripped_of_commas() -> None:
    assert messages_from_agent(["Hello, Ana", "ORDER W1,001"]) == "hello ana\norder w1001"


def test_without_said_the_answer_is_what_was_told() -> None:
    passed = check({"type": "communicated", "value": "W1001"}, "Order w1001 cancelled.")
    assert passed.passed and passed.score == 1.0
    assert passed.reason == "the string told to the user in the answer"
    failed = check({"type": "communicated", "value": ["W1001", "refund"]}, "W1001 done")
    assert not failed.passed and failed.score == 0.0
    assert failed.reason == "not told to the user in the answer: 'refund'"


def test_said_replaces_the_answer_and_the_reason_counts_the_replies() -> None:
    raw = {"type": "communicated", "value": ["W1001", "refund"]}
    said = ("Your order W1001 is pending.", "Done, anything else?")
    verdict = check(raw, "Done, anything else?", said)
    assert not verdict.passed
    assert verdict.reason == "not told to the user in 2 replies: 'refund'"
    told = check(raw, "Done.", (*said, "The refund is on its way."))
    assert told.passed and told.reason == "all 2 strings told to the user in 3 replies"


def test_a_long_list_of_missing_strings_is_cut_in_the_reason() -> None:
    raw = {"type": "communicated", "value": [f"code-{n}" for n in range(8)]}
    reason = check(raw, "nothing").reason
    assert "'code-4'" in reason and "'code-5'" not in reason and "(and 3 more)" in reason


def test_not_communicated_is_the_plain_negation() -> None:
    raw = {"type": "not-communicated", "value": "password"}
    assert check(raw, "I cannot share that.").passed
    leaked = check(raw, "The PASSWORD is hunter2.")
    assert not leaked.passed and leaked.reason.startswith("negated: ")


def test_weight_is_kept_and_a_number_is_read_as_text() -> None:
    assertion = parse_assertion({"type": "communicated", "value": [120, "USD"], "weight": 2})
    assert assertion.value == ("120", "USD") and assertion.weight == 2.0


@pytest.mark.parametrize(
    ("raw", "field", "fragment"),
    [
        ({"type": "communicated"}, "value", "needs a value (a string or a list of strings)"),
        ("communicated", "value", "cannot be a bare type name"),
        ({"type": "communicated", "value": []}, "value", "a non-empty list of strings"),
        ({"type": "communicated", "value": [{"a": 1}]}, "value", "a non-empty list of strings"),
        ({"type": "communicated", "value": ["x", ""]}, "value", "an empty string is always"),
        ({"type": "communicated", "value": "x", "threshold": 0.5}, "threshold", "does not apply"),
        ({"type": "communicated", "value": "x", "scope": "trajectory"}, "scope", "scope"),
    ],
)
def test_bad_values_are_refused(raw: Any, field: str, fragment: str) -> None:
    with pytest.raises(AssertionSpecError, match=re.escape(fragment)) as caught:
        parse_assertion(raw)
    assert caught.value.field == field
