"""``communicated`` end to end: what the model told the user over a whole item, on the fake
server (an agent and its simulated user scripted; a scripted conversation; a single call).

The agent is the ``fake`` profile (``fake-model``), the simulated user ``fake2``
(``fake-model-2``), scripted by what it reads last (the agent's answer).
"""

from __future__ import annotations

from conftest import Bench, Rule

MODEL, USER = "fake-model", "fake-model-2"

DESK = """
kind: agent
tools: [read_file]
max_steps: 4
system: You are the order desk.
cases:
  - id: order
    files: {{orders.txt: "W1001 pending since March"}}
    simulated_user:
      model: fake2
      instructions: You are Ana. Ask about order W1001, then have it cancelled.
      max_turns: 4
    assert:
      - {{type: communicated, value: {told}}}
"""


def _script(bench: Bench) -> None:
    """Reply 1 reads orders.txt (the tool result says "since March") and says the order is
    pending; reply 2 cancels it and says nothing of pending; the user then stops."""
    server = bench.server
    server.add_rule(Rule(model=MODEL, match="cancel it", reply="Done: W1001 is cancelled."))
    server.add_rule(
        Rule(model=MODEL, match_last="W1001 pending", reply="Your order W1001 is PENDING.")
    )
    server.add_rule(
        Rule(
            model=MODEL,
            match="Where is my order",
            tool_calls=[{"name": "read_file", "arguments": {"path": "orders.txt"}}],
        )
    )
    server.add_rule(Rule(model=USER, match="cancelled", reply="Thanks! <<DONE>>"))
    server.add_rule(Rule(model=USER, match="PENDING", reply="Please cancel it."))
    server.add_rule(Rule(model=USER, reply="Where is my order W1001?"))


def test_a_string_told_in_an_early_reply_and_not_the_last_passes(bench: Bench) -> None:
    _script(bench)
    bench.eval_file("desk", DESK.format(told='["order w1001 is pending", "cancelled"]'))
    bench.run("--models=fake").assert_outcomes(passed=1)
    (record,) = bench.records()
    assert record["response"] == "Done: W1001 is cancelled."  # the last reply lacks "pending"
    (verdict,) = record["assertions"]
    assert verdict["passed"] and verdict["turn"] == 2
    assert verdict["reason"] == "all 2 strings told to the user in 2 replies"


def test_a_string_never_told_fails_naming_it(bench: Bench) -> None:
    _script(bench)
    # "since March" is only in a tool result: the agent read it, never said it
    bench.eval_file("desk", DESK.format(told='["W1001", "since March", "refund"]'))
    result = bench.run("--models=fake")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["*turn 2 of 2: communicated: not told to the user in 2 replies: 'since March', 'refund'*"]
    )
    (record,) = bench.records()
    assert record["conversation_stopped"] == "goal" and record["tool_call_count"] == 1


def test_a_stop_on_fail_check_reads_every_reply_so_far(bench: Bench) -> None:
    """Told in reply 1, not repeated in reply 2: the user's check holds on both replies, so
    the conversation is not stopped but ends on the user's goal."""
    _script(bench)
    text = DESK.format(told="cancelled").replace(
        "      max_turns: 4\n",
        "      max_turns: 4\n"
        "      assert: [{type: communicated, value: pending, stop_on_fail: true}]\n",
    )
    bench.eval_file("desk", text)
    bench.run("--models=fake").assert_outcomes(passed=1)
    (record,) = bench.records()
    assert record["conversation_stopped"] == "goal"
    got = [(v["turn"], v["type"], v["passed"]) for v in record["assertions"]]
    assert got == [(1, "communicated", True), (2, "communicated", True), (2, "communicated", True)]


TURNS = """
cases:
  - id: capitals
    turns:
      - user: Capital of France?
        assert: [{type: communicated, value: Paris}, {type: not-communicated, value: Rome}]
      - user: And of Italy?
        assert: [{type: communicated, value: [Paris, Rome]}]
    assert: [{type: communicated, value: Oslo}]
"""


def test_a_turn_reads_the_replies_up_to_it_and_the_case_reads_them_all(bench: Bench) -> None:
    bench.server.add_rule(Rule(match_last="Italy", reply="Rome."))
    bench.server.add_rule(Rule(match_last="France", reply="Paris, of course."))
    bench.eval_file("capitals", TURNS)
    bench.run("--models=fake").assert_outcomes(failed=1)
    (record,) = bench.records()
    got = [(v["turn"], v["type"], v["passed"], v["reason"]) for v in record["assertions"]]
    assert got == [
        (1, "communicated", True, "the string told to the user in 1 reply"),
        (1, "not-communicated", True, "negated: not told to the user in 1 reply: 'Rome'"),
        (2, "communicated", True, "all 2 strings told to the user in 2 replies"),
        (2, "communicated", False, "not told to the user in 2 replies: 'Oslo'"),
    ]


def test_a_single_call_is_checked_on_its_answer(bench: Bench) -> None:
    bench.server.add_rule(Rule(reply="The refund of 1,200 USD is on its way."))
    bench.eval_file(
        "refund",
        """
cases:
  - id: refund
    prompt: Where is my refund?
    assert: [{type: communicated, value: ["refund of 1200 usd"]}]
""",
    )
    bench.run("--models=fake").assert_outcomes(passed=1)
    (record,) = bench.records()
    assert record["assertions"][0]["reason"] == "the string told to the user in the answer"
