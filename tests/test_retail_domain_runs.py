"""The worked retail domain end to end (``evals/retail/``): its ten tasks run on the fake server.

The eval file, the environment module and its seed are copied unchanged into the test project.
The model under test (profile ``fake``) is a scripted agent: on each task's opening line it asks
for that task's tool calls at once (its lookups, then the actions), then answers with a final
line. The simulated user and the judges are ``fake2`` (``--judges=fake2``): the user opens with
the task's goal, then writes its stop marker; a judge always passes. The environment's tools,
the state files, the state checks and the records are the real ones.

A perfect agent (the case's ``expected_actions``) passes all ten; a wrong one (a plausible
mistake per task) fails every task on ``state-equals``, and on the ``state-subset``s that name
the field it got wrong; ``-n 0`` and ``-n 2`` give the same
records, and a second run from the cache makes no request.
"""

from __future__ import annotations

import re
import shutil
from typing import Any

import pytest
import yaml
from conftest import REPO_ROOT, Bench, Rule
from test_retail_domain import SEED, apply_actions

RETAIL = REPO_ROOT / "evals" / "retail"
EVAL_FILE = "retail_support.eval.yaml"
MODEL, USER = "fake-model", "fake-model-2"
#: The simulated user's opening call ends with this cue (engine/simulated.py's OPENING_CUE).
OPENING_CUE = "The conversation starts"
RUBRIC_PASS = '{"score": 1.0, "reason": "the customer got what they asked for"}'


def _call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"name": name, "arguments": arguments}


def _by_email(email: str) -> dict[str, Any]:
    return _call("find_user_id_by_email", email=email)


BEN, ANA, CHEN = "ben.okafor@example.com", "ana.lopez@example.com", "chen.wei@example.com"


class Script:
    """One task's scripted lines: a word only its simulated user's instructions hold, the
    user's opening, the agent's lookups before acting, and the agent's final line."""

    def __init__(self, hint: str, opening: str, lookups: list[dict[str, Any]], final: str):
        self.hint, self.opening, self.lookups, self.final = hint, opening, lookups, final


SCRIPTS: dict[str, Script] = {
    "order-status": Script(
        "W1005",
        f"Hi, I am Ben Okafor ({BEN}). What is the status of my order W1005?",
        [_by_email(BEN), _call("get_order_details", order_id="W1005")],
        "Your order W1005 has been processed and will ship soon.",
    ),
    "product-availability": Script(
        "size 11",
        "Hello, do the Running Shoes come in size 11, and what do they cost?",
        [_call("list_products"), _call("get_product_details", product_id="shoes")],
        "Size 11 costs 94.90 but is not available at the moment.",
    ),
    "cancel-pending-order": Script(
        "W1001",
        f"Hi, I am Ana Lopez ({ANA}). Please cancel my order W1001, I no longer need it.",
        [_by_email(ANA), _call("get_order_details", order_id="W1001")],
        "Order W1001 is cancelled; 44.49 goes back to your credit card.",
    ),
    "cancel-refund-to-gift-card": Script(
        "W1006",
        f"I am Chen Wei ({CHEN}). I placed order W1006 by mistake, please cancel it.",
        [_by_email(CHEN), _call("get_order_details", order_id="W1006")],
        "Order W1006 is cancelled; your gift card balance is now 102.49.",
    ),
    "change-shipping-address": Script(
        "W1003",
        f"Ben Okafor here ({BEN}). Please send order W1003 to 48 Harbor Road, Portland 97209.",
        [_by_email(BEN), _call("get_order_details", order_id="W1003")],
        "Order W1003 will now be shipped to 48 Harbor Road, Portland 97209.",
    ),
    "cancel-one-readdress-another": Script(
        "W1009",
        "I am Dana Fischer, zip 53703. Cancel W1009 and send W1010 to 9 Birch Lane, Madison 53711.",
        [
            _call(
                "find_user_id_by_name_zip", first_name="Dana", last_name="Fischer", zip_code="53703"
            )
        ],
        "W1009 is cancelled and W1010 will go to 9 Birch Lane, Madison 53711.",
    ),
    "return-delivered-item": Script(
        "white desk lamp",
        f"Ana Lopez ({ANA}): I want to return the white desk lamp from order W1002.",
        [_by_email(ANA), _call("get_order_details", order_id="W1002")],
        "The return of the lamp is requested; 45.00 will go back to your credit card.",
    ),
    "exchange-for-larger-size": Script(
        "W1004",
        f"Ben Okafor ({BEN}): the T-shirt of order W1004 is too small, I want size L.",
        [_by_email(BEN), _call("get_product_details", product_id="tee")],
        "The exchange for size L is requested; you pay 2.00 more with PayPal.",
    ),
    "refuse-cancel-delivered": Script(
        "W1008",
        "I am Dana Fischer (dana.fischer@example.com). Cancel order W1008 and refund me.",
        [_by_email("dana.fischer@example.com"), _call("get_order_details", order_id="W1008")],
        "Order W1008 was delivered, so it cannot be cancelled; I can start a return instead.",
    ),
    "transfer-damaged-item": Script(
        "arrived dented",
        f"Chen Wei ({CHEN}). My bottle from W1007 arrived dented. I want to talk to a person.",
        [_by_email(CHEN), _call("get_order_details", order_id="W1007")],
        "I have transferred you to a person: ticket HT-001.",
    ),
}

