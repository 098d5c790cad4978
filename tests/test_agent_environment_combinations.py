"""Issue 42's features in the combinations users write: a stateful environment (JSON, SQLite,
an MCP server) with a simulated user or scripted turns, trajectory judges, prompt variants,
repeats and pass^k, ``-n 2``, replay from the cache, the file's other tools, the cost estimate
and selection by id.

The agent is the ``fake`` profile (``fake-model``), scripted by what it reads last; the
simulated user and the judges are ``fake2`` (``fake-model-2``), the judges told apart by their
``<trajectory>``. The environments, the sandbox, the loop, the cache and the records are real.
"""

from __future__ import annotations

import csv
import json
from typing import Any

import pytest
from conftest import Bench, Rule
from mcp_tools import server

from pytest_llmbench.agent.bwrap import bwrap_path
from pytest_llmbench.judging.trajectory_judge import BUILTIN_RUBRICS

MODEL, USER = "fake-model", "fake-model-2"

#: The environment runs in the agents' sandbox: bubblewrap where it works, else opted out.
SANDBOX = "" if bwrap_path() else "sandbox: off\n"

STORE_JSON = '''
"""Orders in a JSON state."""


def cancel_pending_order(state: dict, order_id: str, reason: str) -> str:
    """Cancel a pending order."""
    order = state["orders"].get(order_id)
    if order is None:
        raise ValueError(f"order {order_id} not found")
    order["status"] = "cancelled"
    order["reason"] = reason
    return f"order {order_id} cancelled"
'''

STORE_SQLITE = '''
"""Orders in a SQLite state."""


def cancel_pending_order(state, order_id: str, reason: str) -> str:
    """Cancel a pending order."""
    found = state.execute("SELECT status FROM orders WHERE id = ?", (order_id,)).fetchone()
    if found is None:
        raise ValueError(f"order {order_id} not found")
    state.execute(
        "UPDATE orders SET status = 'cancelled', reason = ? WHERE id = ?", (reason, order_id)
    )
    return f"order {order_id} cancelled"
'''

#: One task, twice: the variant ``careful`` recovers from its wrong order id, ``hasty`` gives up;
#: each variant's prompt is the simulated user's goal.
TASK = """kind: agent
environment:
  module: {module}
{state}  seed: {seed}
tools: []
max_steps: 4
prompts:
  - name: careful
    prompt: Cancel order {{{{order}}}}, you no longer need it.
    system: You are a careful support agent.
  - name: hasty
    prompt: Have order {{{{order}}}} cancelled.
    system: You are a HASTY support agent.
cases:
  - id: cancel
    vars: {{order: W1}}
    expected_actions:
      - {{name: cancel_pending_order, arguments: {{order_id: W1, reason: no longer needed}}}}
    simulated_user:
      model: fake2
      instructions: "You are Ana. {{{{prompt}}}}"
      max_turns: 2
    assert:
      - state-equals
      - {{type: state-subset, value: {subset}}}
      - {{type: llm-rubric, scope: trajectory, value: goal-completed, judges: [fake2]}}
      - {{type: llm-rubric, scope: trajectory, value: recovered, judges: [fake2]}}
"""

JSON_TASK = TASK.format(
    module="store_json.py",
    state="",
    seed="{orders: {W1: {status: pending}, W2: {status: pending}}}",
    subset="{orders: {W1: {status: cancelled}}}",
)
SQLITE_TASK = TASK.format(
    module="store_sqlite.py",
    state="  state: store.db\n",
    seed=(
        '"CREATE TABLE orders (id TEXT, status TEXT, reason TEXT);'
        " INSERT INTO orders VALUES ('W1', 'pending', NULL), ('W2', 'pending', NULL);\""
    ),
    subset=(
        "{orders: [{id: W1, status: cancelled, reason: no longer needed},"
        " {id: W2, status: pending}]}"
    ),
)


def _cancel(order: str) -> list[dict[str, Any]]:
    arguments = {"order_id": order, "reason": "no longer needed"}
    return [{"name": "cancel_pending_order", "arguments": arguments}]


