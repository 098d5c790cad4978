"""``llm.chat``: a plain test's conversation with the model, against the fake server.

The server scripts each reply and records what the model was sent; the fixture, the engine, the
cache and the records are the real ones.
"""

from __future__ import annotations

from typing import Any

import pytest
from conftest import FAKE_KEY, FAKE_KEY_ENV, Bench, Rule

REFUND_TEST = """
def test_refund(llm):
    convo = llm.chat(system="You are the support agent of ACME.")
    first = convo.send("My order 1234 never arrived.")
    assert first.text == "Sorry to hear that. Shall I refund it?"
    second = convo.send("Yes, refund it please.", max_tokens=16)
    assert second.text == "Your refund is processed."
    assert second.latency_s >= 0 and second.output_tokens
    assert convo.messages[-1] == {"role": "assistant", "content": second.text}
"""


def _script_refund(bench: Bench) -> None:
    bench.server.add_rule(
        Rule(match="never arrived", reply="Sorry to hear that. Shall I refund it?")
    )
    bench.server.add_rule(Rule(match="refund it", reply="Your refund is processed."))


def _sent(bench: Bench) -> list[list[dict[str, Any]]]:
    return [request.body["messages"] for request in bench.server.chat_requests()]


def _said(record: dict[str, Any]) -> list[tuple[int, int, str, str]]:
    return [(e["chat"], e["turn"], e["role"], e["content"]) for e in record["conversation"]]


def test_each_send_carries_the_history_with_the_models_own_replies(bench: Bench) -> None:
    _script_refund(bench)
    bench.pytester.makepyfile(test_chat=REFUND_TEST)
    bench.run("--models=fake").assert_outcomes(passed=1)
    first, second = _sent(bench)
    assert first == [
        {"role": "system", "content": "You are the support agent of ACME."},
        {"role": "user", "content": "My order 1234 never arrived."},
    ]
    assert second == [
        *first,
        {"role": "assistant", "content": "Sorry to hear that. Shall I refund it?"},
        {"role": "user", "content": "Yes, refund it please."},
    ]
    bodies = [request.body for request in bench.server.chat_requests()]
    assert "max_tokens" not in bodies[0] and bodies[1]["max_tokens"] == 16


def test_the_record_holds_the_transcript_with_each_replys_measures(bench: Bench) -> None:
    _script_refund(bench)
    bench.pytester.makepyfile(test_chat=REFUND_TEST)
    bench.run("--models=fake").assert_outcomes(passed=1)
    (record,) = bench.records()
    assert _said(record) == [
        (1, 0, "system", "You are the support agent of ACME."),
        (1, 1, "user", "My order 1234 never arrived."),
        (1, 1, "assistant", "Sorry to hear that. Shall I refund it?"),
        (1, 2, "user", "Yes, refund it please."),
        (1, 2, "assistant", "Your refund is processed."),
    ]
    talk = record["conversation"]
    replies = [entry for entry in talk if entry["generated"]]
    assert [e["role"] for e in replies] == ["assistant", "assistant"]
    assert all(e["input_tokens"] and e["output_tokens"] and e["latency_s"] for e in replies)
    assert all(
        e["latency_s"] is None and not e["generated"] for e in talk if e["role"] != "assistant"
    )
    assert replies[1]["input_tokens"] > replies[0]["input_tokens"]  # the longer history
    assert record["input_tokens"] == sum(e["input_tokens"] for e in replies)
    assert record["output_tokens"] == sum(e["output_tokens"] for e in replies)
    assert record["cost_usd"] == pytest.approx(sum(e["cost_usd"] for e in replies))
    assert record["prompt"] == "Yes, refund it please."
    assert record["response"] == "Your refund is processed."


def test_a_test_without_chat_has_no_conversation(bench: Bench) -> None:
    bench.pytester.makepyfile(
        test_plain="""
        def test_ask(llm):
            llm.complete("hi")

        def test_opened_only(llm):
            llm.chat(system="Be brief.")
        """
    )
    bench.run("--models=fake").assert_outcomes(passed=2)
    by_case = {r["case_id"]: r for r in bench.records()}
    assert by_case["test_ask"]["conversation"] is None
    assert _said(by_case["test_opened_only"]) == [(1, 0, "system", "Be brief.")]


