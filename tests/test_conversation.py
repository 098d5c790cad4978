"""Scripted conversations end to end: a case's ``turns:`` run as one item with many calls.

The fake server scripts each turn's reply and records what the model was sent; the engine, the
cache, the budget, scoring and the records are the real ones. Loading and the bad input of
``turns:`` at load time are in test_spec_turns.py; here they are seen as collection errors.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from conftest import FAKE_KEY, FAKE_KEY_ENV, Bench, Rule

THREE_TURNS = """
system: You are the support bot of ACME.
cases:
  - id: support
    vars: {name: Ada}
    turns:
      - user: Hello, I am {{name}}.
        assert: [{type: icontains, value: hello}]
      - user: What is your name?
        weight: 2
        assert: [{type: regex, value: "Alice"}]
      - user: Goodbye.
        assert: [{type: icontains, value: bye}]
"""


def _script_three(bench: Bench) -> None:
    bench.server.add_rule(Rule(match="I am Ada", reply="Hello Ada, I am Bot."))
    bench.server.add_rule(Rule(match="your name", reply="My name is Bot."))
    bench.server.add_rule(Rule(match="Goodbye", reply="Bye now!"))


def _sent(bench: Bench) -> list[list[dict[str, Any]]]:
    return [request.body["messages"] for request in bench.server.chat_requests()]


def _without_timing(record: dict[str, Any]) -> dict[str, Any]:
    """A record without what differs between two runs of the same answers."""
    timing = {"latency_s", "ttft_s", "tokens_per_s", "started_at", "worker", "nodeid"}
    kept = {key: value for key, value in record.items() if key not in timing}
    kept["conversation"] = [
        {key: value for key, value in entry.items() if key not in timing}
        for entry in record["conversation"]
    ]
    return kept


def test_a_failing_turn_fails_the_item_naming_the_turn_and_its_transcript(bench: Bench) -> None:
    _script_three(bench)
    bench.eval_file("talk", THREE_TURNS)
    result = bench.run("--models=fake")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*support on fake (repeat 0): turn 2 of 3: regex*",
            "*transcript:*",
            "*[[]1] user: Hello, I am Ada.*",
            "*[[]1] assistant: Hello Ada, I am Bot.*",
            "*[[]2] user: What is your name?*",
            "*[[]2] assistant: My name is Bot.*",
        ]
    )
    result.stdout.fnmatch_lines(["*[[]FAIL] turn 2: regex (weight 2): no match for 'Alice'*"])
    assert "[3] user: Goodbye." not in result.stdout.str()  # the transcript ends at turn 2
    (record,) = bench.records()
    assert record["outcome"] == "failed" and record["response"] == "Bye now!"
    # The weighted mean over every turn's assertions: (1 + 0 * 2 + 1) / 4.
    assert record["score"] == pytest.approx(0.5)
    assert [(v["turn"], v["passed"], v["weight"]) for v in record["assertions"]] == [
        (1, True, 1.0),
        (2, False, 2.0),
        (3, True, 1.0),
    ]


def test_each_turn_is_answered_from_the_whole_history_with_the_models_own_replies(
    bench: Bench,
) -> None:
    _script_three(bench)
    bench.eval_file("talk", THREE_TURNS)
    bench.run("--models=fake").assert_outcomes(failed=1)
    first, second, third = _sent(bench)
    assert [m["role"] for m in first] == ["system", "user"]
    assert second == [
        {"role": "system", "content": "You are the support bot of ACME."},
        {"role": "user", "content": "Hello, I am Ada."},
        {"role": "assistant", "content": "Hello Ada, I am Bot."},
        {"role": "user", "content": "What is your name?"},
    ]
    assert third[-3:] == [
        {"role": "user", "content": "What is your name?"},
        {"role": "assistant", "content": "My name is Bot."},
        {"role": "user", "content": "Goodbye."},
    ]


def test_the_record_holds_the_conversation_with_each_replys_measures(bench: Bench) -> None:
    _script_three(bench)
    bench.eval_file("talk", THREE_TURNS.replace('value: "Alice"', 'value: "Bot"'))
    bench.run("--models=fake").assert_outcomes(passed=1)
    (record,) = bench.records()
    talk = record["conversation"]
    assert [(e["turn"], e["role"], e["generated"]) for e in talk] == [
        (1, "user", False),
        (1, "assistant", True),
        (2, "user", False),
        (2, "assistant", True),
        (3, "user", False),
        (3, "assistant", True),
    ]
    replies = [entry for entry in talk if entry["generated"]]
    assert [e["content"] for e in replies] == [
        "Hello Ada, I am Bot.",
        "My name is Bot.",
        "Bye now!",
    ]
    assert [[v["type"] for v in e["assertions"]] for e in replies] == [
        ["icontains"],
        ["regex"],
        ["icontains"],
    ]
    assert all(e["input_tokens"] and e["output_tokens"] for e in replies)
    assert record["latency_s"] == pytest.approx(sum(e["latency_s"] for e in replies))
    assert record["ttft_s"] == replies[0]["ttft_s"]
    assert record["input_tokens"] == sum(e["input_tokens"] for e in replies)
    assert record["output_tokens"] == sum(e["output_tokens"] for e in replies)
    assert record["cost_usd"] == pytest.approx(sum(e["cost_usd"] for e in replies))
    assert record["messages"] == _sent(bench)[-1]  # the last call's
    assert record["prompt"] == "Goodbye." and record["response"] == "Bye now!"
    assert record["agent_steps"] is None  # an agent's count, not a conversation's


def test_a_tokens_check_on_a_turn_reads_that_turns_call(bench: Bench) -> None:
    """Turn 1's input is short, turn 2's holds the whole history: a bound between them passes
    on turn 1 and fails on turn 2."""
    bench.server.add_rule(Rule(match="one", reply="word " * 30))
    bench.server.add_rule(Rule(match="two", reply="ok"))
    bench.eval_file(
        "talk",
        """
