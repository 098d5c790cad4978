"""The worked retail domain (``evals/retail/``), in process: its tools, its seed and its tasks.

The environment module is imported straight from its file and its tools called on deep copies
of the seed, as the environment runner calls them on the state file: each task's
``expected_actions`` must change exactly the leaves the task is about, each wrong variant must
leave another state (so ``state-equals`` can tell them apart), and what the policy forbids must
raise ``ValueError`` with the state untouched. No pytest session, no model.
"""

from __future__ import annotations

import copy
import importlib.util
import inspect
import json
import typing
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml
from conftest import REPO_ROOT

from pytest_llmbench.scoring import subset_problems

RETAIL = REPO_ROOT / "evals" / "retail"
EVAL_FILE = RETAIL / "retail_support.eval.yaml"

#: A leaf's place in a JSON value: its keys and list indices (as text), from the top.
Path_ = tuple[str, ...]
#: What a diff says of a leaf that is not there.
MISSING = "<missing>"


def _load_module(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location("retail_env_under_test", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


ENV = _load_module(RETAIL / "retail_env.py")
SEED: dict[str, Any] = json.loads((RETAIL / "retail_seed.json").read_text(encoding="utf-8"))
SPEC: dict[str, Any] = yaml.safe_load(EVAL_FILE.read_text(encoding="utf-8"))
CASES: dict[str, dict[str, Any]] = {case["id"]: case for case in SPEC["cases"]}


def _tools() -> dict[str, Any]:
    """The module's tools as the convention reads them: public functions taking ``state``
    first, defined in the module itself."""
    return {
        name: function
        for name, function in inspect.getmembers(ENV, inspect.isfunction)
        if not name.startswith("_")
        and function.__module__ == ENV.__name__
        and next(iter(inspect.signature(function).parameters), None) == "state"
    }


def apply_actions(state: Any, actions: list[dict[str, Any]]) -> Any:
    """``state`` after ``actions`` (``{name, arguments}``) run in order on a copy of it."""
    state = copy.deepcopy(state)
    tools = _tools()
    for action in actions:
        tools[action["name"]](state, **action.get("arguments", {}))
    return state


def _leaves(value: Any, path: Path_ = ()) -> dict[Path_, Any]:
    if isinstance(value, dict):
        return {k: v for key, item in value.items() for k, v in _leaves(item, (*path, key)).items()}
    if isinstance(value, list):
        return {
            k: v for i, item in enumerate(value) for k, v in _leaves(item, (*path, str(i))).items()
        }
    return {path: value}


def _changes(before: Any, after: Any) -> dict[str, Any]:
    """Every leaf that differs, as ``{"a/b/c": value after (MISSING when removed)}``."""
    old, new = _leaves(before), _leaves(after)
    return {
        "/".join(path): new.get(path, MISSING)
        for path in sorted(old.keys() | new.keys())
        if old.get(path, MISSING) != new.get(path, MISSING)
    }


def _refund(order: str, method: str, amount: float) -> dict[str, Any]:
    prefix = f"orders/{order}/payment_history/1"
    return {
        f"{prefix}/amount": amount,
        f"{prefix}/kind": "refund",
        f"{prefix}/payment_method_id": method,
    }


#: What each task's expected actions change in the seed: every changed leaf, worked out by hand.
EXPECTED_CHANGES: dict[str, dict[str, Any]] = {
    "order-status": {},
    "product-availability": {},
    "cancel-pending-order": {
        "orders/W1001/cancel_reason": "no longer needed",
        "orders/W1001/status": "cancelled",
        **_refund("W1001", "credit_card_4410", 44.49),
    },
    "cancel-refund-to-gift-card": {
        "orders/W1006/cancel_reason": "ordered by mistake",
        "orders/W1006/status": "cancelled",
        **_refund("W1006", "gift_card_5150", 66.99),
        "users/chen_wei_3/payment_methods/gift_card_5150/balance": 102.49,
    },
    "change-shipping-address": {
        "orders/W1003/address/street": "48 Harbor Road",
        "orders/W1003/address/zip": "97209",
    },
    "cancel-one-readdress-another": {
        "orders/W1009/cancel_reason": "ordered by mistake",
        "orders/W1009/status": "cancelled",
        **_refund("W1009", "credit_card_2277", 19.99),
        "orders/W1010/address/street": "9 Birch Lane",
        "orders/W1010/address/zip": "53711",
    },
    "return-delivered-item": {
        "orders/W1002/return/amount": 45.0,
        "orders/W1002/return/item_ids/0": "lamp-white",
        "orders/W1002/return/payment_method_id": "credit_card_4410",
        "orders/W1002/status": "return requested",
    },
    "exchange-for-larger-size": {
        "orders/W1004/exchange/item_ids/0": "tee-blue-s",
        "orders/W1004/exchange/new_item_ids/0": "tee-blue-l",
        "orders/W1004/exchange/payment_method_id": "paypal_3320",
        "orders/W1004/exchange/price_difference": 2.0,
        "orders/W1004/status": "exchange requested",
    },
    "refuse-cancel-delivered": {},
    "transfer-damaged-item": {
        "transfers/0/ticket": "HT-001",
        "transfers/0/topic": "damaged item",
        "transfers/0/user_id": "chen_wei_3",
    },
}


def _cancel(order: str, reason: str = "ordered by mistake") -> dict[str, Any]:
    return {"name": "cancel_pending_order", "arguments": {"order_id": order, "reason": reason}}


def _address(order: str, street: str, city: str, zip_code: str) -> dict[str, Any]:
    arguments = {"order_id": order, "street": street, "city": city, "zip_code": zip_code}
    return {"name": "modify_pending_order_address", "arguments": arguments}


def _return(order: str, items: list[str], method: str) -> dict[str, Any]:
    arguments = {"order_id": order, "item_ids": items, "payment_method_id": method}
    return {"name": "return_delivered_order_items", "arguments": arguments}


def _exchange(order: str, items: list[str], new: list[str], method: str) -> dict[str, Any]:
    arguments = {"order_id": order, "item_ids": items, "new_item_ids": new}
    return {
        "name": "exchange_delivered_order_items",
        "arguments": {**arguments, "payment_method_id": method},
    }


def _transfer(user: str, topic: str) -> dict[str, Any]:
    return {"name": "transfer_to_human_agents", "arguments": {"user_id": user, "topic": topic}}


#: Plausible mistakes an agent makes on each task: each must succeed (the tools allow it) and
#: leave a state other than the expected one, so that state-equals fails it.
WRONG: dict[str, list[list[dict[str, Any]]]] = {
    "order-status": [[_cancel("W1003")], [_address("W1003", "7 Pine Avenue", "Portland", "97206")]],
    "product-availability": [
        [_exchange("W1007", ["bottle-500-steel"], ["bottle-750-steel"], "gift_card_5150")]
    ],
    "cancel-pending-order": [[_cancel("W1001", "ordered by mistake")], []],
    "cancel-refund-to-gift-card": [[_cancel("W1006", "no longer needed")], []],
    "change-shipping-address": [
        [_address("W1003", "48 Harbor Road", "Portland", "97205")],  # kept the old zip code
        [_address("W1003", "48 Harbour Road", "Portland", "97209")],
        [_cancel("W1003", "no longer needed")],
    ],
    "cancel-one-readdress-another": [
        [_cancel("W1009")],  # only half of it
        [_cancel("W1010"), _address("W1009", "9 Birch Lane", "Madison", "53711")],  # swapped
        [_cancel("W1009"), _address("W1010", "9 Birch Lane", "Madison", "53711"), _cancel("W1010")],
    ],
    "return-delivered-item": [
        [_return("W1002", ["lamp-white", "shoes-9"], "credit_card_4410")],  # the shoes too
        [_return("W1002", ["lamp-white"], "gift_card_7731")],  # allowed, but not asked for
        [_exchange("W1002", ["lamp-white"], ["lamp-black"], "credit_card_4410")],
    ],
    "exchange-for-larger-size": [
        [_exchange("W1004", ["tee-blue-s"], ["tee-blue-m"], "paypal_3320")],
        [_exchange("W1004", ["tee-blue-s"], ["tee-blue-l"], "credit_card_6060")],
        [_return("W1004", ["tee-blue-s"], "paypal_3320")],
    ],
    "refuse-cancel-delivered": [
        [_return("W1008", ["shoes-10"], "credit_card_2277")],  # "helpful", but not asked for
        [_transfer("dana_fischer_4", "other")],
    ],
    "transfer-damaged-item": [
        [_transfer("chen_wei_3", "other")],
        [_return("W1007", ["bottle-500-steel"], "credit_card_9012")],
        [],
    ],
}


def test_the_eval_file_has_ten_tasks_each_a_simulated_customer_scored_by_state() -> None:
    assert SPEC["kind"] == "agent"
    assert SPEC["environment"] == {
        "module": "retail_env.py",
        "state": "state.json",
        "seed": "file://retail_seed.json",
    }
    assert list(CASES) == list(EXPECTED_CHANGES)  # ten ids, none twice
    for case_id, case in CASES.items():
        user = case["simulated_user"]
        assert user["instructions"].strip() and 1 <= user["max_turns"] <= 6, case_id
        assert case["assert"][0] == "state-equals", case_id
    subsets = [c for c in CASES.values() if any(_typed(c, "state-subset"))]
    judged = [c for c in CASES.values() if any(_typed(c, "llm-rubric"))]
    assert (len(subsets), len(judged)) == (5, 6)  # five subset checks, six judged tasks
    assert all(a["scope"] == "trajectory" for c in judged for a in _typed(c, "llm-rubric"))


def _typed(case: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return [a for a in case["assert"] if isinstance(a, dict) and a["type"] == kind]


def test_every_tool_follows_the_module_convention() -> None:
    """A docstring for its description, every parameter typed with a type the model can fill."""
    tools = _tools()
    assert set(tools) >= {
        "find_user_id_by_email",
        "get_order_details",
        "cancel_pending_order",
        "return_delivered_order_items",
        "transfer_to_human_agents",
    }
    allowed = {str, int, float, bool, list[str], ENV.CancelReason, ENV.TransferTopic}
    for name, function in tools.items():
        assert inspect.getdoc(function), name
        hints = typing.get_type_hints(function)
        params = list(inspect.signature(function).parameters)[1:]
        assert all(hints[p] in allowed for p in params), name
    # The policy's choices are offered as enums, and the same values are checked.
    reason = typing.get_type_hints(tools["cancel_pending_order"])["reason"]
    assert (
        typing.get_args(reason) == ENV.CANCEL_REASONS == ("no longer needed", "ordered by mistake")
    )


def test_every_expected_action_names_a_tool_and_gives_all_its_arguments() -> None:
    tools = _tools()
    for case_id, case in CASES.items():
        for action in case["expected_actions"]:
            parameters = inspect.signature(tools[action["name"]]).parameters
            given = set(action["arguments"]) | {"state"}
            assert given == set(parameters), (case_id, action)


@pytest.mark.parametrize("case_id", list(EXPECTED_CHANGES))
def test_the_expected_actions_change_exactly_what_the_task_is_about(case_id: str) -> None:
    case = CASES[case_id]
    seed = copy.deepcopy(SEED)
    expected = apply_actions(SEED, case["expected_actions"])
    assert _changes(SEED, expected) == EXPECTED_CHANGES[case_id]
    assert SEED == seed  # the tools changed the copy only
    assert json.loads(json.dumps(expected)) == expected  # the state file can hold it
    # The task's state-subset checks hold on the expected state (and fail on the seed).
    for check in _typed(case, "state-subset"):
        assert not subset_problems(check["value"], expected)  # the check state-subset runs
        assert subset_problems(check["value"], SEED)


@pytest.mark.parametrize("case_id", list(WRONG))
def test_each_wrong_variant_leaves_another_state(case_id: str) -> None:
    expected = apply_actions(SEED, CASES[case_id]["expected_actions"])
    for actions in WRONG[case_id]:
        assert apply_actions(SEED, actions) != expected, actions


def test_the_expected_state_is_the_same_every_time() -> None:
    """No clock, no randomness: a replay gives the same state, byte for byte as JSON."""
    for case in CASES.values():
        first = json.dumps(apply_actions(SEED, case["expected_actions"]), sort_keys=True)
        assert json.dumps(apply_actions(SEED, case["expected_actions"]), sort_keys=True) == first


#: Requests the policy forbids, each refused by the tool with a message naming why.
FORBIDDEN: list[tuple[dict[str, Any], str]] = [
    (_cancel("W1008"), "order W1008 is delivered: only a pending order can be cancelled"),
    (_cancel("W1005"), "order W1005 is processed: only a pending order can be cancelled"),
    (_cancel("W1001", "too expensive"), "reason must be one of"),
    (_cancel("W9999"), "order W9999 not found"),
    (_address("W1002", "1 Main St", "Springfield", "62704"), "only a pending order can be changed"),
    (_return("W1001", ["tee-blue-m"], "credit_card_4410"), "only a delivered order can be"),
    (_return("W1002", ["tee-blue-m"], "credit_card_4410"), "order W1002 has no item tee-blue-m"),
    (_return("W1002", ["shoes-9", "shoes-9"], "credit_card_4410"), "named twice"),
    (_return("W1002", [], "credit_card_4410"), "at least one item"),
    (_return("W1004", ["tee-blue-s"], "credit_card_6060"), "original payment method or a gift"),
    (_return("W1002", ["shoes-9"], "paypal_3320"), "not a payment method of ana_lopez_1"),
    (_exchange("W1004", ["tee-blue-s"], ["lamp-white"], "paypal_3320"), "not a variant of"),
    (_exchange("W1004", ["tee-blue-s"], ["tee-red-m"], "paypal_3320"), "not available"),
    (_exchange("W1004", ["tee-blue-s"], ["tee-blue-s"], "paypal_3320"), "the item itself"),
    (_exchange("W1004", ["tee-blue-s"], [], "paypal_3320"), "one new item id for each"),
    (_exchange("W1003", ["lamp-black"], ["lamp-white"], "paypal_3320"), "only a delivered"),
    (_transfer("chen_wei_3", "refund"), "topic must be one of"),
    (_transfer("nobody_0", "other"), "user nobody_0 not found"),
    ({"name": "find_user_id_by_email", "arguments": {"email": "x@example.com"}}, "no user with"),
]


@pytest.mark.parametrize(("action", "message"), FORBIDDEN, ids=lambda v: str(v)[:40])
def test_what_the_policy_forbids_raises_and_changes_nothing(
    action: dict[str, Any], message: str
) -> None:
    state = copy.deepcopy(SEED)
    with pytest.raises(ValueError, match=message):
        _tools()[action["name"]](state, **action["arguments"])
    assert state == SEED


def test_a_gift_card_must_cover_an_exchanges_price_difference() -> None:
    state = copy.deepcopy(SEED)
    state["users"]["chen_wei_3"]["payment_methods"]["gift_card_5150"]["balance"] = 4.0
    exchange = _exchange("W1007", ["bottle-500-steel"], ["bottle-750-steel"], "gift_card_5150")
    with pytest.raises(ValueError, match=r"does not cover 4\.50"):
        apply_actions(state, [exchange])
    state["users"]["chen_wei_3"]["payment_methods"]["gift_card_5150"]["balance"] = 4.5
    assert (
        _changes(state, apply_actions(state, [exchange]))["orders/W1007/exchange/price_difference"]
        == 4.5
    )


def test_one_return_or_exchange_per_order() -> None:
    once = apply_actions(SEED, [_return("W1002", ["shoes-9"], "credit_card_4410")])
    for second in (
        _return("W1002", ["lamp-white"], "credit_card_4410"),
        _exchange("W1002", ["lamp-white"], ["lamp-black"], "credit_card_4410"),
    ):
        with pytest.raises(ValueError, match="W1002 is return requested"):
            apply_actions(once, [second])


def test_ids_a_tool_makes_come_from_the_state() -> None:
    tools = _tools()
    state = copy.deepcopy(SEED)
    first = tools["transfer_to_human_agents"](state, "ana_lopez_1", "billing dispute")
    second = tools["transfer_to_human_agents"](state, "ben_okafor_2", "other")
    assert "HT-001" in first and "HT-002" in second
    assert [t["ticket"] for t in state["transfers"]] == ["HT-001", "HT-002"]


def test_lookups_return_copies_and_find_users_both_ways() -> None:
    tools = _tools()
    state = copy.deepcopy(SEED)
    assert tools["find_user_id_by_email"](state, " Ana.Lopez@example.com") == "ana_lopez_1"
    assert tools["find_user_id_by_name_zip"](state, "dana", "FISCHER", "53703") == "dana_fischer_4"
    with pytest.raises(ValueError, match="no user named Dana Fischer with zip code 53711"):
        tools["find_user_id_by_name_zip"](state, "Dana", "Fischer", "53711")
    order = tools["get_order_details"](state, "W1005")
    assert order["status"] == "processed" and order["order_id"] == "W1005"
    order["status"] = "cancelled"  # the caller's copy: the state is untouched
    shoes = tools["get_product_details"](state, "shoes")
    assert shoes["variants"]["shoes-11"] == {
        "options": {"size": "11"},
        "price": 94.9,
        "available": False,
    }
    assert tools["list_products"](state)["Running Shoes"] == "shoes"
    assert state == SEED


def test_the_same_exchange_in_any_order_leaves_the_same_state() -> None:
    """state-equals compares lists as lists: the tool keeps the pairs sorted, so an agent that
    names the items in another order than the expected actions still matches."""
    states = []
    for items, new in (
        (["shoes-9", "lamp-white"], ["shoes-10", "lamp-black"]),
        (["lamp-white", "shoes-9"], ["lamp-black", "shoes-10"]),
    ):
        state = copy.deepcopy(SEED)
        ENV.exchange_delivered_order_items(state, "W1002", items, new, "credit_card_4410")
        states.append(state)
    assert states[0] == states[1]
    assert states[0]["orders"]["W1002"]["exchange"]["item_ids"] == ["lamp-white", "shoes-9"]
