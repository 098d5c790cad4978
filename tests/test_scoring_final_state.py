"""scoring.final_state: the state diff, the subset rule, state-equals and state-subset verdicts, and
the record's ``state``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from pytest_llmbench.scoring import (
    AssertionContext,
    AssertionSpecError,
    evaluate,
    evaluate_state,
    parse_assertion,
    state_diff,
    state_record,
    subset_problems,
)
from pytest_llmbench.scoring.final_state import MAX_DIFF_CHANGES, MAX_FINAL_CHARS, ignored

SEED: dict[str, Any] = {
    "orders": {
        "W1001": {"status": "pending", "total": 30, "items": [{"sku": "a", "qty": 1}]},
        "W1002": {"status": "delivered", "total": 12.5, "items": []},
    },
    "users": {"ana_1": {"name": "Ana"}},
}


@dataclass(frozen=True)
class Snapshot:
    """What agent.environment.StateSnapshot holds (the checks read these three)."""

    initial: Any
    final: Any
    expected: Any = None


def cancelled(state: dict[str, Any], order: str = "W1001") -> dict[str, Any]:
    import copy

    changed = copy.deepcopy(state)
    changed["orders"][order]["status"] = "cancelled"
    return changed


# --- the diff --------------------------------------------------------------------------------


def test_the_diff_names_each_changed_leaf_with_its_path_in_path_order() -> None:
    after = cancelled(SEED)
    after["orders"]["W1001"]["items"].append({"sku": "b", "qty": 2})
    after["users"]["bo_2"] = {"name": "Bo"}
    del after["orders"]["W1002"]
    assert state_diff(SEED, after) == [
        {"path": "orders/W1001/items/#1", "op": "added", "before": None,
         "after": {"sku": "b", "qty": 2}},
        {"path": "orders/W1001/status", "op": "changed", "before": "pending",
         "after": "cancelled"},
        {"path": "orders/W1002", "op": "removed", "before": SEED["orders"]["W1002"],
         "after": None},
        {"path": "users/bo_2", "op": "added", "before": None, "after": {"name": "Bo"}},
    ]  # fmt: skip


def test_numbers_compare_as_json_and_booleans_are_not_numbers() -> None:
    assert state_diff({"a": 1, "b": [2]}, {"a": 1.0, "b": [2.0]}) == []
    assert state_diff({"a": True}, {"a": 1}) == [
        {"path": "a", "op": "changed", "before": True, "after": 1}
    ]


def test_a_key_with_a_slash_is_escaped_in_its_path() -> None:
    diff = state_diff({"a/b": {"~x": 1}}, {"a/b": {"~x": 2}})
    assert [change["path"] for change in diff] == ["a~1b/~0x"]


def test_the_diff_keeps_at_most_its_limit_and_the_record_counts_the_rest() -> None:
    before = {"n": {f"k{i:04}": i for i in range(MAX_DIFF_CHANGES + 7)}}
    after = {"n": {key: value + 1 for key, value in before["n"].items()}}
    diff = state_diff(before, after)
    assert len(diff) == MAX_DIFF_CHANGES
    assert diff[0]["path"] == "n/k0000"
    record = state_record(Snapshot(before, after), "state.json")
    assert record["diff_more"] == 7


def test_ignore_globs_match_part_by_part_and_what_lies_under() -> None:
    assert ignored("orders/W1/updated_at", ["orders/*/updated_at"])
    assert ignored("orders/W1/updated_at/seconds", ["orders/*/updated_at"])
    assert not ignored("orders/W1/status", ["orders/*/updated_at"])
    assert not ignored("orders", ["orders/*"])


# --- subsets ---------------------------------------------------------------------------------


def test_a_subset_holds_when_every_given_key_and_value_is_in_the_state() -> None:
    assert subset_problems({"orders": {"W1001": {"status": "pending"}}}, SEED) == []
    assert subset_problems({"orders": {"W1002": {"total": 12.50}}}, SEED) == []
    problems = subset_problems(
        {"orders": {"W1001": {"status": "cancelled"}, "W9": {"status": "x"}}}, SEED
    )
    assert problems == [
        'orders/W1001/status: "pending", expected "cancelled"',
        'orders/W9: missing, expected {"status": "x"}',
    ]


def test_lists_in_a_subset_match_by_length_then_element_by_element() -> None:
    items = {"orders": {"W1001": {"items": [{"sku": "a"}]}}}
    assert subset_problems(items, SEED) == []
    longer = {"orders": {"W1001": {"items": [{"sku": "a"}, {"sku": "b"}]}}}
    assert subset_problems(longer, SEED) == ["orders/W1001/items: 1 items, expected a list of 2"]
    wrong = {"orders": {"W1001": {"items": [{"qty": 3}]}}}
    assert subset_problems(wrong, SEED) == ["orders/W1001/items/#0/qty: 1, expected 3"]


# --- parsing ---------------------------------------------------------------------------------


def test_state_assertions_parse_with_their_keys_and_refuse_others() -> None:
    bare = parse_assertion("state-equals")
    assert (bare.base_type, bare.value, bare.needs_value) == ("state-equals", None, False)
    given = parse_assertion(
        {"type": "not-state-equals", "value": {"a": 1}, "weight": 2, "ignore": ["a/*"]}
    )
    assert (given.negate, given.value, given.weight) == (True, {"a": 1}, 2.0)
    assert given.options["ignore"] == ("a/*",)
    assert parse_assertion({"type": "state-subset", "value": "file://s.json"}).value == (
        "file://s.json"
    )


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        ("state-subset", "value"),
        ({"type": "state-subset", "value": {"a": 1}, "ignore": ["a"]}, "ignore"),
        ({"type": "state-equals", "value": [1, 2]}, "value"),
        ({"type": "state-equals", "value": "orders.json"}, "value"),
        ({"type": "state-equals", "ignore": []}, "ignore"),
        ({"type": "state-equals", "weight": -1}, "weight"),
        ({"type": "state-equals", "scope": "trajectory"}, "scope"),
    ],
)
def test_bad_state_assertions_name_the_key_at_fault(raw: Any, field: str) -> None:
    with pytest.raises(AssertionSpecError) as info:
        parse_assertion(raw)
    assert info.value.field == field


def test_the_answer_checks_never_pass_a_state_assertion() -> None:
    verdict = evaluate(parse_assertion("not-state-equals"), "anything", AssertionContext())
    assert not verdict.passed
    assert "environment's final state" in verdict.reason


# --- verdicts --------------------------------------------------------------------------------


def test_state_equals_compares_with_the_expected_actions_state() -> None:
    final = cancelled(SEED)
    check = parse_assertion("state-equals")
    passed = evaluate_state(check, Snapshot(SEED, final, expected=cancelled(SEED)))
    assert passed.passed and passed.score == 1.0
    failed = evaluate_state(check, Snapshot(SEED, SEED, expected=cancelled(SEED)))
    assert not failed.passed and failed.score == 0.0
    assert failed.reason == '1 difference: orders/W1001/status: "pending", expected "cancelled"'


def test_state_equals_with_a_value_and_ignored_paths() -> None:
    final = cancelled(SEED)
    final["orders"]["W1001"]["updated_at"] = "2026-01-01"
    value = cancelled(SEED)
    strict = parse_assertion({"type": "state-equals", "value": value})
    verdict = evaluate_state(strict, Snapshot(SEED, final))
    assert not verdict.passed
    assert "orders/W1001/updated_at" in verdict.reason
    lenient = parse_assertion(
        {"type": "state-equals", "value": value, "ignore": ["orders/*/updated_at"]}
    )
    assert evaluate_state(lenient, Snapshot(SEED, final)).passed


def test_the_reason_names_the_first_differing_paths_and_counts_the_rest() -> None:
    expected = {f"k{i}": i for i in range(5)}
    verdict = evaluate_state(parse_assertion("state-equals"), Snapshot({}, {}, expected))
    assert verdict.reason.startswith("5 differences: k0: missing, expected 0; k1: missing")
    assert verdict.reason.endswith("(and 2 more)")


def test_negation_flips_a_verdict_but_not_a_missing_expected_state() -> None:
    final = cancelled(SEED)
    negated = parse_assertion({"type": "not-state-subset", "value": {"users": {"ana_1": {}}}})
    verdict = evaluate_state(negated, Snapshot(SEED, final))
    assert not verdict.passed and verdict.reason.startswith("negated: ")
    assert evaluate_state(parse_assertion("not-state-equals"), Snapshot(SEED, final, SEED)).passed
    nothing = evaluate_state(parse_assertion("not-state-equals"), Snapshot(SEED, final))
    assert not nothing.passed and "no expected state" in nothing.reason


def test_weights_are_the_verdicts() -> None:
    check = parse_assertion({"type": "state-subset", "value": {"users": {}}, "weight": 3})
    assert evaluate_state(check, Snapshot(SEED, SEED)).weight == 3.0


# --- the record ------------------------------------------------------------------------------


def test_the_record_holds_the_diff_the_expected_diff_and_the_final_state() -> None:
    final = cancelled(SEED)
    final["orders"]["W1001"]["total"] = 0
    equals = (parse_assertion("state-equals"),)  # replayed: the snapshot's expected state
    record = state_record(Snapshot(SEED, final, cancelled(SEED)), "state.json", equals)
    assert record["file"] == "state.json"
    assert [change["path"] for change in record["diff"]] == [
        "orders/W1001/status",
        "orders/W1001/total",
    ]
    assert record["expected_diff"] == [
        {"path": "orders/W1001/total", "op": "changed", "before": 0, "after": 30}
    ]
    assert (record["diff_more"], record["expected_diff_more"]) == (0, 0)
    assert record["final"] == final


def test_the_record_takes_a_state_equals_value_without_expected_actions() -> None:
    value = cancelled(SEED)
    given = parse_assertion({"type": "state-equals", "value": value})
    record = state_record(Snapshot(SEED, SEED), "state.json", (given,))
    assert [change["path"] for change in record["expected_diff"]] == ["orders/W1001/status"]
    assert state_record(Snapshot(SEED, SEED), "state.json")["expected_diff"] is None


def test_a_large_final_state_is_left_out_of_the_record_and_large_changes_clipped() -> None:
    big = {"blob": "x" * (MAX_FINAL_CHARS + 1)}
    record = state_record(Snapshot({}, big), "state.json")
    assert record["final"] is None
    (change,) = record["diff"]
    assert isinstance(change["after"], str) and change["after"].endswith("...")
    assert len(change["after"]) < 3000


def test_the_records_expected_diff_is_what_the_verdict_counted() -> None:
    # The replayed state differs from the assertion's own value: the value decides, and the
    # ignored paths are left out, in the verdict and the record alike.
    final = cancelled(SEED)
    final["orders"]["W1001"]["updated_at"] = "today"
    value = cancelled(SEED)
    value["orders"]["W1001"]["updated_at"] = "yesterday"
    value["orders"]["W1001"]["total"] = 31
    replayed = cancelled(SEED, "W1002")
    equals = parse_assertion(
        {"type": "state-equals", "value": value, "ignore": ["orders/*/updated_at"]}
    )
    snapshot = Snapshot(SEED, final, replayed)
    verdict = evaluate_state(equals, snapshot)
    record = state_record(snapshot, "state.json", (equals,))
    assert verdict.reason == "1 difference: orders/W1001/total: 30, expected 31"
    assert record["expected_diff"] == [
        {"path": "orders/W1001/total", "op": "changed", "before": 30, "after": 31}
    ]
    assert record["expected_diff_more"] == 0


def test_a_clipped_side_of_a_change_is_named_so_that_readers_tell_it_from_a_string() -> None:
    big = {"blob": ["x" * 50] * 100}
    (change,) = state_diff({}, big)
    assert change["clipped"] == ["after"] and change["after"].startswith('["xxx')
    (plain,) = state_diff({}, {"blob": "[x]"})
    assert "clipped" not in plain and plain["after"] == "[x]"
