"""Conversations with a simulated user end to end: a case's ``simulated_user:`` as one item.

The model under test is the ``fake`` profile (``fake-model``), the simulated user ``fake2``
(``fake-model-2``, ten times the price): the fake server's rules tell the two apart by the
request's model and script each one's lines. The engine, the cache, scoring and the records are
the real ones.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from conftest import Bench, Rule

MODEL, USER = "fake-model", "fake-model-2"

REFUND = """
system: You are the support agent of ACME.
cases:
  - id: refund
    simulated_user:
      model: fake2
      instructions: You are Ada. Your order 1234 never arrived; get a refund.
      first_message: My order 1234 never arrived.
      max_turns: 5
      assert: [{type: icontains, value: refund}]
"""


def test_the_conversation_ends_when_the_simulated_user_says_its_stop_marker(
    bench: Bench,
) -> None:
    bench.server.add_rule(Rule(model=MODEL, reply="Sorry! Your refund is issued."))
    bench.server.add_rule(Rule(model=USER, reply="Great, thanks. <<DONE>>"))
    bench.eval_file("talk", REFUND)
    bench.run("--models=fake").assert_outcomes(passed=1)
    (record,) = bench.records()
    assert record["conversation_stopped"] == "goal"
    assert [(e["turn"], e["role"], e["content"]) for e in record["conversation"]] == [
        (1, "user", "My order 1234 never arrived."),
        (1, "assistant", "Sorry! Your refund is issued."),
    ]
    assert [v["turn"] for v in record["assertions"]] == [1]
    assert (
        len(bench.server.chat_messages(MODEL)) == 1 and len(bench.server.chat_messages(USER)) == 1
    )


def test_the_simulated_user_reads_the_conversation_with_roles_swapped(bench: Bench) -> None:
    bench.server.add_rule(Rule(model=MODEL, reply="Sorry! Your refund is issued."))
    bench.server.add_rule(Rule(model=USER, reply="<<DONE>>"))
    bench.eval_file("talk", REFUND)
    bench.run("--models=fake").assert_outcomes(passed=1)
    ((system, *talk),) = bench.server.chat_messages(USER)
    assert system["role"] == "system"
    assert "You are Ada. Your order 1234 never arrived; get a refund." in system["content"]
    assert "<<DONE>>" in system["content"]  # how it says it is done
    assert "support agent" not in system["content"]  # the model's system prompt is not its own
    # Its own line is the assistant's, the model's reply the user's it answers.
    assert talk[1:] == [
        {"role": "assistant", "content": "My order 1234 never arrived."},
        {"role": "user", "content": "Sorry! Your refund is issued."},
    ]
    assert talk[0]["role"] == "user"  # a cue to open with: it always answers a user message


def test_the_conversation_ends_after_max_turns_replies(bench: Bench) -> None:
    bench.server.add_rule(Rule(model=MODEL, reply="Here is your answer."))
    bench.server.add_rule(Rule(model=USER, reply="One more question."))
    bench.eval_file(
        "talk",
        """
cases:
  - id: curious
    simulated_user:
      model: fake2
      instructions: Ask questions.
      max_turns: 3
      assert: [{type: icontains, value: answer}]
    assert: [{type: icontains, value: your}]
""",
    )
    bench.run("--models=fake").assert_outcomes(passed=1)
    (record,) = bench.records()
    assert record["conversation_stopped"] == "max_turns"
    # The simulated user wrote every user message, the opening too.
    users = [e["content"] for e in record["conversation"] if e["role"] == "user"]
    assert users == ["One more question."] * 3
    assert (
        len(bench.server.chat_messages(MODEL)) == 3 and len(bench.server.chat_messages(USER)) == 3
    )
    # The model answers from the whole history, its own replies included.
    assert bench.server.chat_messages(MODEL)[-1] == [
        {"role": "user", "content": "One more question."},
        {"role": "assistant", "content": "Here is your answer."},
    ] * 2 + [{"role": "user", "content": "One more question."}]
    # The simulated user's assertion checks every reply; the case's the last one.
    assert [(v["turn"], v["type"]) for v in record["assertions"]] == [
        (1, "icontains"),
        (2, "icontains"),
        (3, "icontains"),
        (3, "icontains"),
    ]
    assert record["agent_stopped"] is None  # the agent loop's field keeps its own meaning


def test_a_stop_on_fail_failure_ends_the_conversation_and_fails_the_item(bench: Bench) -> None:
    bench.server.add_rule(Rule(model=MODEL, match="second", reply="No."))
    bench.server.add_rule(Rule(model=MODEL, reply="Happy to help."))
    bench.server.add_rule(Rule(model=USER, times=1, reply="A first question."))
    bench.server.add_rule(Rule(model=USER, reply="A second question."))
    bench.eval_file(
        "talk",
        """