cases:
  - id: sizes
    turns:
      - user: one
        assert: [{type: tokens, max: 20, which: input}]
      - user: two
        assert: [{type: tokens, max: 20, which: input}]
""",
    )
    bench.run("--models=fake").assert_outcomes(failed=1)
    (record,) = bench.records()
    assert [(v["turn"], v["passed"]) for v in record["assertions"]] == [(1, True), (2, False)]
    replies = [e for e in record["conversation"] if e["generated"]]
    assert replies[0]["input_tokens"] <= 20 < replies[1]["input_tokens"]


def test_a_verbatim_assistant_turn_makes_no_call(bench: Bench) -> None:
    bench.server.add_rule(Rule(match="refund", reply="Refund issued."))
    bench.eval_file(
        "talk",
        """
cases:
  - id: given
    turns:
      - user: My order never came.
      - assistant: Sorry! Shall I refund it?
      - user: Yes, refund it.
        assert: [{type: icontains, value: issued}]
""",
    )
    bench.run("--models=fake").assert_outcomes(passed=1)
    (sent,) = _sent(bench)
    assert sent == [
        {"role": "user", "content": "My order never came."},
        {"role": "assistant", "content": "Sorry! Shall I refund it?"},
        {"role": "user", "content": "Yes, refund it."},
    ]
    (record,) = bench.records()
    assert [(e["role"], e["generated"]) for e in record["conversation"]] == [
        ("user", False),
        ("assistant", False),
        ("user", False),
        ("assistant", True),
    ]


def test_replay_reproduces_the_transcript_with_no_request(bench: Bench) -> None:
    _script_three(bench)
    bench.eval_file("talk", THREE_TURNS)
    bench.run("--models=fake", "--cache=use", "--cache-dir=c").assert_outcomes(failed=1)
    first = bench.records()[0]
    assert len(bench.server.chat_requests()) == 3
    bench.server.reset()  # no rule: an answer now would be the server's "ok"
    replayed = bench.run("--models=fake", "--cache=replay", "--cache-dir=c")
    replayed.assert_outcomes(failed=1)
    assert bench.server.chat_requests() == []
    (again,) = bench.records()
    assert again["cached"] is True
    assert all(entry["cached"] for entry in again["conversation"] if entry["generated"])
    assert [e["content"] for e in again["conversation"]] == [
        e["content"] for e in first["conversation"]
    ]
    assert again["assertions"] == first["assertions"]


def test_records_are_the_same_with_and_without_xdist(bench: Bench) -> None:
    _script_three(bench)
    bench.eval_file("talk", THREE_TURNS)
    bench.eval_file("talk2", THREE_TURNS.replace("id: support", "id: other"))
    bench.run_subprocess("--models=fake", "-n", "0").assert_outcomes(failed=2)
    alone = sorted((_without_timing(r) for r in bench.records()), key=lambda r: r["case_id"])
    bench.run_subprocess("--models=fake", "-n", "2").assert_outcomes(failed=2)
    shared = sorted((_without_timing(r) for r in bench.records()), key=lambda r: r["case_id"])
    assert shared == alone
    assert len(bench.server.chat_requests()) == 12  # 2 items x 3 turns, twice


def test_conversations_of_different_items_run_concurrently(bench: Bench) -> None:
    """Each item's conversation is one coroutine on the engine loop: with --concurrency 4,
    the four items' turns are in the server at once, each item's turns one after another."""
    from fakeserver import peak_in_flight

    bench.server.add_rule(Rule(match="first", reply="One.", delay_s=0.3))
    bench.server.add_rule(Rule(match="second", reply="Two.", delay_s=0.3))
    cases = "".join(
        f"  - {{id: c{i}, turns: [{{user: first {i}}}, {{user: second {i}}}], expected: Two}}\n"
        for i in range(4)
    )
    bench.eval_file("talk", f"cases:\n{cases}")
    bench.run("--models=fake", "--concurrency", "4").assert_outcomes(passed=4)
    requests = bench.server.chat_requests()
    assert len(requests) == 8
    assert peak_in_flight(requests) == 4
    for i in range(4):  # an item's second turn leaves after its first was answered
        first, second = (r for r in requests if f" {i}" in json.dumps(r.body["messages"][-1]))
        assert first.answered is not None and first.answered < second.arrived


def test_latency_only_measures_every_turn_and_scores_none(bench: Bench) -> None:
    _script_three(bench)
    bench.eval_file("talk", THREE_TURNS)
    bench.run("--models=fake", "--latency-only").assert_outcomes(passed=1)
    assert len(bench.server.chat_requests()) == 3
    (record,) = bench.records()
    assert record["score"] is None and record["assertions"] == []
    replies = [entry for entry in record["conversation"] if entry["generated"]]
    assert len(replies) == 3 and all(entry["assertions"] == [] for entry in replies)


def test_an_optimized_variant_opens_the_conversation_with_the_rewrite(bench: Bench) -> None:
    rewrite = '{"system": null, "prompt": "Greetings! My name is {{name}}."}'
    bench.server.add_rule(Rule(model="fake-model-2", reply=rewrite))
    bench.server.add_rule(Rule(match="Greetings", reply="Hello Ada."))
    bench.server.add_rule(Rule(match="your name", reply="I am Bot."))
    bench.eval_file(
        "talk",
        """
