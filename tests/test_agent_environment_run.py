"""Whole runs of agent files with a stateful environment (engine/kinds/agent_state.py): a
scripted agent on the fake server changes a JSON and a SQLite state through the environment's
tools; the state is seeded per case, snapshot, checked by ``state-equals`` against the
replayed expected actions and recorded (scoring/final_state.py's ``state_record``). What the
file shows wrong is a collection error at its line (spec/expand_environment.py); what only the
run can see is the item's error of kind ``environment``.
"""

from __future__ import annotations

from typing import Any

from conftest import Bench, Rule
from mcp_tools import server

from pytest_llmbench.agent.bwrap import bwrap_path

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
      - state-equals
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
    bench: Bench,
) -> None:
    _project(bench, "retail", "retail_env.py", RETAIL, AGENT)
    _cancel(bench, "W1")
    bench.run("--models=fake").assert_outcomes(passed=1)
    (record,) = bench.records()
    (call,) = _tool_steps(record)
    assert call["name"] == "cancel_pending_order" and call["result"] == "order W1 cancelled"
    state = record["state"]
    assert state["file"] == "state.json"
    assert _changes(state["diff"]) == {
        "orders/W1/reason": ("added", None, "no longer needed"),
        "orders/W1/status": ("changed", "pending", "cancelled"),
    }
    assert state["diff_more"] == 0
    assert state["expected_diff"] == [] and state["expected_diff_more"] == 0
    cancelled = {"status": "cancelled", "reason": "no longer needed"}
    assert state["final"]["orders"] == {"W1": cancelled, "W2": {"status": "delivered"}}
    verdicts = {verdict["type"]: verdict["passed"] for verdict in record["assertions"]}
    assert verdicts == {"tool-called": True, "state-equals": True}
    # the tools were offered with the file's others
    offered = bench.server.requests[0].body["tools"]
    assert [tool["function"]["name"] for tool in offered] == [
        "cancel_pending_order",
        "tag",
        "read_file",
    ]


def test_a_wrong_agent_leaves_a_state_that_fails(bench: Bench) -> None:
    _project(bench, "retail", "retail_env.py", RETAIL, AGENT)
    _cancel(bench, "W2")  # delivered: the tool raises, the model reads it, the state stays
    result = bench.run("--models=fake")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*orders/W1/status*pending*expected*cancelled*"])
    (record,) = bench.records()
    (call,) = _tool_steps(record)
    assert call["error"] is True
    assert call["result"] == "error: ValueError: order W2 is delivered, not pending"
    assert record["error_kind"] is None
    state = record["state"]
    assert state["diff"] == [] and state["final"]["orders"]["W1"] == {"status": "pending"}
    # final -> expected: what the agent left undone
    assert _changes(state["expected_diff"]) == {
        "orders/W1/reason": ("added", None, "no longer needed"),
        "orders/W1/status": ("changed", "pending", "cancelled"),
    }


def test_a_scripted_agent_changes_a_sqlite_state(bench: Bench) -> None:
    _project(bench, "shop", "shop_env.py", SHOP, SHOP_AGENT)
    bench.server.add_rule(
        Rule(tool_calls=[{"name": "restock", "arguments": {"sku": "a", "count": 2}}], times=1)
    )
    bench.server.add_rule(Rule(reply="Restocked."))
    bench.run("--models=fake").assert_outcomes(passed=1)
    (record,) = bench.records()
    state = record["state"]
    assert state["file"] == "shop.db"
    assert _changes(state["diff"]) == {"items/#0/stock": ("changed", 1, 3)}
    assert state["final"] == {"items": [{"sku": "a", "stock": 3}]}
    assert state["expected_diff"] is None  # no state-equals asked for a replay


# --- what the file shows wrong: collection errors at its line ---------------------------------


def _collection_error(bench: Bench, said: str) -> None:
    """The file is not collected: ``said`` at its ``path:line``, no traceback, no call made."""
    result = bench.run("--models=fake")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines([said])
    assert "Traceback" not in result.stdout.str()
    assert bench.server.requests == []


def test_a_module_without_tools_is_a_collection_error_at_its_line(bench: Bench) -> None:
    _project(bench, "retail", "retail_env.py", "X = 1\n", AGENT)
    line = 1 + _line_of(SANDBOX + AGENT.lstrip("\n"), "module: retail_env.py")
    _collection_error(
        bench, f"*retail.eval.yaml:{line}: environment: module: retail_env.py defines no tool*"
    )