def test_two_conversations_in_one_test_keep_their_own_histories(bench: Bench) -> None:
    bench.server.add_rule(Rule(match="I am Ada", reply="Hello Ada."))
    bench.server.add_rule(Rule(match="I am Bob", reply="Hello Bob."))
    bench.server.add_rule(Rule(match="my name", reply="You told me."))
    bench.pytester.makepyfile(
        test_two="""
        def test_two(llm):
            ada = llm.chat()
            bob = llm.chat(system="Be polite.")
            ada.send("I am Ada.")
            bob.send("I am Bob.")
            ada.send("What is my name?")
        """
    )
    bench.run("--models=fake").assert_outcomes(passed=1)
    third = _sent(bench)[2]
    assert third == [
        {"role": "user", "content": "I am Ada."},
        {"role": "assistant", "content": "Hello Ada."},
        {"role": "user", "content": "What is my name?"},
    ]  # nothing of Bob's conversation
    (record,) = bench.records()
    assert _said(record) == [
        (1, 1, "user", "I am Ada."),
        (1, 1, "assistant", "Hello Ada."),
        (1, 2, "user", "What is my name?"),
        (1, 2, "assistant", "You told me."),
        (2, 0, "system", "Be polite."),
        (2, 1, "user", "I am Bob."),
        (2, 1, "assistant", "Hello Bob."),
    ]


def test_replay_reproduces_the_conversation_with_no_request(bench: Bench) -> None:
    _script_refund(bench)
    bench.pytester.makepyfile(test_chat=REFUND_TEST)
    bench.run("--models=fake", "--cache=use", "--cache-dir=c").assert_outcomes(passed=1)
    (first,) = bench.records()
    assert len(bench.server.chat_requests()) == 2
    bench.server.reset()  # no rule: an answer now would be the server's "ok"
    bench.run("--models=fake", "--cache=replay", "--cache-dir=c").assert_outcomes(passed=1)
    assert bench.server.chat_requests() == []
    (again,) = bench.records()
    assert again["cached"] is True
    assert _said(again) == _said(first)
    assert all(e["cached"] for e in again["conversation"] if e["generated"])


