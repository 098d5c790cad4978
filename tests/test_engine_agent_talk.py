"""What each side of an agent's conversation reads: the simulated user hears the agent's
answers alone (never its tool calls nor their results, tau-bench's rule), while a judge of a
reply's trajectory reads the agent's steps up to that reply, each tool call with its result and
error, and that reply's answer as the final one.

The agent is the ``fake`` profile (``fake-model``) scripted with tool calls; the simulated user
and the judges are ``fake2`` (``fake-model-2``). The loop, the tools, the judges and the records
are the real ones.
"""

from __future__ import annotations

import json
from typing import Any

from conftest import Bench, Rule

MODEL, USER = "fake-model", "fake-model-2"
SECRET = "SECRET-INTERNAL-NOTE"

SECRET_DESK = f"""
kind: agent
tools: [read_file]
max_steps: 3
cases:
  - id: desk
    files: {{notes.txt: "W1001: {SECRET} cancelled"}}
    simulated_user:
      model: fake2
      instructions: You are Ana. Have order W1001 cancelled.
      max_turns: 2
"""


def test_the_simulated_user_hears_the_answers_and_never_the_tool_calls(bench: Bench) -> None:
    # Each reply reads the notes (a result the user must not see), then says little.
    bench.server.add_rule(Rule(model=MODEL, match_last=SECRET, reply="Working on it."))
    bench.server.add_rule(
        Rule(model=MODEL, tool_calls=[{"name": "read_file", "arguments": {"path": "notes.txt"}}])
    )
    # A user who read the tool's result would stop there, its goal seen reached.
    bench.server.add_rule(Rule(model=USER, match_any=SECRET, reply="Great, thanks! <<DONE>>"))
    bench.server.add_rule(Rule(model=USER, match_any="read_file", reply="Thanks! <<DONE>>"))
    bench.server.add_rule(Rule(model=USER, reply="Please cancel W1001."))
    bench.eval_file("desk", SECRET_DESK)
    bench.run("--models=fake").assert_outcomes(skipped=1)
    (record,) = bench.records()
    asked = bench.server.chat_messages(USER)
    assert len(asked) == 2  # the opening and the line after the first reply
    assert SECRET not in json.dumps(asked) and "read_file" not in json.dumps(asked)
    # In its view (roles swapped) the agent's reply is the user's message: its answer alone.
    assert asked[1][-1] == {"role": "user", "content": "Working on it."}
    assert record["conversation_stopped"] == "max_turns"
    # The record and the agent keep the whole reply: its call, and the result the agent read.
    first = record["conversation"][1]
    assert [c["name"] for c in first["tool_calls"]] == ["read_file"]
    last = bench.server.chat_messages(MODEL)[-1]
    assert any(m["role"] == "tool" and SECRET in m["content"] for m in last)


RECOVER = """
kind: agent
tools: [read_file]
max_steps: 3
cases:
  - id: missing
    turns:
      - user: Where is my order W9?
        assert: [{type: llm-rubric, scope: trajectory, value: recovered, judges: [fake2]}]
      - user: And order W10?
        assert: [{type: llm-rubric, scope: trajectory, value: recovered, judges: [fake2]}]
      - user: Thanks.
"""


def _script_recovering_agent(bench: Bench) -> None:
    """Reply 1 reads a file that is not there and says so; reply 2 answers without a call."""
    bench.server.add_rule(Rule(model=MODEL, match_last="error", reply="W9 was not found, sorry."))
    bench.server.add_rule(Rule(model=MODEL, match="W10", reply="W10 is on its way."))
    bench.server.add_rule(Rule(model=MODEL, match="Thanks", reply="You're welcome."))
    bench.server.add_rule(
        Rule(model=MODEL, tool_calls=[{"name": "read_file", "arguments": {"path": "W9.txt"}}])
    )


def _trajectory(request: list[dict[str, Any]]) -> list[str]:
    """The lines of the trajectory a judge's request shows."""
    text = "\n".join(str(m["content"]) for m in request)
    shown = text.rsplit("<trajectory>", 1)[1].split("</trajectory>", 1)[0]  # the legend names it
    return [line for line in shown.strip().splitlines() if line.strip()]


def test_a_turns_trajectory_judge_reads_the_steps_up_to_that_reply(bench: Bench) -> None:
    _script_recovering_agent(bench)
    verdict = json.dumps({"score": 1.0, "reason": "told the user plainly"})
    bench.server.add_rule(Rule(model=USER, reply=verdict))
    bench.eval_file("desk", RECOVER)
    bench.run("--models=fake").assert_outcomes(passed=1)
    (record,) = bench.records()
    asked = sorted((_trajectory(r) for r in bench.server.chat_messages(USER)), key=len)
    assert len(asked) == 2  # turn 1's and turn 2's; the failed call was there to recover from
    first, second = asked
    assert first[0] == "[user] Where is my order W9?"
    assert first[1].startswith('[step 1, agent] [called read_file({"path": "W9.txt"})')
    assert first[2].startswith("[step 1, tool read_file, ERROR] error:")
    assert first[3:] == ["[final answer] W9 was not found, sorry."]
    # Turn 2's judge reads the conversation before it, turn 1's failed call among it, and
    # turn 2's reply as the final answer; never the turns after it.
    assert second[: len(first) - 1] == first[:-1]
    assert second[len(first) - 1 :] == [
        "[step 2, agent] W9 was not found, sorry.",
        "[user] And order W10?",
        "[final answer] W10 is on its way.",
    ]
    # Each verdict is the judges' (a failed call to recover from), not a pass by default.
    judged = [(v["turn"], v["passed"], v["reason"]) for v in record["assertions"]]
    assert judged == [(n, True, "rubric 1.00 (pass >= 0.5); told the user plainly") for n in (1, 2)]
