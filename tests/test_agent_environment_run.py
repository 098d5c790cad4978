"""Whole runs of agent files with a stateful environment (engine/kinds/agent_state.py): a
scripted agent on the fake server changes a JSON and a SQLite state through the environment's
tools; the state is seeded per case, snapshot, checked against the replayed expected actions
and recorded; the environment's failures are the item's errors of kind ``environment``.

Until the loader resolves ``environment:`` (spec/load.py) and the state checks are in
(scoring/final_state.py), :func:`resolving` stands in for both, in-process: it reads the file's
``environment:``, its cases' ``state:`` and ``expected_actions:``, and gives a case with
expected actions a ``state-equals``; the checks compare the final state with the expected one.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import Bench, Rule

import pytest_llmbench.scoring.final_state as state_checks
import pytest_llmbench.spec.load as loader
from pytest_llmbench.agent.bwrap import bwrap_path
from pytest_llmbench.scoring import Assertion, Verdict
from pytest_llmbench.spec import Environment, ExpectedAction

RETAIL = '''
"""A small retail store."""


def cancel_pending_order(state: dict, order_id: str, reason: str) -> str:
    """Cancel a pending order. reason: 'no longer needed' or 'ordered by mistake'."""
    order = state["orders"].get(order_id)
    if order is None:
        raise ValueError(f"order {order_id} not found")
    if order["status"] != "pending":
        raise ValueError(f"order {order_id} is {order['status']}, not pending")
    order["status"] = "cancelled"
    order["reason"] = reason
    return f"order {order_id} cancelled"


def tag(state: dict, order_id: str) -> str:
    """Tag an order."""
    state["orders"][order_id]["tags"] = {"vip"}
    return "tagged"
'''

AGENT = """
kind: agent
environment:
  module: retail_env.py
  seed: {orders: {W1: {status: pending}, W2: {status: delivered}}}
tools: [read_file]
max_steps: 4
cases:
  - id: cancel
    prompt: Cancel order W1, I no longer need it.
    expected_actions:
      - {name: cancel_pending_order, arguments: {order_id: W1, reason: no longer needed}}
    assert:
      - {type: tool-called, value: cancel_pending_order}
"""

SHOP = '''
"""A shop in SQLite."""


def restock(state, sku: str, count: int) -> str:
    """Add stock."""
    state.execute("UPDATE items SET stock = stock + ? WHERE sku = ?", (count, sku))
    return f"{sku} restocked"
'''

SHOP_AGENT = """
kind: agent
environment:
  module: shop_env.py
  state: shop.db
  seed: "CREATE TABLE items (sku TEXT, stock INTEGER); INSERT INTO items VALUES ('a', 1);"
tools: [read_file]
max_steps: 4
cases:
  - id: restock
    prompt: Restock a by 2.
    assert:
      - {type: tool-called, value: restock}
"""


def _resolved(original: Callable[..., Any]) -> Callable[..., Any]:
    """``load_spec`` with the file's environment resolved (what spec/load.py will do)."""

    def load(path: Path, roots: Any = ()) -> Any:
        loaded = original(path, roots)
        raw = yaml.safe_load(path.read_text())
        written = raw.get("environment")
        if written is None or loaded.agent is None or loaded.agent.environment is not None:
            return loaded
        module = path.parent / written["module"]
        environment = Environment(
            module, None, written.get("state", "state.json"), written.get("seed")
        )
        agent = dataclasses.replace(loaded.agent, environment=environment)
        raw_cases = {str(case["id"]): case for case in raw["cases"]}
        cases = []
        for case in loaded.cases:
            given = raw_cases[case.id]
            actions = tuple(
                ExpectedAction(a["name"], a.get("arguments", {}))
                for a in given.get("expected_actions") or ()
            )
            equals = (Assertion("state-equals", "state-equals"),) if actions else ()
            seed = given.get("state", environment.seed)
            cases.append(
                dataclasses.replace(
                    case,
                    state_seed=seed,
                    expected_actions=actions,
                    assertions=(*case.assertions, *equals),
                )
            )
        return dataclasses.replace(loaded, agent=agent, cases=tuple(cases))

    return load


def _evaluate_state(assertion: Any, snapshot: Any) -> Verdict:
    same = snapshot.final == snapshot.expected
    return Verdict(assertion.type, same, 1.0 if same else 0.0, 1.0, f"final == expected: {same}")


def _state_record(snapshot: Any, file: str) -> dict[str, Any]:
    return {
        "file": file,
        "initial": snapshot.initial,
        "final": snapshot.final,
        "expected": snapshot.expected,
    }


@pytest.fixture
def resolving(monkeypatch: pytest.MonkeyPatch) -> None:
    """The loader and the state checks of the other parts of issue 42, until they land."""
    if not _loader_resolves_environment():
        monkeypatch.setattr(loader, "load_spec", _resolved(loader.load_spec))
    for name, stub in (("evaluate_state", _evaluate_state), ("state_record", _state_record)):
        try:
            getattr(state_checks, name)(None, None)
        except NotImplementedError:
            monkeypatch.setattr(state_checks, name, stub)
        except Exception:  # implemented (and refusing None): the real one is used
            pass


def _loader_resolves_environment() -> bool:
    return "environment=" in Path(loader.__file__).read_text()


#: The environment runs in the agents' sandbox: bubblewrap where it works, else opted out.
SANDBOX = "" if bwrap_path() else "sandbox: off\n"


def _project(bench: Bench, name: str, module: str, source: str, agent: str) -> None:
    (bench.pytester.path / module).write_text(source)
    bench.eval_file(name, SANDBOX + agent.lstrip("\n"))