#: A plausible mistake per task, each allowed by the tools and leaving another state.
WRONG: dict[str, list[dict[str, Any]]] = {
    "order-status": [_call("cancel_pending_order", order_id="W1003", reason="no longer needed")],
    "product-availability": [
        _call("transfer_to_human_agents", user_id="chen_wei_3", topic="other")
    ],
    "cancel-pending-order": [
        _call("cancel_pending_order", order_id="W1001", reason="ordered by mistake")
    ],
    "cancel-refund-to-gift-card": [
        _call("cancel_pending_order", order_id="W1006", reason="no longer needed")
    ],
    "change-shipping-address": [
        _call(
            "modify_pending_order_address",
            order_id="W1003",
            street="48 Harbor Road",
            city="Portland",
            zip_code="97205",
        )
    ],
    "cancel-one-readdress-another": [
        _call("cancel_pending_order", order_id="W1009", reason="ordered by mistake")
    ],
    "return-delivered-item": [
        _call(
            "return_delivered_order_items",
            order_id="W1002",
            item_ids=["lamp-white", "shoes-9"],
            payment_method_id="credit_card_4410",
        )
    ],
    "exchange-for-larger-size": [
        _call(
            "exchange_delivered_order_items",
            order_id="W1004",
            item_ids=["tee-blue-s"],
            new_item_ids=["tee-blue-m"],
            payment_method_id="paypal_3320",
        )
    ],
    "refuse-cancel-delivered": [
        _call(
            "return_delivered_order_items",
            order_id="W1008",
            item_ids=["shoes-10"],
            payment_method_id="credit_card_2277",
        )
    ],
    "transfer-damaged-item": [
        _call("transfer_to_human_agents", user_id="chen_wei_3", topic="other")
    ],
}


def _cases() -> dict[str, dict[str, Any]]:
    spec = yaml.safe_load((RETAIL / EVAL_FILE).read_text(encoding="utf-8"))
    return {case["id"]: case for case in spec["cases"]}


def _perfect() -> dict[str, list[dict[str, Any]]]:
    """Each task's lookups, then its expected actions as the eval file gives them."""
    return {
        case_id: [*SCRIPTS[case_id].lookups, *case["expected_actions"]]
        for case_id, case in _cases().items()
    }


def _wrong() -> dict[str, list[dict[str, Any]]]:
    return {case_id: [*SCRIPTS[case_id].lookups, *WRONG[case_id]] for case_id in SCRIPTS}