def test_a_send_after_another_history_is_another_cache_entry(
    bench: Bench, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The same second message after another first reply: the cache must not answer it with
    # the reply it kept for the first history.
    bench.pytester.makepyfile(
        test_chat="""
        import os

        def test_chat(llm):
            convo = llm.chat()
            convo.send(os.environ["OPENING"])
            assert convo.send("And then?").text == os.environ["EXPECTED"]
        """
    )
    bench.server.add_rule(Rule(match="Hello", reply="Hi."))
    bench.server.add_rule(Rule(match="Bye", reply="Ciao."))
    bench.server.add_rule(Rule(match="And then?", match_any="Hi.", reply="after hi"))
    bench.server.add_rule(Rule(match="And then?", match_any="Ciao.", reply="after ciao"))
    monkeypatch.setenv("OPENING", "Hello")
    monkeypatch.setenv("EXPECTED", "after hi")
    bench.run("--models=fake", "--cache=use", "--cache-dir=c").assert_outcomes(passed=1)
    monkeypatch.setenv("OPENING", "Bye")
    monkeypatch.setenv("EXPECTED", "after ciao")
    bench.run("--models=fake", "--cache=use", "--cache-dir=c").assert_outcomes(passed=1)
    assert [m[-1]["content"] for m in _sent(bench)] == ["Hello", "And then?", "Bye", "And then?"]


def test_async_sends_keep_the_history(bench: Bench) -> None:
    _script_refund(bench)
    bench.pytester.makepyfile(
        test_async="""
        import asyncio

        def test_async(llm):
            async def talk():
                convo = llm.chat(system="You are the support agent of ACME.")
                await convo.asend("My order 1234 never arrived.")
                return await convo.asend("Yes, refund it please.")

            assert asyncio.run(talk()).text == "Your refund is processed."
        """
    )
    bench.run("--models=fake").assert_outcomes(passed=1)
    assert _sent(bench)[1][2] == {
        "role": "assistant",
        "content": "Sorry to hear that. Shall I refund it?",
    }
    (record,) = bench.records()
    assert [e["role"] for e in record["conversation"]] == [
        "system", "user", "assistant", "user", "assistant"
    ]  # fmt: skip


def test_a_provider_error_is_the_tests_error_keeping_the_turns_before(bench: Bench) -> None:
    bench.server.add_rule(Rule(match="never arrived", reply="Sorry."))
    bench.server.add_rule(Rule(match="refund it", status=503, error_message="overloaded"))
    bench.pytester.makepyfile(
        test_chat="""
        def test_chat(llm):
            convo = llm.chat()
            convo.send("My order 1234 never arrived.")
            convo.send("Yes, refund it please.")
        """
    )
    bench.run("--models=fake", "--max-retries=0").assert_outcomes(failed=1)
    (record,) = bench.records()
    assert record["outcome"] == "error" and record["error_kind"] == "provider"
    assert "overloaded" in record["error"]
    assert _said(record) == [
        (1, 1, "user", "My order 1234 never arrived."),
        (1, 1, "assistant", "Sorry."),
    ]
    assert record["prompt"] == "Yes, refund it please."  # the message whose call failed


def test_a_key_sent_in_a_message_is_redacted_in_the_record(bench: Bench) -> None:
    bench.server.add_rule(Rule(match="my key", reply=f"Noted: {FAKE_KEY}."))
    bench.pytester.makepyfile(
        test_leak=f"""
        import os

        def test_leak(llm):
            convo = llm.chat(system="Key: " + os.environ["{FAKE_KEY_ENV}"])
            convo.send("my key is " + os.environ["{FAKE_KEY_ENV}"])
            assert convo.send("ok?").text == "nothing"
        """
    )
    result = bench.run("--models=fake")
    result.assert_outcomes(failed=1)
    assert FAKE_KEY not in result.stdout.str()
    assert FAKE_KEY not in bench.out("results.jsonl").read_text()
    (record,) = bench.records()
    hidden = f"[REDACTED:{FAKE_KEY_ENV}]"
    contents = [entry["content"] for entry in record["conversation"]]
    assert contents[:3] == [f"Key: {hidden}", f"my key is {hidden}", f"Noted: {hidden}."]


def test_the_budget_ending_a_conversation_keeps_its_turns(bench: Bench) -> None:
    bench.pricey_profile()
    _script_refund(bench)
    bench.pytester.makepyfile(
        test_paid="""
        def test_paid(llm):
            convo = llm.chat()
            convo.send("My order 1234 never arrived.")
            convo.send("Yes, refund it please.")
        """
    )
    # The first send spends more than --max-cost: the second is not made, the test is skipped.
    result = bench.run("--models=pricey", "--max-cost=0.5")
    result.assert_outcomes(skipped=1)
    assert len(bench.server.chat_requests()) == 1
    (record,) = bench.records()
    assert (record["outcome"], record["error_kind"]) == ("skipped", "budget")
    assert _said(record) == [
        (1, 1, "user", "My order 1234 never arrived."),
        (1, 1, "assistant", "Sorry to hear that. Shall I refund it?"),
    ]


@pytest.mark.slow
def test_the_transcript_crosses_xdist_unchanged(bench: Bench) -> None:
    _script_refund(bench)
    bench.pytester.makepyfile(test_chat=REFUND_TEST)
    bench.run_subprocess("--models=fake", "-n", "0").assert_outcomes(passed=1)
    (alone,) = bench.records()
    bench.run_subprocess("--models=fake", "-n", "2").assert_outcomes(passed=1)
    (spread,) = bench.records()
    assert spread["worker"].startswith("gw")
    assert _said(spread) == _said(alone)
    kept = ("chat", "turn", "role", "generated", "input_tokens", "output_tokens", "cost_usd")
    assert [{k: e[k] for k in kept} for e in spread["conversation"]] == [
        {k: e[k] for k in kept} for e in alone["conversation"]
    ]