def test_an_expected_action_naming_an_unknown_tool_is_a_collection_error_at_its_line(
    bench: Bench,
) -> None:
    agent = AGENT.replace("{name: cancel_pending_order,", "{name: refund_order,")
    _project(bench, "retail", "retail_env.py", RETAIL, agent)
    line = 1 + _line_of(SANDBOX + agent.lstrip("\n"), "{name: refund_order,")
    _collection_error(
        bench,
        f"*retail.eval.yaml:{line}: case 'cancel': expected_actions: 'refund_order' is not a "
        "tool of retail_env.py (cancel_pending_order, tag)*",
    )


# --- what only the run can see: the item's environment error -----------------------------------


def _environment_error(bench: Bench, said: str) -> dict[str, Any]:
    result = bench.run("--models=fake")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines([f"*llmbench environment error: *{said}*"])
    (record,) = bench.records()
    assert record["error_kind"] == "environment"
    return record


def test_a_module_that_raises_on_import_is_the_items_environment_error(bench: Bench) -> None:
    source = RETAIL + "\nraise ImportError('no module named retail_db')\n"
    _project(bench, "retail", "retail_env.py", source, AGENT)
    _cancel(bench, "W1")
    _environment_error(bench, "retail_env.py raised when imported: ImportError")
    assert bench.server.requests == []  # the agent never started


def test_a_state_that_is_not_json_is_the_items_environment_error(bench: Bench) -> None:
    _project(bench, "retail", "retail_env.py", RETAIL, AGENT)
    bench.server.add_rule(
        Rule(tool_calls=[{"name": "tag", "arguments": {"order_id": "W1"}}], times=1)
    )
    bench.server.add_rule(Rule(reply="Done."))
    _environment_error(bench, "the tool tag left a state that is not JSON-serialisable*set*")


CORRUPTING = (
    RETAIL
    + '''

def corrupt(state: dict) -> str:
    """Write over the state file."""
    with open("state.json", "w") as file:
        file.write("{broken")
    return "corrupted"
'''
)


def test_a_tool_that_corrupts_the_state_file_is_the_items_environment_error(
    bench: Bench,
) -> None:
    _project(bench, "retail", "retail_env.py", CORRUPTING, AGENT)
    bench.server.add_rule(Rule(tool_calls=[{"name": "corrupt", "arguments": {}}], times=1))
    bench.server.add_rule(Rule(reply="Done."))
    _environment_error(bench, "the state file state.json cannot be read after the tool corrupt")


def test_a_state_file_broken_by_the_agent_is_named_with_the_last_tool(bench: Bench) -> None:
    agent = AGENT.replace("tools: [read_file]", "tools: [write_file]")
    _project(bench, "retail", "retail_env.py", RETAIL, agent)
    arguments = {"path": "state.json", "content": "{broken"}
    bench.server.add_rule(
        Rule(tool_calls=[{"name": "write_file", "arguments": arguments}], times=1)
    )
    bench.server.add_rule(Rule(reply="Done."))
    _environment_error(
        bench, "state file state.json cannot be read (the last tool called: write_file)"
    )


STATE_SERVER = server(
    '''
from mcp.server.mcpserver import MCPServer

app = MCPServer("store")


@app.tool()
def cancel(order_id: str) -> str:
    """Cancel an order."""
    return f"order {order_id} cancelled"
'''
)

SERVER_AGENT = """
kind: agent
include_dirs: [servers]
mcp_servers:
  store: {command: python3, args: [store.py], tool_timeout_s: 20}
environment:
  server: store
  seed: {orders: {W1: {status: pending}}}
tools: ["mcp:store/*"]
max_steps: 4
cases:
  - id: cancel
    prompt: Cancel order W1.
    expected_actions:
      - {name: refund_order, arguments: {order_id: W1}}
    assert:
      - state-equals
"""


def test_a_server_environments_bare_state_equals_is_a_collection_error(bench: Bench) -> None:
    """A server's actions cannot be replayed (the runner replays a module's), so a bare
    state-equals with a server environment is refused before any call, at its line."""
    servers = bench.pytester.path / "servers"
    servers.mkdir()
    (servers / "store.py").write_text(STATE_SERVER)
    bench.eval_file("store", SANDBOX + SERVER_AGENT.lstrip("\n"))
    line = 1 + _line_of(SANDBOX + SERVER_AGENT.lstrip("\n"), "- state-equals")
    _collection_error(bench, f"store.eval.yaml:{line}: *give a value: expected actions are*")


# --- helpers -------------------------------------------------------------------------------------


def _changes(diff: list[dict[str, Any]]) -> dict[str, tuple[str, Any, Any]]:
    """A record's state diff by path: (op, before, after)."""
    return {change["path"]: (change["op"], change["before"], change["after"]) for change in diff}


