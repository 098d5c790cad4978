"""An agent that talks: ``kind: agent`` with a simulated user or scripted turns, end to end.

The agent is the ``fake`` profile (``fake-model``) scripted with tool calls; the simulated user
is ``fake2`` (``fake-model-2``), scripted by what it reads last (the agent's reply, in its view
the user's message). The loop, the tools, the cache, scoring and the records are the real ones.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from conftest import Bench, Rule

MODEL, USER = "fake-model", "fake-model-2"

ORDER = """
kind: agent
tools: [read_file]
max_steps: 4
system: You are the order desk.
cases:
  - id: order
    files: {orders.txt: "W1001 pending"}
    simulated_user:
      model: fake2
      instructions: You are Ana. Ask about order W1001, then have it cancelled.
      max_turns: 4
      assert: [{type: not-icontains, value: sorry}]
    assert:
      - {type: tool-called, value: read_file}
      - {type: icontains, value: cancelled}
"""


def _script_agent(bench: Bench) -> None:
    """Reply 1 reads orders.txt then says the order is pending; reply 2 cancels it."""
    bench.server.add_rule(Rule(model=MODEL, match="cancel it", reply="Order W1001 is cancelled."))
    bench.server.add_rule(
        Rule(model=MODEL, match_last="W1001 pending", reply="Your order W1001 is pending.")
    )
    bench.server.add_rule(
        Rule(
            model=MODEL,
            match="Where is my order",
            tool_calls=[{"name": "read_file", "arguments": {"path": "orders.txt"}}],
        )
    )


def _script_user(bench: Bench, done: str = "Thanks! <<DONE>>") -> None:
    bench.server.add_rule(Rule(model=USER, match="cancelled", reply=done))
    bench.server.add_rule(Rule(model=USER, match="pending", reply="Please cancel it."))
    bench.server.add_rule(Rule(model=USER, match="You play the user", reply="?"))  # not sent
    bench.server.add_rule(Rule(model=USER, reply="Where is my order W1001?"))


def test_the_agent_answers_each_user_turn_with_its_tools_and_the_user_ends_it(
    bench: Bench,
) -> None:
    _script_agent(bench)
    _script_user(bench)
    bench.eval_file("desk", ORDER)
    bench.run("--models=fake").assert_outcomes(passed=1)
    (record,) = bench.records()
    assert record["conversation_stopped"] == "goal"
    assert record["agent_steps"] == 3 and record["tool_call_count"] == 1
    assert [(e["turn"], e["role"], e["content"]) for e in record["conversation"]] == [
        (1, "user", "Where is my order W1001?"),
        (1, "assistant", "Your order W1001 is pending."),
        (2, "user", "Please cancel it."),
        (2, "assistant", "Order W1001 is cancelled."),
    ]
    assert record["response"] == "Order W1001 is cancelled."
    # The user's check on every reply; the case's after the conversation, on the last reply.
    assert [(v["turn"], v["type"], v["passed"]) for v in record["assertions"]] == [
        (1, "not-icontains", True),
        (2, "not-icontains", True),
        (2, "tool-called", True),
        (2, "icontains", True),
    ]
    # The agent's second reply reads its first one's tool call and result.
    last = bench.server.chat_messages(MODEL)[-1]
    assert [m["role"] for m in last] == [
        "system", "user", "assistant", "tool", "assistant", "user"
    ]  # fmt: skip
    assert last[3]["content"] == "W1001 pending"
    timeline = [(e["kind"], e["actor"]) for e in record["timeline"]]
    assert timeline == [
        ("user", "user"),
        ("model", "agent"),
        ("tool", "tool"),
        ("model", "agent"),
        ("user", "user"),
        ("model", "agent"),
    ]
    assert [e["turn"] for e in record["timeline"] if e["kind"] == "user"] == [1, 2]


SCRIPTED = """
kind: agent
tools: [read_file]
max_steps: 4
cases:
  - id: scripted
    files: {orders.txt: "W1001 pending"}
    turns:
      - user: Where is my order W1001?
        assert: [{type: icontains, value: pending}]
      - user: Please cancel it.
        assert: [{type: icontains, value: cancelled}]
    assert: [{type: tool-called, value: read_file}]