DONE = "Your order W1 is cancelled."


def _script(bench: Bench) -> None:
    """The agent tries order W9 first (the environment raises), then W1 (careful) or gives up
    (hasty); the user asks until told it is cancelled; the judges pass the careful run only."""
    server = bench.server
    passed = json.dumps({"score": 1.0, "reason": "cancelled after the error"})
    failed = json.dumps({"score": 0.0, "reason": "gave up after the error"})
    server.add_rule(Rule(model=USER, match_any=f"[final answer] {DONE}", reply=passed))
    server.add_rule(Rule(model=USER, match_any="<trajectory>", reply=failed))
    server.add_rule(Rule(model=USER, match_last=DONE, reply="Thanks! <<DONE>>"))
    server.add_rule(Rule(model=USER, reply="Please cancel order W1, I no longer need it."))
    server.add_rule(Rule(model=MODEL, match_last="order W1 cancelled", reply=DONE))
    server.add_rule(
        Rule(model=MODEL, match_any="HASTY", match_last="not found", reply="I cannot find it.")
    )
    server.add_rule(Rule(model=MODEL, match_last="not found", tool_calls=_cancel("W1")))
    server.add_rule(Rule(model=MODEL, match_last="cancel order W1", tool_calls=_cancel("W9")))


def _project(bench: Bench) -> None:
    path = bench.pytester.path
    (path / "store_json.py").write_text(STORE_JSON)
    (path / "store_sqlite.py").write_text(STORE_SQLITE)
    bench.eval_file("orders_json", SANDBOX + JSON_TASK)
    bench.eval_file("orders_sqlite", SANDBOX + SQLITE_TASK)


#: What may differ between two runs of the same items: when and where they ran, whether an
#: answer came from the cache, how fast, and the ids the provider gave the tool calls (under
#: -n 2, two workers may both make a call that repeats share, and the cache keeps one).
RUN_KEYS = frozenset(
    {"started_at", "worker", "workdir", "cached", "seconds", "latency_s", "ttft_s"}
    | {"tokens_per_s", "tool_call_id", "id"}
)


def _kept(value: Any) -> Any:
    """``value`` without :data:`RUN_KEYS`, at any depth."""
    if isinstance(value, dict):
        return {k: _kept(v) for k, v in value.items() if k not in RUN_KEYS}
    if isinstance(value, list):
        return [_kept(v) for v in value]
    return value


def _by_id(bench: Bench) -> dict[str, Any]:
    return {record["nodeid"]: _kept(record) for record in bench.records()}


def _judged_prompts(bench: Bench) -> list[str]:
    """The last message of each request to the judges' model."""
    return [
        r.body["messages"][-1]["content"]
        for r in bench.server.chat_requests()
        if r.body.get("model") == USER
    ]


def _judged(bench: Bench) -> list[str]:
    """What each judge was asked (the user message of each request holding a trajectory)."""
    asked = [r.body["messages"][-1]["content"] for r in bench.server.chat_requests()]
    return [text for text in asked if "<trajectory>" in text]