cases:
  - id: polite
    simulated_user:
      model: fake2
      instructions: Ask two questions.
      max_turns: 5
      assert: [{type: icontains, value: help, stop_on_fail: true}]
""",
    )
    result = bench.run("--models=fake")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*polite on fake (repeat 0): turn 2 of 2: icontains*"])
    (record,) = bench.records()
    assert record["conversation_stopped"] == "failed"
    assert (
        len(bench.server.chat_messages(MODEL)) == 2 and len(bench.server.chat_messages(USER)) == 2
    )
    assert [(v["turn"], v["passed"]) for v in record["assertions"]] == [(1, True), (2, False)]


def test_the_simulated_users_tokens_and_cost_are_recorded_apart(bench: Bench) -> None:
    bench.server.add_rule(Rule(model=MODEL, reply="Here is your refund."))
    bench.server.add_rule(Rule(model=USER, reply="One more question, please."))
    bench.eval_file("talk", REFUND.replace("max_turns: 5", "max_turns: 2"))
    bench.run("--models=fake").assert_outcomes(passed=1)
    (record,) = bench.records()
    replies = [entry for entry in record["conversation"] if entry["generated"]]
    assert len(replies) == 2
    # The model's cost is its replies' alone; the simulated user's (fake2, ten times the
    # price) is its own field, never added in.
    assert record["cost_usd"] == pytest.approx(sum(e["cost_usd"] for e in replies))
    assert record["user_sim_tokens"] > 0
    assert record["user_sim_cost_usd"] > 0
    user_request = bench.server.chat_messages(USER)
    assert len(user_request) == 1  # the opening was given; the user wrote turn 2
    assert record["judge_cost_usd"] is None  # nor is it a judge's


def test_replay_gives_the_same_transcript_with_no_request(bench: Bench) -> None:
    bench.server.add_rule(Rule(model=MODEL, reply="Here is your answer."))
    bench.server.add_rule(Rule(model=USER, times=2, reply="One more question."))
    bench.server.add_rule(Rule(model=USER, reply="Thanks! <<DONE>>"))
    bench.eval_file("talk", REFUND.replace("assert: [{type: icontains, value: refund}]", ""))
    bench.run("--models=fake", "--cache=use", "--cache-dir=c").assert_outcomes(skipped=1)
    (first,) = bench.records()
    made = len(bench.server.chat_requests())
    assert made == 3 + 3  # three replies of the model, three lines of the simulated user
    bench.run("--models=fake", "--cache=replay", "--cache-dir=c").assert_outcomes(skipped=1)
    (again,) = bench.records()
    assert len(bench.server.chat_requests()) == made
    assert [e["content"] for e in again["conversation"]] == [
        e["content"] for e in first["conversation"]
    ]
    assert again["conversation_stopped"] == first["conversation_stopped"] == "goal"


def test_a_simulated_user_that_errors_is_the_items_error_keeping_the_turns(
    bench: Bench,
) -> None:
    bench.server.add_rule(Rule(model=MODEL, reply="Sorry! Your refund is issued."))
    bench.server.add_rule(Rule(model=USER, status=500, error_message="persona on fire"))
    bench.eval_file("talk", REFUND)
    result = bench.run("--models=fake", "--max-retries=0")
    result.assert_outcomes(errors=1)
    # The part that failed is named (the simulated user), the cause is the record's kind.
    result.stdout.fnmatch_lines(
        ["*llmbench simulated user error: simulated user fake2:*persona on fire*"]
    )
    (record,) = bench.records()
    assert record["outcome"] == "error" and record["error_kind"] == "provider"
    assert [e["content"] for e in record["conversation"]] == [
        "My order 1234 never arrived.",
        "Sorry! Your refund is issued.",
    ]
    assert record["cost_usd"] == pytest.approx(record["conversation"][1]["cost_usd"])
    assert record["conversation_stopped"] is None


def test_an_empty_message_twice_is_the_items_error_and_never_sent(bench: Bench) -> None:
    bench.server.add_rule(Rule(model=MODEL, reply="Sorry! Your refund is issued."))
    bench.server.add_rule(Rule(model=USER, reply="  \n "))
    bench.eval_file("talk", REFUND)
    result = bench.run("--models=fake")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        ["*llmbench simulated user error: simulated user fake2: wrote an empty message (turn 2)*"]
    )
    (record,) = bench.records()
    assert record["outcome"] == "error" and record["error_kind"] == "malformed"
    assert [e["content"] for e in record["conversation"]] == [
        "My order 1234 never arrived.",
        "Sorry! Your refund is issued.",
    ]
    assert len(bench.server.chat_messages(MODEL)) == 1  # the empty message never reached the model
    first, again = bench.server.chat_messages(USER)  # asked once more, with the problem named
    assert again[: len(first)] == first
    assert again[len(first)] == {"role": "assistant", "content": "(an empty message)"}
    assert again[-1]["role"] == "user" and "was empty" in again[-1]["content"]
    assert "<<DONE>>" in again[-1]["content"]
    assert record["user_sim_tokens"] > 0  # both calls are counted


def _run_with_an_opening(bench: Bench, opening: str) -> dict[str, Any]:
    """The refund case without a first_message: the simulated user opens with ``opening``,
    then says ``Thanks. <<DONE>>``; the record of the one item, which passed."""
    bench.server.add_rule(Rule(model=MODEL, reply="Here is your refund."))
    bench.server.add_rule(Rule(model=USER, times=1, reply=opening))
    bench.server.add_rule(Rule(model=USER, reply="Thanks. <<DONE>>"))
    bench.eval_file(
        "talk", REFUND.replace("      first_message: My order 1234 never arrived.\n", "")
    )
    bench.run("--models=fake").assert_outcomes(passed=1)
    (record,) = bench.records()
    assert record["conversation_stopped"] == "goal"
    return record


def test_an_empty_message_then_a_line_goes_on_with_the_line(bench: Bench) -> None:
    record = _run_with_an_opening(bench, "")
    assert [e["content"] for e in record["conversation"]] == [
        "Thanks.",  # the opening's marker is dropped, as any opening's
        "Here is your refund.",
    ]
    empty, again, done = bench.server.chat_messages(USER)  # the opening twice, then turn 2's marker
    assert again[len(empty)] == {"role": "assistant", "content": "(an empty message)"}
    assert done[-2:] == [
        {"role": "assistant", "content": "Thanks."},  # the retry is not in the history
        {"role": "user", "content": "Here is your refund."},
    ]


def test_an_opening_of_the_stop_marker_alone_is_an_empty_message(bench: Bench) -> None:
    bench.server.add_rule(Rule(model=USER, reply="<<DONE>>"))
    bench.eval_file(
        "talk", REFUND.replace("      first_message: My order 1234 never arrived.\n", "")
    )
    result = bench.run("--models=fake")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*simulated user fake2: wrote an empty message (turn 1)*"])
    (record,) = bench.records()
    assert record["conversation"] == []
    assert bench.server.chat_messages(MODEL) == []
    assert len(bench.server.chat_messages(USER)) == 2


@pytest.mark.parametrize(
    ("user", "line", "message"),
    [
        ("model: fake2\n      max_turns: 2", 3, "simulated_user.instructions: Field required"),
        ("instructions: hi\n      max_turns: 0", 5, "greater than or equal to 1"),
        ("instructons: hi", 4, "unknown key 'instructons' (did you mean 'instructions'?)"),
        (
            "instructions: hi\n      assert:\n        - {type: llm-rubric, value: kind}",
            6,
            "`llm-rubric` is judged",
        ),
        ("instructions: 'I am {{who}}'", 4, "simulated_user.instructions: unknown template"),
        (
            "instructions: hi\n      first_message: '  '",
            5,
            "simulated_user.first_message renders empty",
        ),
        (
            "instructions: hi\n      assert: [{type: contains, value: a, stop_on_fail: 1}]",
            5,
            "stop_on_fail",
        ),
    ],
)
def test_bad_simulated_users_are_collection_errors_naming_the_line(
    bench: Bench, user: str, line: int, message: str
) -> None:
    bench.eval_file("bad", f"cases:\n  - id: x\n    simulated_user:\n      {user}\n")
    result = bench.run("--models=fake")
    assert result.ret != 0
    output = result.stdout.str()
    assert f"bad.eval.yaml:{line}: " in output and message in output, output
    assert "Traceback" not in output
    assert bench.server.chat_requests() == []


@pytest.mark.parametrize("key", ["prompt: hi", "turns: [{user: hi}]", "messages: []"])
def test_a_simulated_user_beside_a_prompt_or_turns_is_a_collection_error(
    bench: Bench, key: str
) -> None:
    name = key.split(":")[0]
    text = f"cases:\n  - id: x\n    {key}\n    simulated_user: {{instructions: hi}}\n"
    bench.eval_file("bad", text)
    result = bench.run("--models=fake")
    assert result.ret != 0
    output = result.stdout.str()
    assert f"bad.eval.yaml:3: case 'x': give either `simulated_user` or `{name}`" in output
    assert "Traceback" not in output


def test_the_simulated_user_defaults_to_the_first_judge(bench: Bench) -> None:
    bench.server.add_rule(Rule(model=MODEL, reply="Sorry! Your refund is issued."))
    bench.server.add_rule(Rule(model=USER, reply="<<DONE>>"))
    bench.eval_file("talk", REFUND.replace("      model: fake2\n", ""))
    bench.run("--models=fake", "--judges=fake2,fake").assert_outcomes(passed=1)
    assert len(bench.server.chat_messages(USER)) == 1  # fake2 played the user
    assert len(bench.server.chat_messages(MODEL)) == 1  # fake answered, once


def test_max_cost_cutting_a_simulated_conversation_keeps_its_turns(bench: Bench) -> None:
    bench.pricey_profile()  # 1 USD a token: the first reply spends the whole budget
    bench.server.add_rule(Rule(model=MODEL, reply="Sorry! Your refund is issued."))
    bench.server.add_rule(Rule(model=USER, reply="And when?"))
    bench.eval_file("talk", REFUND)
    result = bench.run("--models=pricey", "--max-cost=0.5")
    result.assert_outcomes(skipped=1)
    (record,) = bench.records()
    assert record["error_kind"] == "budget"
    assert [(e["role"], e["content"]) for e in record["conversation"]] == [
        ("user", "My order 1234 never arrived."),
        ("assistant", "Sorry! Your refund is issued."),
    ]


def test_records_are_the_same_with_and_without_xdist(bench: Bench) -> None:
    bench.server.add_rule(Rule(model=MODEL, reply="Here is your refund."))
    bench.server.add_rule(Rule(model=USER, match_any="Ada", reply="Where is it?"))
    bench.eval_file("talk", REFUND.replace("max_turns: 5", "max_turns: 2"))
    bench.eval_file("talk2", REFUND.replace("id: refund", "id: other"))

    def records() -> list[dict[str, Any]]:
        timing = {"latency_s", "ttft_s", "tokens_per_s", "started_at", "worker", "nodeid"}
        rows = []
        for record in sorted(bench.records(), key=lambda r: r["case_id"]):
            row = {key: value for key, value in record.items() if key not in timing}
            row["conversation"] = [
                {key: value for key, value in entry.items() if key not in timing}
                for entry in record["conversation"]
            ]
            rows.append(row)
        return rows

    bench.run_subprocess("--models=fake", "-n", "0").assert_outcomes(passed=2)
    alone = records()
    bench.run_subprocess("--models=fake", "-n", "2").assert_outcomes(passed=2)
    assert records() == alone
    assert [r["conversation_stopped"] for r in alone] == ["max_turns", "max_turns"]


def test_a_stop_marker_in_the_simulated_users_opening_does_not_end_it(bench: Bench) -> None:
    record = _run_with_an_opening(bench, "Hi, I want a refund. <<DONE>>")
    assert [e["content"] for e in record["conversation"]] == [
        "Hi, I want a refund.",
        "Here is your refund.",
    ]


def test_pytest_timeout_ending_a_simulated_conversation_keeps_its_turns(bench: Bench) -> None:
    bench.server.add_rule(Rule(model=MODEL, reply="Sorry! Your refund is issued."))
    bench.server.add_rule(Rule(model=USER, reply="late", delay_s=5.0))
    bench.eval_file("talk", REFUND)
    result = bench.run_subprocess("--models=fake", "--max-retries=0", "--timeout=2")
    result.assert_outcomes(errors=1)
    (record,) = bench.records()
    assert record["error_kind"] == "timeout"
    assert [e["content"] for e in record["conversation"]] == [
        "My order 1234 never arrived.",
        "Sorry! Your refund is issued.",
    ]


def test_a_judge_on_the_case_judges_the_last_reply_with_the_whole_conversation(
    bench: Bench,
) -> None:
    bench.server.add_rule(Rule(model=MODEL, reply="Sorry! Your refund is issued."))
    bench.server.add_rule(Rule(model=USER, match_any="You play the user", reply="Why? <<DONE>>"))
    bench.server.add_rule(Rule(model=USER, reply='{"score": 1.0, "reason": "it refunds"}'))
    rubric = "    assert: [{type: llm-rubric, value: refunds the order, judges: [fake2]}]\n"
    own = "      assert: [{type: icontains, value: refund}]\n"
    bench.eval_file("talk", REFUND.replace(own, "") + rubric)
    bench.run("--models=fake").assert_outcomes(passed=1)
    judged = [
        m for m in bench.server.chat_messages(USER) if "You play the user" not in json.dumps(m)
    ]
    assert len(judged) == 1
    text = json.dumps(judged[0])
    assert "My order 1234 never arrived." in text and "Your refund is issued." in text
    (record,) = bench.records()
    assert record["judges"][0]["judge"] == "fake2"
    assert [v["turn"] for v in record["assertions"]] == [1]
    # The judge's cost is the judge's, the simulated user's its own.
    assert record["judge_cost_usd"] > 0 and record["user_sim_cost_usd"] > 0


def test_the_cost_estimate_counts_the_longest_conversation(bench: Bench) -> None:
    bench.eval_file(
        "talk",
        """