"""


def test_scripted_turns_are_answered_in_order_until_the_last(bench: Bench) -> None:
    _script_agent(bench)
    bench.eval_file("desk", SCRIPTED)
    bench.run("--models=fake").assert_outcomes(passed=1)
    (record,) = bench.records()
    assert record["conversation_stopped"] == "last_turn"
    assert [(e["role"], e["content"]) for e in record["conversation"]] == [
        ("user", "Where is my order W1001?"),
        ("assistant", "Your order W1001 is pending."),
        ("user", "Please cancel it."),
        ("assistant", "Order W1001 is cancelled."),
    ]
    assert [(v["turn"], v["type"]) for v in record["assertions"]] == [
        (1, "icontains"),
        (2, "icontains"),
        (2, "tool-called"),
    ]
    assert record["user_sim_tokens"] is None  # no simulated user
    assert record["agent_steps"] == 3
    # The first reply's entry carries its tool call, the item its steps' tokens summed.
    assert [c["name"] for c in record["conversation"][1]["tool_calls"]] == ["read_file"]
    replies = [e for e in record["conversation"] if e["generated"]]
    assert record["input_tokens"] == sum(e["input_tokens"] for e in replies)


def test_a_user_that_never_says_stop_ends_at_max_turns(bench: Bench) -> None:
    _script_agent(bench)
    bench.server.add_rule(Rule(model=USER, reply="Where is my order W1001?"))
    bench.eval_file("desk", ORDER.replace("value: cancelled}", "value: pending}"))
    bench.run("--models=fake").assert_outcomes(passed=1)
    (record,) = bench.records()
    assert record["conversation_stopped"] == "max_turns"
    users = [e["content"] for e in record["conversation"] if e["role"] == "user"]
    assert users == ["Where is my order W1001?"] * 4
    assert len(bench.server.chat_messages(USER)) == 4  # never asked for a fifth turn
    assert record["agent_steps"] == 8 and record["tool_call_count"] == 4


def test_a_reply_that_runs_out_of_steps_ends_the_conversation(bench: Bench) -> None:
    bench.server.add_rule(
        Rule(model=MODEL, tool_calls=[{"name": "read_file", "arguments": {"path": "orders.txt"}}])
    )
    three = SCRIPTED.replace("max_steps: 4", "max_steps: 2").replace(
        "    assert: [{type: tool", "      - user: Thanks.\n    assert: [{type: tool"
    )
    bench.eval_file("desk", three)
    result = bench.run("--models=fake")
    result.assert_outcomes(failed=1)
    (record,) = bench.records()
    assert record["conversation_stopped"] == "max_steps"
    assert record["agent_stopped"] == "max_steps" and record["agent_steps"] == 2
    assert [e["role"] for e in record["conversation"]] == ["user", "assistant"]
    assert record["conversation"][1]["content"] == ""  # no answer in its steps
    # Turn 2 never came: its check fails; the last turn's and the case's check the last reply.
    assert [(v["turn"], v["type"], v["passed"]) for v in record["assertions"]] == [
        (1, "icontains", False),
        (1, "tool-called", True),
        (2, "icontains", False),
    ]
    assert record["assertions"][2]["reason"] == (
        "turn 2 not reached: the conversation ended (max_steps)"
    )
    assert len(bench.server.chat_messages(MODEL)) == 2


def test_the_time_budget_holds_over_the_whole_conversation(bench: Bench) -> None:
    """Each model step takes 0.4 s: a reply of two steps (0.8 s) fits a budget of 1.2 s, and
    so would every later reply on its own; counted over the conversation, the second reply's
    first step spends past it."""
    read = [{"name": "read_file", "arguments": {"path": "orders.txt"}}]
    server = bench.server
    server.add_rule(Rule(model=MODEL, match_last="W1001 pending", reply="It is pending.",
                         delay_s=0.4))  # fmt: skip
    server.add_rule(Rule(model=MODEL, match="Where is my order", tool_calls=read, delay_s=0.4))
    server.add_rule(Rule(model=USER, reply="Where is my order W1001?"))
    bench.eval_file("desk", ORDER.replace("max_steps: 4", "max_steps: 4\nlimits: {seconds: 1.2}"))
    bench.run("--models=fake")
    (record,) = bench.records()
    assert record["conversation_stopped"] == "seconds"
    assert record["agent_stopped"] == "seconds"
    replies = [e for e in record["conversation"] if e["generated"]]
    assert len(replies) <= 2  # never the third reply of a per-reply budget
    assert record["agent_steps"] <= 3


def test_the_token_budget_holds_over_the_whole_conversation(bench: Bench) -> None:
    _script_agent(bench)
    bench.server.add_rule(Rule(model=USER, reply="Where is my order W1001?"))
    bench.eval_file("desk", ORDER)
    bench.run("--models=fake")
    first = bench.records()[0]["conversation"][1]
    spent = first["input_tokens"] + first["output_tokens"]  # the first reply's two steps
    budget = f"max_steps: 4\nlimits: {{tokens: {spent + 1}}}"
    bench.eval_file("desk", ORDER.replace("max_steps: 4", budget))
    bench.run("--models=fake")
    (record,) = bench.records()
    # The first reply fits the budget; the second's first step spends past it.
    assert record["conversation_stopped"] == "tokens"
    assert record["agent_stopped"] == "tokens"
    replies = [e for e in record["conversation"] if e["generated"]]
    assert len(replies) == 2 and replies[1]["content"] == ""
    assert record["agent_steps"] == 3


def test_the_agent_ends_the_conversation_with_its_marker(bench: Bench) -> None:
    bench.server.add_rule(Rule(model=MODEL, reply="Your order W1001 is cancelled. [[END]]"))
    bench.server.add_rule(Rule(model=USER, reply="Cancel W1001."))
    text = ORDER.replace("max_turns: 4", "max_turns: 4\n      agent_stop: '[[END]]'")
    bench.eval_file(
        "desk", text.replace("tool-called, value: read_file", "icontains, value: W1001")
    )
    bench.run("--models=fake").assert_outcomes(passed=1)
    (record,) = bench.records()
    assert record["conversation_stopped"] == "agent_done"
    assert (
        len(bench.server.chat_messages(MODEL)) == 1 and len(bench.server.chat_messages(USER)) == 1
    )


def test_a_stop_on_fail_failure_ends_the_conversation(bench: Bench) -> None:
    _script_agent(bench)
    _script_user(bench)
    text = ORDER.replace("value: sorry}", "value: pending, stop_on_fail: true}")
    bench.eval_file("desk", text)
    result = bench.run("--models=fake")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*order on fake (repeat 0): turn 1 of 1: not-icontains*"])
    (record,) = bench.records()
    assert record["conversation_stopped"] == "failed"
    assert len(bench.server.chat_messages(USER)) == 1


def test_a_simulated_user_error_mid_conversation_keeps_what_was_said(bench: Bench) -> None:
    _script_agent(bench)
    bench.server.add_rule(Rule(model=USER, times=1, reply="Where is my order W1001?"))
    bench.server.add_rule(Rule(model=USER, status=500, error_message="persona on fire"))
    bench.eval_file("desk", ORDER)
    result = bench.run("--models=fake", "--max-retries=0")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        ["*llmbench simulated user error: simulated user fake2:*persona on fire*"]
    )
    (record,) = bench.records()
    assert record["outcome"] == "error" and record["error_kind"] == "provider"
    assert [e["content"] for e in record["conversation"]] == [
        "Where is my order W1001?",
        "Your order W1001 is pending.",
    ]
    assert record["conversation_stopped"] is None
    assert record["agent_steps"] == 2 and record["tool_counts"] == {"read_file": 1}
    assert [e["kind"] for e in record["timeline"]] == ["user", "model", "tool", "model"]
    assert record["cost_usd"] == pytest.approx(record["conversation"][1]["cost_usd"])


def test_an_agent_provider_error_keeps_its_steps_so_far(bench: Bench) -> None:
    bench.server.add_rule(Rule(model=MODEL, match_last="W1001 pending", status=500))
    _script_agent(bench)
    _script_user(bench)
    bench.eval_file("desk", ORDER)
    result = bench.run("--models=fake", "--max-retries=0")
    result.assert_outcomes(errors=1)
    (record,) = bench.records()
    assert record["error_kind"] == "provider"
    assert record["agent_stopped"] == "error" and record["agent_steps"] == 1
    assert record["tool_counts"] == {"read_file": 1}
    # The user's turn was said; no reply to it came.
    assert [(e["role"], e["content"]) for e in record["conversation"]] == [
        ("user", "Where is my order W1001?")
    ]
    assert [e["actor"] for e in record["timeline"]] == ["user", "agent", "tool"]


def _kept(record: dict[str, Any]) -> dict[str, Any]:
    """What a conversation's record says, apart from when and how fast it ran."""
    timing = {"latency_s", "ttft_s", "cached", "seconds"}
    return {
        "case_id": record["case_id"],
        "outcome": record["outcome"],
        "assertions": record["assertions"],
        "conversation": [
            {k: v for k, v in e.items() if k not in timing} for e in record["conversation"]
        ],
        # the fake server numbers its tool calls' ids across items, as a provider's are its own
        "transcript": [
            {k: v for k, v in m.items() if k not in ("tool_calls", "tool_call_id")}
            for m in record["transcript"]
        ],
        "calls": [c["function"] for m in record["transcript"] for c in m.get("tool_calls") or ()],
        "timeline": [{k: v for k, v in e.items() if k not in timing} for e in record["timeline"]],
        "stopped": (record["conversation_stopped"], record["agent_stopped"]),
        "spent": (record["input_tokens"], record["output_tokens"], record["cost_usd"]),
        "user_sim": (record["user_sim_tokens"], record["user_sim_cost_usd"]),
    }