def _line_of(text: str, needle: str) -> int:
    """The 0-based index of the line of ``text`` holding ``needle``."""
    return next(index for index, line in enumerate(text.splitlines()) if needle in line)


# --- the expected state starts from the seeded file, whatever put it there ---------------------

FILES_AGENT = """
kind: agent
environment:
  module: retail_env.py
tools: [read_file]
max_steps: 4
cases:
  - id: from-files-a
    prompt: Cancel order W1, I no longer need it.
    files: {state.json: '{"orders": {"W1": {"status": "pending"}, "W2": {"status": "delivered"}}}'}
    expected_actions: &cancel
      - {name: cancel_pending_order, arguments: {order_id: W1, reason: no longer needed}}
    assert: [state-equals]
  - id: from-files-b
    prompt: Cancel order W1, I no longer need it.
    files: {state.json: '{"orders": {"W1": {"status": "pending", "gift": true}}}'}
    expected_actions: *cancel
    assert: [state-equals]
"""


def test_the_expected_state_is_replayed_from_the_state_file_the_cases_files_put_there(
    bench: Bench,
) -> None:
    _project(bench, "retail", "retail_env.py", RETAIL, FILES_AGENT)
    arguments = {"order_id": "W1", "reason": "no longer needed"}
    bench.server.add_rule(Rule(reply="Done.", match_last="order W1 cancelled"))
    bench.server.add_rule(
        Rule(tool_calls=[{"name": "cancel_pending_order", "arguments": arguments}])
    )
    bench.run("--models=fake").assert_outcomes(passed=2)
    records = {record["case_id"]: record for record in bench.records()}
    cancelled = {"status": "cancelled", "reason": "no longer needed"}
    final_a = records["from-files-a"]["state"]["final"]["orders"]
    assert final_a == {"W1": cancelled, "W2": {"status": "delivered"}}
    assert records["from-files-b"]["state"]["final"]["orders"] == {
        "W1": {**cancelled, "gift": True}
    }
    for record in records.values():  # each case's own file replayed (one cache key each)
        assert record["state"]["expected_diff"] == []


# --- an item an error ended keeps its state ------------------------------------------------------


def test_an_item_ended_by_an_environment_error_keeps_its_state_diff(bench: Bench) -> None:
    from pytest_llmbench.engine.kinds import agent_state

    _project(bench, "retail", "retail_env.py", RETAIL, AGENT)
    arguments = {"order_id": "W1", "reason": "no longer needed"}
    bench.server.add_rule(
        Rule(tool_calls=[{"name": "cancel_pending_order", "arguments": arguments}], times=1)
    )
    bench.server.add_rule(
        Rule(tool_calls=[{"name": "tag", "arguments": {"order_id": "W2"}}], times=1)
    )
    bench.server.add_rule(Rule(reply="Done."))
    record = _environment_error(bench, "the tool tag left a state that is not JSON-serialisable")
    assert _changes(record["state"]["diff"]) == {
        "orders/W1/reason": ("added", None, "no longer needed"),
        "orders/W1/status": ("changed", "pending", "cancelled"),
    }
    assert record["state"]["expected_diff"] is None  # no replay for an item in error
    assert agent_state._INITIAL == {}  # the seeded state kept for the item is dropped


# --- a tool of the module named as another tool of the file ------------------------------------

CLASHING = (
    RETAIL
    + '''

def read_file(state: dict, path: str) -> str:
    """A tool named as the built-in."""
    return path
'''
)


def test_an_environment_tool_named_as_a_built_in_is_a_collection_error(bench: Bench) -> None:
    _project(bench, "retail", "retail_env.py", CLASHING, AGENT)
    line = 1 + _line_of(SANDBOX + AGENT.lstrip("\n"), "environment:")
    where = 1 + _line_of(CLASHING, "def read_file")
    _collection_error(
        bench,
        f"*retail.eval.yaml:{line}: environment: module: retail_env.py defines the tool "
        f"'read_file' (line {where}), which is a built-in tool's name*",
    )


def test_an_environment_tool_named_as_a_custom_tool_is_a_collection_error(bench: Bench) -> None:
    (bench.pytester.path / "helpers.py").write_text(
        'def tag(order_id: str) -> str:\n    """Tag."""\n    return order_id\n'
    )
    agent = AGENT.replace("tools: [read_file]", "tools: [read_file, 'helpers:tag']")
    _project(bench, "retail", "retail_env.py", RETAIL, agent)
    line = 1 + _line_of(SANDBOX + agent.lstrip("\n"), "environment:")
    _collection_error(
        bench,
        f"*retail.eval.yaml:{line}: environment: module: retail_env.py defines the tool 'tag' "
        "(line *), which is the file's tool helpers:tag's name*",
    )