model_params: {max_tokens: 10}
cases:
  - simulated_user: {model: fake2, instructions: Ask things., max_turns: 3}
""",
    )
    result = bench.run("--collect-only", "-q", "--estimate-cost", "--models=fake")
    row = next(line.split() for line in result.stdout.lines if line.startswith("fake "))
    # Three calls of at most 10 tokens; call k reads k replies and k + 1 user messages, each
    # unwritten message at the budget: 10 + 30 + 50 in.
    assert row[1:4] == ["1", "90", "30"]


RUBRIC_TALK = """
cases:
  - id: curious
    simulated_user:
      model: fake2
      instructions: Ask questions.
      max_turns: 3
      assert: [{type: icontains, value: answer}]
    assert: [{type: llm-rubric, value: is helpful, judges: [fake2]}]
"""


def test_a_case_level_judge_is_named_at_its_verdicts_position(bench: Bench) -> None:
    # record["assertions"] holds a turn check per reply, then the case's rubric: the rubric's
    # judge belongs to the rubric's position, not to the case's index of it
    from pytest_llmbench.results.reviews import judges_of, machine_verdict

    bench.server.add_rule(Rule(model=MODEL, reply="Here is your answer."))
    rubric = json.dumps({"score": 0.9, "reason": "ok"})
    bench.server.add_rule(Rule(model=USER, match_any="is helpful", reply=rubric))
    bench.server.add_rule(Rule(model=USER, reply="One more question."))
    bench.eval_file("talk", RUBRIC_TALK)
    bench.run("--models=fake", "--judge-gate=min_labels=1").assert_outcomes(passed=1)
    (record,) = bench.records()
    types = [entry["type"] for entry in record["assertions"]]
    assert types == ["icontains"] * 3 + ["llm-rubric"]
    assert [judges_of(record, i) for i in range(4)] == [(), (), (), ("fake2",)]
    assert machine_verdict(record, 3).criterion == "is helpful"
    assert [entry.get("judge_gate") for entry in record["assertions"]] == [None] * 3 + [
        "too_few_labels"
    ]