def test_replay_makes_no_request_and_gives_the_same_record(bench: Bench) -> None:
    _script_agent(bench)
    _script_user(bench)
    bench.eval_file("desk", ORDER)
    bench.run("--models=fake", "--cache=use", "--cache-dir=c").assert_outcomes(passed=1)
    (first,) = bench.records()
    made = len(bench.server.chat_requests())
    assert made == 3 + 3  # three agent steps, three lines of the simulated user
    bench.run("--models=fake", "--cache=replay", "--cache-dir=c").assert_outcomes(passed=1)
    (again,) = bench.records()
    assert len(bench.server.chat_requests()) == made
    assert again["cached"] is True
    assert _kept(again) == _kept(first)


def test_two_workers_give_the_records_of_one(bench: Bench) -> None:
    _script_agent(bench)
    _script_user(bench)
    bench.eval_file("desk", ORDER)
    bench.eval_file("script", SCRIPTED)
    bench.run_subprocess("--models=fake", "-n", "0").assert_outcomes(passed=2)
    alone = sorted((_kept(r) for r in bench.records()), key=lambda r: r["case_id"])
    bench.run_subprocess("--models=fake", "-n", "2").assert_outcomes(passed=2)
    split = sorted((_kept(r) for r in bench.records()), key=lambda r: r["case_id"])
    assert all(r["worker"].startswith("gw") for r in bench.records())  # the workers ran them
    assert split == alone