cases:
  - id: opt
    vars: {name: Ada}
    turns:
      - user: Hi, I am {{name}}.
      - user: What is your name?
        assert: [{type: icontains, value: bot}]
""",
    )
    result = bench.run("--models=fake", "--optimize-prompts=only", "--optimizer=fake2")
    result.assert_outcomes(passed=1)
    calls = [
        r.body["messages"] for r in bench.server.chat_requests() if r.body["model"] == "fake-model"
    ]
    assert calls[1][:2] == [
        {"role": "user", "content": "Greetings! My name is Ada."},
        {"role": "assistant", "content": "Hello Ada."},
    ]
    (record,) = bench.records()
    assert record["optimization"]["status"] == "rewritten"
    assert [e["content"] for e in record["conversation"]] == [
        "Greetings! My name is Ada.",
        "Hello Ada.",
        "What is your name?",
        "I am Bot.",
    ]


def test_a_provider_error_on_turn_two_is_an_error_keeping_turn_one(bench: Bench) -> None:
    bench.server.add_rule(Rule(match="I am Ada", reply="Hello Ada, I am Bot."))
    bench.server.add_rule(Rule(match="your name", status=500, error_message="server on fire"))
    bench.eval_file("talk", THREE_TURNS)
    result = bench.run("--models=fake", "--max-retries=0")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*llmbench provider error:*"])
    (record,) = bench.records()
    assert record["outcome"] == "error" and record["error_kind"] == "provider"
    assert record["score"] is None and record["response"] is None
    assert [(e["turn"], e["role"], e["content"]) for e in record["conversation"]] == [
        (1, "user", "Hello, I am Ada."),
        (1, "assistant", "Hello Ada, I am Bot."),
        (2, "user", "What is your name?"),
    ]
    first_reply = record["conversation"][1]
    assert record["input_tokens"] == first_reply["input_tokens"]
    assert record["cost_usd"] == pytest.approx(first_reply["cost_usd"])


def test_a_request_timeout_on_turn_two_is_a_timeout_error_keeping_turn_one(bench: Bench) -> None:
    bench.server.add_rule(Rule(match="I am Ada", reply="Hello Ada, I am Bot."))
    bench.server.add_rule(Rule(match="your name", reply="late", delay_s=3.0))
    bench.eval_file("talk", THREE_TURNS)
    result = bench.run("--models=fake", "--max-retries=0", "--request-timeout=1")
    result.assert_outcomes(errors=1)
    (record,) = bench.records()
    assert record["error_kind"] == "timeout"
    assert [e["content"] for e in record["conversation"]] == [
        "Hello, I am Ada.",
        "Hello Ada, I am Bot.",
        "What is your name?",
    ]


def test_pytest_timeout_ending_a_conversation_keeps_its_turns(bench: Bench) -> None:
    bench.server.add_rule(Rule(match="I am Ada", reply="Hello Ada, I am Bot."))
    bench.server.add_rule(Rule(match="your name", reply="late", delay_s=5.0))
    bench.eval_file("talk", THREE_TURNS)
    result = bench.run_subprocess("--models=fake", "--max-retries=0", "--timeout=2")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*pytest-timeout: the item ran past --timeout 2 s*"])
    (record,) = bench.records()
    assert record["error_kind"] == "timeout"
    assert [e["content"] for e in record["conversation"]] == [
        "Hello, I am Ada.",
        "Hello Ada, I am Bot.",
        "What is your name?",
    ]
    assert record["input_tokens"] == record["conversation"][1]["input_tokens"]


def test_max_cost_cutting_a_conversation_keeps_its_turns(bench: Bench) -> None:
    bench.pricey_profile()  # 1 USD a token: the first reply spends the whole budget
    _script_three(bench)
    bench.eval_file("talk", THREE_TURNS)
    result = bench.run("--models=pricey", "--max-cost=0.5")
    result.assert_outcomes(skipped=1)
    assert len(bench.server.chat_requests()) == 1
    (record,) = bench.records()
    assert record["error_kind"] == "budget"
    assert [(e["role"], e["content"]) for e in record["conversation"]] == [
        ("user", "Hello, I am Ada."),
        ("assistant", "Hello Ada, I am Bot."),
        ("user", "What is your name?"),
    ]
    assert record["cost_usd"] == pytest.approx(record["conversation"][1]["cost_usd"])


def test_a_judge_on_a_turn_judges_that_turns_reply(bench: Bench) -> None:
    bench.server.add_rule(
        Rule(model="fake-model-2", reply='{"score": 1.0, "reason": "it says its name"}')
    )
    _script_three(bench)
    bench.eval_file(
        "talk",
        """