@pytest.fixture
def retail(bench: Bench) -> Bench:
    """The project holds the retail domain's three files, as they are in evals/retail/."""
    for name in (EVAL_FILE, "retail_env.py", "retail_seed.json"):
        shutil.copy(RETAIL / name, bench.pytester.path / name)
    return bench


def script(bench: Bench, calls: dict[str, list[dict[str, Any]]]) -> None:
    """The agent asks for ``calls[case]`` on its task's opening, once, then answers; the
    simulated user opens with its task's line, then stops; judges pass."""
    bench.server.reset()
    for case_id, lines in SCRIPTS.items():
        bench.server.add_rule(
            Rule(model=MODEL, match=lines.opening, times=1, tool_calls=calls[case_id])
        )
        bench.server.add_rule(Rule(model=MODEL, match=lines.opening, reply=lines.final))
        bench.server.add_rule(
            Rule(model=USER, match=OPENING_CUE, match_any=lines.hint, reply=lines.opening)
        )
    bench.server.add_rule(
        Rule(model=USER, match_any="You play the user", reply="Thank you, that is all. <<DONE>>")
    )
    bench.server.add_rule(Rule(model=USER, reply=RUBRIC_PASS))  # the trajectory judges


def run(bench: Bench, *args: str, subprocess: bool = False) -> pytest.RunResult:
    options = ("--models=fake", "--judges=fake2", *args)
    return bench.run_subprocess(*options) if subprocess else bench.run(*options)


def verdicts(bench: Bench) -> dict[str, dict[str, Any]]:
    """What must not depend on how the run went: per case, its outcome, each assertion's
    verdict, the conversation said and the state left (the diff from the seed, the final
    state and its diff from the expected one)."""
    rows = {}
    for record in bench.records():
        state = record["state"]
        rows[record["case_id"]] = {
            "outcome": record["outcome"],
            "assertions": [(v["type"], v["passed"]) for v in record["assertions"]],
            "conversation": [(e["role"], e["content"]) for e in record["conversation"]],
            "state": (state["diff"], state["expected_diff"], state["final"]),
        }
    return dict(sorted(rows.items()))


#: Record fields that differ from run to run (timings, where it ran), and whether a reply came
#: from the cache; the fake server numbers tool call ids in the order requests reach it.
VOLATILE = re.compile(
    r"(^|/)(latency_s|ttft_s|tokens_per_s|started_at|seconds|worker|workdir|cached"
    r"|tool_call_id)$|/tool_calls/\d+/id$"
)


def _leaves(value: Any, path: str = "") -> dict[str, Any]:
    if isinstance(value, dict):
        pairs = ((f"{path}/{key}", item) for key, item in value.items())
    elif isinstance(value, list):
        pairs = ((f"{path}/{index}", item) for index, item in enumerate(value))
    else:
        return {path: value}
    return {leaf: v for place, item in pairs for leaf, v in _leaves(item, place).items()}


def comparable(bench: Bench) -> dict[str, dict[str, Any]]:
    """Each record, by case, as its leaves (``/timeline/0/actor``) less :data:`VOLATILE` ones:
    everything two runs of the same script must agree on."""
    return {
        record["case_id"]: {
            path: value for path, value in _leaves(record).items() if not VOLATILE.search(path)
        }
        for record in bench.records()
    }


def _state_equals(row: dict[str, Any]) -> bool:
    (passed,) = [ok for kind, ok in row["assertions"] if kind == "state-equals"]
    return bool(passed)


def test_the_scripted_agents_calls_run_on_the_seed() -> None:
    """In process, before any run: the perfect agent's calls (its lookups included) leave the
    expected state, and the wrong agent's run without an error and leave another one."""
    for case_id, case in _cases().items():
        expected = apply_actions(SEED, case["expected_actions"])
        assert apply_actions(SEED, _perfect()[case_id]) == expected, case_id
        assert apply_actions(SEED, _wrong()[case_id]) != expected, case_id