def _tool_steps(record: dict[str, Any]) -> list[dict[str, Any]]:
    """The tool calls of an agent item's timeline."""
    return [step for step in record["timeline"] if step["kind"] == "tool"]


def _cancel(bench: Bench, order: str) -> None:
    arguments = {"order_id": order, "reason": "no longer needed"}
    bench.server.add_rule(
        Rule(tool_calls=[{"name": "cancel_pending_order", "arguments": arguments}], times=1)
    )
    bench.server.add_rule(Rule(reply="Done."))


def test_a_scripted_agent_changes_a_json_state_and_is_checked_against_the_expected_one(
    bench: Bench, resolving: None
) -> None:
    _project(bench, "retail", "retail_env.py", RETAIL, AGENT)
    _cancel(bench, "W1")
    bench.run("--models=fake").assert_outcomes(passed=1)
    (record,) = bench.records()
    (call,) = _tool_steps(record)
    assert call["name"] == "cancel_pending_order" and call["result"] == "order W1 cancelled"
    state = record["state"]
    assert state["file"] == "state.json"
    assert state["initial"]["orders"]["W1"] == {"status": "pending"}
    cancelled = {"status": "cancelled", "reason": "no longer needed"}
    assert state["final"]["orders"]["W1"] == cancelled
    assert state["expected"] == state["final"]
    # the tools were offered with the file's others
    offered = bench.server.requests[0].body["tools"]
    assert [tool["function"]["name"] for tool in offered] == [
        "cancel_pending_order",
        "tag",
        "read_file",
    ]


def test_a_wrong_agent_leaves_a_state_that_fails(bench: Bench, resolving: None) -> None:
    _project(bench, "retail", "retail_env.py", RETAIL, AGENT)
    _cancel(bench, "W2")  # delivered: the tool raises, the model reads it, the state stays
    bench.run("--models=fake").assert_outcomes(failed=1)
    (record,) = bench.records()
    (call,) = _tool_steps(record)
    assert call["error"] is True
    assert call["result"] == "error: ValueError: order W2 is delivered, not pending"
    assert record["error_kind"] is None
    assert record["state"]["final"]["orders"]["W1"] == {"status": "pending"}
    assert record["state"]["expected"]["orders"]["W1"]["status"] == "cancelled"


def test_a_scripted_agent_changes_a_sqlite_state(bench: Bench, resolving: None) -> None:
    _project(bench, "shop", "shop_env.py", SHOP, SHOP_AGENT)
    bench.server.add_rule(
        Rule(tool_calls=[{"name": "restock", "arguments": {"sku": "a", "count": 2}}], times=1)
    )
    bench.server.add_rule(Rule(reply="Restocked."))
    bench.run("--models=fake").assert_outcomes(passed=1)
    (record,) = bench.records()
    assert record["state"]["initial"] == {"items": [{"sku": "a", "stock": 1}]}
    assert record["state"]["final"] == {"items": [{"sku": "a", "stock": 3}]}
    assert record["state"]["expected"] is None  # no state-equals asked for a replay


@pytest.mark.parametrize(
    ("source", "said"),
    [
        (
            "raise ImportError('no module named retail_db')\n",
            "environment retail_env.py: retail_env.py raised when imported: ImportError",
        ),
        ("X = 1\n", "environment retail_env.py: retail_env.py has no tools"),
    ],
    ids=["raises", "no-tools"],
)
def test_a_module_that_cannot_serve_is_the_items_environment_error(
    bench: Bench, resolving: None, source: str, said: str
) -> None:
    _project(bench, "retail", "retail_env.py", source, AGENT)
    _cancel(bench, "W1")
    result = bench.run("--models=fake")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines([f"*llmbench environment error: *{said}*"])
    (record,) = bench.records()
    assert record["error_kind"] == "environment"


def test_a_state_that_is_not_json_is_the_items_environment_error(
    bench: Bench, resolving: None
) -> None:
    _project(bench, "retail", "retail_env.py", RETAIL, AGENT)
    bench.server.add_rule(
        Rule(tool_calls=[{"name": "tag", "arguments": {"order_id": "W1"}}], times=1)
    )
    bench.server.add_rule(Rule(reply="Done."))
    result = bench.run("--models=fake")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*the tool tag left a state that is not JSON-serialisable*set*"])
    (record,) = bench.records()
    assert record["error_kind"] == "environment"


def test_an_expected_action_naming_an_unknown_tool_is_the_items_environment_error(
    bench: Bench, resolving: None
) -> None:
    agent = AGENT.replace("{name: cancel_pending_order,", "{name: refund_order,")
    _project(bench, "retail", "retail_env.py", RETAIL, agent)
    _cancel(bench, "W1")
    result = bench.run("--models=fake")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*expected action 1 (refund_order) names no tool*"])
    assert bench.records()[0]["error_kind"] == "environment"


def test_a_state_file_broken_by_the_agent_is_named_with_the_last_tool(
    bench: Bench, resolving: None
) -> None:
    agent = AGENT.replace("tools: [read_file]", "tools: [write_file]")
    _project(bench, "retail", "retail_env.py", RETAIL, agent)
    arguments = {"path": "state.json", "content": "{broken"}
    bench.server.add_rule(
        Rule(tool_calls=[{"name": "write_file", "arguments": arguments}], times=1)
    )
    bench.server.add_rule(Rule(reply="Done."))
    result = bench.run("--models=fake")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        ["*state file state.json cannot be read (the last tool called: write_file)*"]
    )
    assert json.loads(json.dumps(bench.records()[0]["error_kind"])) == "environment"