cases:
  - id: judged
    turns:
      - user: Hello, I am Ada.
      - user: What is your name?
        assert: [{type: llm-rubric, value: says its name, judges: [fake2]}]
      - user: Goodbye.
""",
    )
    bench.run("--models=fake").assert_outcomes(passed=1)
    judged = [r.body for r in bench.server.chat_requests() if r.body["model"] == "fake-model-2"]
    assert len(judged) == 1
    text = json.dumps(judged[0]["messages"])
    assert "My name is Bot." in text and "Bye now!" not in text
    (record,) = bench.records()
    assert record["judges"][0]["assertion"] == 0
    assert record["assertions"][0]["turn"] == 2


def test_vars_and_a_jsonl_dataset_with_turns(bench: Bench) -> None:
    _script_three(bench)
    rows = [
        {"id": "r1", "turns": [{"user": "Hello, I am Ada."}, {"user": "What is your name?"}]},
        {
            "id": "r2",
            "turns": [{"user": "Goodbye."}],
            "assert": [{"type": "icontains", "value": "bye"}],
        },
    ]
    bench.pytester.makefile(".jsonl", rows="\n".join(json.dumps(row) for row in rows))
    bench.eval_file(
        "data",
        """
system: "Case {{id}}."
dataset: {path: rows.jsonl}
assert: [{type: not-icontains, value: error}]
""",
    )
    bench.run("--models=fake").assert_outcomes(passed=2)
    records = {record["case_id"]: record for record in bench.records()}
    assert [e["content"] for e in records["r1"]["conversation"]] == [
        "Hello, I am Ada.",
        "Hello Ada, I am Bot.",
        "What is your name?",
        "My name is Bot.",
    ]
    # The file-level assertion checks the last turn's reply; the row's too.
    assert [v["turn"] for v in records["r1"]["assertions"]] == [2]
    assert [v["turn"] for v in records["r2"]["assertions"]] == [1, 1]
    # The file's system prompt is rendered with each row's columns (calls run concurrently).
    assert {sent[0]["content"] for sent in _sent(bench)} == {"Case r1.", "Case r2."}


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        ("cases:\n  - prompt: hi\n    turns: [{user: hi}]\n", 2, "give either `turns` or `prompt`"),
        ("cases:\n  - id: x\n    turns: []\n", 3, "`turns` is empty"),
        ("cases:\n  - turns:\n      - weight: 2\n", 3, "give either `user` or `assistant`"),
        (
            "cases:\n  - turns:\n      - user: a\n      - assistant: b\n        assert: [is-json]\n"
            "      - user: c\n",
            5,
            "an `assistant` turn is given verbatim",
        ),
        ("cases:\n  - turns:\n      - usr: hi\n", 3, "(did you mean 'user'?)"),
    ],
)
def test_bad_turns_are_collection_errors_naming_the_line(
    bench: Bench, text: str, line: int, message: str
) -> None:
    bench.eval_file("bad", text)
    result = bench.run("--models=fake")
    assert result.ret != 0
    output = result.stdout.str()
    assert f"bad.eval.yaml:{line}: " in output and message in output, output
    assert "Traceback" not in output
    assert bench.server.chat_requests() == []


def test_a_secret_said_in_a_conversation_is_redacted_in_its_record(bench: Bench) -> None:
    bench.server.add_rule(Rule(match="key", reply=f"Your key is {FAKE_KEY}."))
    bench.eval_file(
        "talk",
        """