@pytest.mark.slow
def test_stateful_tasks_with_a_user_judges_variants_and_repeats_under_xdist_and_replay(
    bench: Bench,
) -> None:
    _project(bench)
    _script(bench)
    common = ("--models=fake", "--repeat=3", "--cache-dir=c", "--results-dir=out")
    # -n 2 live, writing the cache; pytest's own cache on, for --lf below
    live = bench.pytester.runpytest_subprocess(*common, "-n", "2", "--cache=use")
    live.assert_outcomes(passed=6, failed=6)
    split = _by_id(bench)
    assert {r["worker"] for r in bench.records()} == {"gw0", "gw1"}
    made = len(bench.server.chat_requests())
    # -n 0 from the cache: no request, the records of the -n 2 run
    again = bench.pytester.runpytest(*common, "--cache=replay")
    again.assert_outcomes(passed=6, failed=6)
    assert len(bench.server.chat_requests()) == made
    assert all(record["cached"] for record in bench.records())
    assert _by_id(bench) == split
    again.stdout.fnmatch_lines(["#*model*pass^k*score*"])  # the terminal board's too
    # -n 2 from the cache as well: the runners rerun the tools on each worker, no request
    spread = bench.pytester.runpytest_subprocess(*common, "-n", "2", "--cache=replay")
    spread.assert_outcomes(passed=6, failed=6)
    assert len(bench.server.chat_requests()) == made
    assert all(record["cached"] for record in bench.records())
    assert _by_id(bench) == split

    records = bench.records()
    assert len(records) == 12
    for record in records:
        careful = record["model"] == "fake:careful"
        assert record["outcome"] == ("passed" if careful else "failed"), record["nodeid"]
        assert record["conversation_stopped"] == ("goal" if careful else "max_turns")
        tools = [s for s in record["timeline"] if s["kind"] == "tool"]
        assert tools[0]["result"] == "error: ValueError: order W9 not found"
        assert [v["passed"] for v in record["assertions"]] == [careful] * 4
        state = record["state"]
        final = state["final"]["orders"]
        w1 = final["W1"] if isinstance(final, dict) else final[0]  # JSON, or SQLite rows
        assert w1["status"] == ("cancelled" if careful else "pending")
        assert bool(state["expected_diff"]) is not careful
        assert [change["path"].rsplit("/", 1)[1] for change in state["diff"]] == (
            ["reason", "status"] if careful else []
        )
    # each variant's prompt was the simulated user's goal
    said = [r.body["messages"][0]["content"] for r in bench.server.chat_requests()]
    for goal in (
        "You are Ana. Cancel order W1, you no longer need it.",
        "Have order W1 cancelled.",
    ):
        assert any(goal in text for text in said)
    # the judges read the environment's error and the agent's path after it
    judged = _judged(bench)
    assert judged and all("ERROR] error: ValueError: order W9 not found" in t for t in judged)
    assert any(BUILTIN_RUBRICS["recovered"] in t for t in judged)
    assert any(BUILTIN_RUBRICS["goal-completed"] in t for t in judged)

    # pass^k first, per variant: the careful prompt passed all 3 repeats of both tasks
    with bench.out("leaderboard.csv").open(encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
        header = list(rows[0])
    assert header[header.index("pass_rate") - 2 : header.index("pass_rate")] == ["pass_hat_k", "k"]
    board = {row["model"]: (float(row["pass_hat_k"]), row["k"]) for row in rows}
    assert board == {"fake:careful": (1.0, "3"), "fake:hasty": (0.0, "3")}

    # selection by id: the last failures, narrowed by -k to one file and repeat
    picked = bench.pytester.runpytest(*common, "--cache=replay", "--lf", "-k", "sqlite and r1")
    picked.assert_outcomes(failed=1)
    assert [r["nodeid"] for r in bench.records()] == [
        "orders_sqlite.eval.yaml::cancel[fake-hasty-r1]"
    ]
    assert len(bench.server.chat_requests()) == made


# --- the environment's tools beside the file's others, scripted turns ------------------------

HELPERS = '''
def shout(text: str) -> str:
    """The text in capitals."""
    return text.upper()
'''

DESK = """kind: agent
environment:
  module: store_json.py
  seed: {orders: {W1: {status: pending}, W2: {status: pending}}}
mcp_servers:
  time: {command: python3, args: [-m, mcp_server_time, --local-timezone, UTC]}
tools: [write_file, "helpers:shout", "mcp:time/get_*"]
max_steps: 4
cases:
  - id: scripted
    expected_actions:
      - {name: cancel_pending_order, arguments: {order_id: W1, reason: no longer needed}}
    turns:
      - user: Please cancel order W1, I no longer need it.
        assert:
          - {type: icontains, value: cancelled}
          - {type: model-graded, scope: trajectory, judges: [fake2], choices: {Y: 1, N: 0},
             prompt: "Pick one. Was W1 cancelled through the tool? {{trajectory}}"}
      - user: Log it with the time, loudly.
        assert: [{type: icontains, value: logged}]
    assert:
      - state-equals
      - {type: state-subset, value: {orders: {W1: {status: cancelled}, W2: {status: pending}}}}
      - {type: tool-called, value: "mcp:time/get_current_time"}
      - {type: tool-called, value: shout}
      - {type: file-contains, path: log.txt, value: W1 CANCELLED}
"""


def _script_desk(bench: Bench) -> None:
    """Turn 1: the environment's tool; turn 2: the MCP server's, the custom and a built-in one
    in one step."""
    server = bench.server
    server.add_rule(Rule(model=USER, match_any="Pick one", reply='{"choice": "Y"}'))
    server.add_rule(Rule(match_last="wrote", reply="Logged."))
    logged = [
        {"name": "time__get_current_time", "arguments": {"timezone": "UTC"}},
        {"name": "shout", "arguments": {"text": "w1 cancelled"}},
        {"name": "write_file", "arguments": {"path": "log.txt", "content": "W1 CANCELLED"}},
    ]
    server.add_rule(Rule(match="Log it", tool_calls=logged))
    server.add_rule(Rule(match_last="order W1 cancelled", reply=DONE))
    server.add_rule(Rule(match="cancel order W1", tool_calls=_cancel("W1")))


@pytest.mark.slow
def test_scripted_turns_use_the_environments_tools_beside_builtin_custom_and_mcp_ones(
    bench: Bench,
) -> None:
    path = bench.pytester.path
    (path / "store_json.py").write_text(STORE_JSON)
    (path / "helpers.py").write_text(HELPERS)
    bench.eval_file("desk", SANDBOX + DESK)
    _script_desk(bench)
    bench.run_subprocess("--models=fake").assert_outcomes(passed=1)
    (record,) = bench.records()
    offered = [tool["function"]["name"] for tool in bench.server.requests[0].body["tools"]]
    assert sorted(offered) == sorted(
        ["cancel_pending_order", "write_file", "shout", "time__get_current_time"]
    )
    assert record["tool_counts"] == {
        "cancel_pending_order": 1,
        "mcp:time/get_current_time": 1,
        "shout": 1,
        "write_file": 1,
    }
    results = {s["name"]: s["result"] for s in record["timeline"] if s["kind"] == "tool"}
    assert results["shout"] == "W1 CANCELLED" and "+00:00" in results["mcp:time/get_current_time"]
    assert record["conversation_stopped"] == "last_turn"
    # turn 1's trajectory judge read the environment's call, and nothing of turn 2
    (judged,) = [t for t in _judged_prompts(bench) if t.startswith("Pick one.")]
    assert '[called cancel_pending_order({"order_id": "W1"' in judged
    assert "[step 1, tool cancel_pending_order] order W1 cancelled" in judged
    assert "shout" not in judged and "Log it" not in judged
    assert [(v["turn"], v["type"], v["passed"]) for v in record["assertions"]] == [
        (1, "icontains", True),
        (1, "model-graded", True),
        (2, "icontains", True),
        (2, "state-equals", True),
        (2, "state-subset", True),
        (2, "tool-called", True),
        (2, "tool-called", True),
        (2, "file-contains", True),
    ]
    assert record["state"]["final"] == {
        "orders": {
            "W1": {"status": "cancelled", "reason": "no longer needed"},
            "W2": {"status": "pending"},
        }
    }


# --- an MCP server as the environment ---------------------------------------------------------

LEDGER = server(
    '''
import json

from mcp.server.mcpserver import MCPServer

app = MCPServer("ledger")


@app.tool()
def deposit(account: str, amount: int) -> str:
    """Add an amount to an account's balance."""
    with open("state.json") as file:
        state = json.load(file)
    if account not in state["accounts"]:
        raise ValueError(f"no account {account}")
    state["accounts"][account] += amount
    with open("state.json", "w") as file:
        json.dump(state, file)
    return f"{account} now has {state['accounts'][account]}"
'''
)

LEDGER_AGENT = """kind: agent
include_dirs: [servers]
mcp_servers:
  ledger: {command: python3, args: [ledger.py]}
environment: {server: ledger, seed: {accounts: {ana: 10, ben: 5}}}
tools: ["mcp:ledger/*"]
max_steps: 3
cases:
  - id: deposit
    prompt: Put 5 into Ana's account.
    assert:
      - {type: state-subset, value: {accounts: {ana: 15}}}
      - {type: state-equals, value: {accounts: {ana: 15, ben: 5}}}
      - {type: not-state-equals, value: {accounts: {ana: 10, ben: 5}}}
  - id: wrong-account
    prompt: Put 5 into Ben's account.
    assert:
      - {type: state-subset, value: {accounts: {ben: 10}}}
"""

#: A bare state-equals: the expected state would be replayed, but a server has no module.
REPLAYED = """kind: agent
include_dirs: [servers]
mcp_servers:
  ledger: {command: python3, args: [ledger.py]}
environment: {server: ledger, seed: {accounts: {ana: 10}}}
tools: ["mcp:ledger/*"]
cases:
  - id: replayed
    prompt: Put 5 into Ana's account.
    expected_actions:
      - {name: deposit, arguments: {account: ana, amount: 5}}
    assert:
      - {type: state-subset, value: {accounts: {ana: 15}}}
      - state-equals
"""


@pytest.mark.slow
def test_an_mcp_server_environment_keeps_the_state_and_refuses_a_replayed_state_equals(
    bench: Bench,
) -> None:
    (bench.pytester.path / "servers").mkdir()
    (bench.pytester.path / "servers" / "ledger.py").write_text(LEDGER)
    bench.eval_file("ledger", SANDBOX + LEDGER_AGENT)
    bench.eval_file("replayed", SANDBOX + REPLAYED)
    deposit = [{"name": "ledger__deposit", "arguments": {"account": "ana", "amount": 5}}]
    bench.server.add_rule(Rule(match_last="now has", reply="Done."))
    bench.server.add_rule(Rule(tool_calls=deposit))
    result = bench.run_subprocess("--models=fake", "--continue-on-collection-errors")
    line = SANDBOX.count("\n") + REPLAYED.splitlines().index("      - state-equals") + 1
    result.stdout.fnmatch_lines(
        [
            f"replayed.eval.yaml:{line}: `state-equals` without a value, with the MCP server "
            "environment 'ledger': give a value: expected actions are replayed through a module"
        ]
    )
    result.assert_outcomes(passed=1, failed=1, errors=1)
    records = {record["case_id"]: record for record in bench.records()}
    assert records["deposit"]["state"]["final"] == {"accounts": {"ana": 15, "ben": 5}}
    assert [v["passed"] for v in records["deposit"]["assertions"]] == [True, True, True]
    wrong = records["wrong-account"]
    assert wrong["state"]["diff"] == [
        {"path": "accounts/ana", "op": "changed", "before": 10, "after": 15}
    ]
    assert wrong["assertions"][0]["reason"] == "1 difference: accounts/ben: 5, expected 10"


# --- the cost estimate --------------------------------------------------------------------------


def test_the_cost_estimate_of_a_stateful_task_with_a_user_is_finite(bench: Bench) -> None:
    (bench.pytester.path / "store_json.py").write_text(STORE_JSON)
    budget = "max_steps: 4\nmodel_params: {max_tokens: 10}"
    bench.eval_file("orders_json", SANDBOX + JSON_TASK.replace("max_steps: 4", budget))
    result = bench.run("--collect-only", "-q", "--estimate-cost", "--models=fake", "--repeat=3")
    row = next(line.split() for line in result.stdout.lines if line.startswith("fake "))
    items, tokens_in, tokens_out, cost = int(row[1]), int(row[2]), int(row[3]), float(row[4])
    assert items == 2 * 3  # two prompt variants, three repeats
    # every reply at its longest: max_turns (2) replies of max_steps (4) calls of 10 tokens
    assert tokens_out == items * 2 * 4 * 10
    # each call reads at least the turns and steps before it, unwritten, at the budget
    assert tokens_in > items * sum(
        (r + 1) * 10 + (r * 4 + s) * 10 for r in (0, 1) for s in range(4)
    )
    assert cost == pytest.approx((tokens_in * 0.001 + tokens_out * 0.002) / 1000, abs=1e-4)