def test_a_perfect_agent_passes_all_ten_tasks(retail: Bench) -> None:
    script(retail, _perfect())
    run(retail).assert_outcomes(passed=10)
    rows = verdicts(retail)
    assert list(rows) == sorted(SCRIPTS)
    assert all(_state_equals(row) for row in rows.values())
    # Lookups and the refusal leave the seed as it was; the others change it.
    unchanged = {case for case, row in rows.items() if not row["state"][0]}
    assert unchanged == {"order-status", "product-availability", "refuse-cancel-delivered"}
    assert all(row["state"][1] == [] for row in rows.values())  # final == expected
    final = rows["cancel-refund-to-gift-card"]["state"][2]
    assert final["users"]["chen_wei_3"]["payment_methods"]["gift_card_5150"]["balance"] == 102.49
    # Each conversation: the user's goal, the agent's answer, and the user's stop.
    for case_id, row in rows.items():
        said = [content for role, content in row["conversation"]]
        assert said[0] == SCRIPTS[case_id].opening and said[-1] == SCRIPTS[case_id].final


#: What each task's ``state-subset`` says of the wrong agent's state. A subset checks only the
#: fields it names, so a mistake elsewhere passes it; ``state-equals`` catches every one.
WRONG_SUBSETS: dict[str, bool] = {
    # the reason is one of the fields named
    "cancel-pending-order": False,
    # the refund goes to the gift card that paid, whatever the reason given: the balance
    # named is right, the order's cancel_reason (not named) is wrong
    "cancel-refund-to-gift-card": True,
    # the zip code is one of the fields named
    "change-shipping-address": False,
    # the order's status is "return requested" whichever items go back: the extra pair of
    # shoes in the return (its item_ids, its refund) is not named
    "return-delivered-item": True,
    # the ticket's topic is named
    "transfer-damaged-item": False,
}


def _verdicts_of(row: dict[str, Any], kind: str) -> list[bool]:
    return [ok for each, ok in row["assertions"] if each == kind]


def test_a_wrong_agent_fails_every_task_on_its_state(retail: Bench) -> None:
    """Every task fails, on its state only: state-equals fails on all ten (each wrong agent
    leaves another state than the expected actions), the judges pass, and the state-subsets
    fail or hold as :data:`WRONG_SUBSETS` says."""
    script(retail, _wrong())
    run(retail).assert_outcomes(failed=10)
    rows = verdicts(retail)
    assert list(rows) == sorted(SCRIPTS)
    for case_id, row in rows.items():
        assert _verdicts_of(row, "state-equals") == [False], case_id
        assert all(_verdicts_of(row, "llm-rubric")), case_id
        diff, expected_diff, final = row["state"]
        assert diff and expected_diff, case_id  # the seed changed, and not as expected
        assert final == apply_actions(SEED, _wrong()[case_id]), case_id
    subsets = {case: _verdicts_of(row, "state-subset") for case, row in rows.items()}
    assert {case: oks for case, oks in subsets.items() if oks} == {
        case: [ok] for case, ok in WRONG_SUBSETS.items()
    }


@pytest.mark.slow
def test_records_are_the_same_with_and_without_xdist(retail: Bench) -> None:
    script(retail, _perfect())
    run(retail, "-n", "2", subprocess=True).assert_outcomes(passed=10)
    assert {r["worker"] for r in retail.records()} == {"gw0", "gw1"}
    with_xdist = comparable(retail)
    script(retail, _perfect())
    run(retail, "-n", "0", subprocess=True).assert_outcomes(passed=10)
    assert comparable(retail) == with_xdist


def test_a_second_run_from_the_cache_makes_no_request(retail: Bench) -> None:
    script(retail, _perfect())
    run(retail, "--cache=use", "--cache-dir=c").assert_outcomes(passed=10)
    first = comparable(retail)
    assert retail.server.chat_requests()
    assert not any(record["cached"] for record in retail.records())
    retail.server.reset()  # a call now would be answered "ok": no tool call, no verdict
    run(retail, "--cache=replay", "--cache-dir=c").assert_outcomes(passed=10)
    assert retail.server.requests == []
    assert all(record["cached"] for record in retail.records())
    assert comparable(retail) == first