cases:
  - id: leak
    turns:
      - user: What is my key?
        assert: [{type: icontains, value: nothing}]
      - user: Thanks.
""",
    )
    result = bench.run("--models=fake")
    result.assert_outcomes(failed=1)
    assert FAKE_KEY not in result.stdout.str()  # the failure's transcript
    text = bench.out("results.jsonl").read_text()
    assert FAKE_KEY not in text
    (record,) = bench.records()
    assert f"[REDACTED:{FAKE_KEY_ENV}]" in record["conversation"][1]["content"]


def test_the_cost_estimate_counts_every_turns_call_with_its_history(bench: Bench) -> None:
    from pytest_llmbench.models.providers.tokens import prompt_tokens

    bench.eval_file(
        "talk",
        """
model_params: {max_tokens: 10}
cases:
  - turns: [{user: Hello there.}, {assistant: Hi!}, {user: How are you?}, {user: Bye.}]
""",
    )
    result = bench.run("--collect-only", "-q", "--estimate-cost", "--models=fake")
    row = next(line.split() for line in result.stdout.lines if line.startswith("fake "))
    opening = [
        {"role": "user", "content": "Hello there."},
        {"role": "assistant", "content": "Hi!"},  # a verbatim reply answers the first turn
        {"role": "user", "content": "How are you?"},
    ]
    last = [*opening, {"role": "user", "content": "Bye."}]  # the model's reply: at the budget
    count = [prompt_tokens("openai/fake-model", chat) or 0 for chat in (opening, last)]
    # Two calls of at most 10 tokens each; the second also reads the first reply (10 tokens).
    assert row[1:4] == ["1", str(count[0] + count[1] + 10), "20"]