def test_the_cost_estimate_counts_every_step_of_the_longest_conversation(bench: Bench) -> None:
    bench.eval_file(
        "desk",
        """
kind: agent
tools: [read_file]
max_steps: 2
model_params: {max_tokens: 10}
cases:
  - simulated_user: {model: fake2, instructions: Ask things., max_turns: 2}
""",
    )
    result = bench.run("--collect-only", "-q", "--estimate-cost", "--models=fake")
    row = next(line.split() for line in result.stdout.lines if line.startswith("fake "))
    # Two replies of two steps, each at most 10 tokens; a step reads every user turn and step
    # before it at the budget: 10 + 20 (reply 1), 40 + 50 (reply 2) in, 4 x 10 out.
    assert row[1:4] == ["1", "120", "40"]


def test_a_plain_agent_runs_timeline_names_its_actors(bench: Bench) -> None:
    _script_agent(bench)
    bench.eval_file(
        "desk",
        """
kind: agent
tools: [read_file]
cases:
  - {id: one, prompt: Where is my order W1001?, files: {orders.txt: W1001 pending}}
""",
    )
    bench.run("--models=fake").assert_outcomes(skipped=1)
    (record,) = bench.records()
    assert [(e["kind"], e["actor"]) for e in record["timeline"]] == [
        ("model", "agent"),
        ("tool", "tool"),
        ("model", "agent"),
    ]
    assert record["conversation"] is None and record["conversation_stopped"] is None


def test_a_models_marker_ends_a_plain_simulated_conversation_too(bench: Bench) -> None:
    bench.server.add_rule(Rule(model=MODEL, reply="Done here. [[END]]"))
    bench.server.add_rule(Rule(model=USER, reply="Hello?"))
    bench.eval_file(
        "talk",
        """
cases:
  - simulated_user: {model: fake2, instructions: Chat., max_turns: 5, agent_stop: "[[END]]"}
""",
    )
    bench.run("--models=fake").assert_outcomes(skipped=1)
    (record,) = bench.records()
    assert record["conversation_stopped"] == "agent_done"
    assert len(bench.server.chat_messages(MODEL)) == 1


def test_a_case_judge_reads_the_whole_run_once_after_the_conversation(bench: Bench) -> None:
    _script_agent(bench)
    verdict = json.dumps({"score": 0.9, "reason": "cancelled as asked"})
    bench.server.add_rule(Rule(model=USER, match_any="has the order cancelled", reply=verdict))
    _script_user(bench)
    rubric = "{type: llm-rubric, value: has the order cancelled, judges: [fake2]}"
    bench.eval_file("desk", ORDER.replace("{type: icontains, value: cancelled}", rubric))
    bench.run("--models=fake").assert_outcomes(passed=1)
    (record,) = bench.records()
    asked = [
        m for m in bench.server.chat_messages(USER) if "has the order cancelled" in json.dumps(m)
    ]
    assert len(asked) == 1  # once, on the final answer, not on every reply
    said = json.dumps(asked[0])
    # It reads the agent's tool calls of the first reply and the last reply's answer.
    assert "[called read_file" in said and "Order W1001 is cancelled." in said
    assert [(v["turn"], v["type"]) for v in record["assertions"]][-1] == (2, "llm-rubric")
    assert [j["judge"] for j in record["judges"]] == ["fake2"]
