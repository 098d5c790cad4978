"""A reasoning model's thinking, reasoning tokens and cached input tokens, read by both clients
(models/providers/reasoning.py) from the shapes servers give them: ``reasoning_content``
(DeepSeek, vLLM, llama.cpp), ``reasoning`` (newer vLLM, Ollama), whole and streamed."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import sqlite3
from typing import Any

import pytest
from conftest import FAKE_KEY, Bench, FakeLLMServer, Rule

from pytest_llmbench.models.providers.calls import acomplete
from pytest_llmbench.models.providers.completion import CallTarget, Completion
from pytest_llmbench.models.providers.reasoning import (
    reasoning_of,
    split_leading_thinking,
    usage_details,
)

THOUGHT = "The user asks for the capital of France. That is Paris, so I answer Paris."
MESSAGES = [{"role": "user", "content": "Capital of France?"}]


def _call(server: FakeLLMServer, client: str, stream: bool) -> Completion:
    target = CallTarget(
        "m", "openai/fake-model", server.base_url, api_key=FAKE_KEY, client=client,
        cost_per_1k_input=0.001, cost_per_1k_output=0.002,
    )  # fmt: skip
    return asyncio.run(acomplete(target, MESSAGES, {}, stream=stream))


def _measured(completion: Completion) -> dict[str, Any]:
    """A completion without its times (which differ from call to call)."""
    fields = dataclasses.asdict(completion)
    for name in ("latency_s", "ttft_s"):
        fields.pop(name)
    return fields


@pytest.mark.parametrize("field", ["reasoning_content", "reasoning"])
@pytest.mark.parametrize("stream", [False, True])
def test_thinking_given_apart_is_kept_apart_alike_by_both_clients(
    fake_llm: FakeLLMServer, litellm_loaded: Any, field: str, stream: bool
) -> None:
    fake_llm.add_rule(Rule(reply="Paris.", reasoning=THOUGHT, reasoning_field=field))
    lean, other = (_call(fake_llm, client, stream) for client in ("auto", "litellm"))
    assert (lean.text, lean.reasoning, lean.finish_reason) == ("Paris.", THOUGHT, "stop")
    # The thinking's words are among the completion tokens, and counted apart.
    assert lean.reasoning_tokens == len(THOUGHT.split())
    assert lean.output_tokens == lean.reasoning_tokens + 1
    assert not lean.tokens_estimated
    assert _measured(lean) == _measured(other)
    if stream:  # the first thinking token is the first token
        assert lean.ttft_s is not None and other.ttft_s is not None


@pytest.mark.parametrize("stream", [False, True])
def test_thinking_written_inline_first_is_moved_apart_alike_by_both_clients(
    fake_llm: FakeLLMServer, litellm_loaded: Any, stream: bool
) -> None:
    """litellm moves a leading <think> block out of a whole answer (not a stream's); both
    clients, whole and streamed, give the same completion."""
    fake_llm.add_rule(Rule(reply=f"<think>{THOUGHT}</think>\n\nParis."))
    lean, other = (_call(fake_llm, client, stream) for client in ("auto", "litellm"))
    assert (lean.text, lean.reasoning) == ("\n\nParis.", THOUGHT)
    assert _measured(lean) == _measured(other)


def test_only_a_leading_block_moves_and_thinking_given_apart_wins() -> None:
    assert split_leading_thinking("<think>a</think>b", "") == ("b", "a")
    assert split_leading_thinking("<thinking>a</thinking>b", "") == ("b", "a")
    # Not first, not closed, or the server gave the thinking apart: left to the item.
    assert split_leading_thinking(" <think>a</think>b", "") == (" <think>a</think>b", "")
    assert split_leading_thinking("<think>a", "") == ("<think>a", "")
    assert split_leading_thinking("a</think>b", "") == ("a</think>b", "")
    assert split_leading_thinking("<think>x</think>b", "given") == ("<think>x</think>b", "given")


@pytest.mark.parametrize("stream", [False, True])
def test_cached_input_tokens_are_read_alike_by_both_clients(
    fake_llm: FakeLLMServer, litellm_loaded: Any, stream: bool
) -> None:
    fake_llm.add_rule(Rule(reply="Paris.", cached_tokens=2))
    lean, other = (_call(fake_llm, client, stream) for client in ("auto", "litellm"))
    assert (lean.cached_input_tokens, lean.reasoning, lean.reasoning_tokens) == (2, "", None)
    assert _measured(lean) == _measured(other)


def test_a_model_without_thinking_reports_none() -> None:
    assert reasoning_of({"role": "assistant", "content": "Paris."}) == ""
    assert reasoning_of({"reasoning_content": None, "reasoning": ""}) == ""
    assert usage_details({"prompt_tokens": 3, "completion_tokens": 1}) == (None, None)
    assert usage_details(None) == (None, None)


def test_usage_details_read_dicts_and_objects() -> None:
    class Details:
        reasoning_tokens = 0
        cached_tokens = 5

    class Usage:
        completion_tokens_details = Details()
        prompt_tokens_details = Details()

    # Zero reasoning tokens are none (litellm makes up a zero on every stream).
    assert usage_details(Usage()) == (None, 5)
    Details.reasoning_tokens = 12
    assert usage_details(Usage()) == (12, 5)
    # Anthropic's own cache field, where litellm passes it through.
    assert usage_details({"cache_read_input_tokens": 7}) == (None, 7)
    # A count is an int: a bool or a string is not one.
    assert usage_details({"completion_tokens_details": {"reasoning_tokens": True}}) == (None, None)
    assert usage_details({"prompt_tokens_details": {"cached_tokens": "3"}}) == (None, None)


def test_the_response_cache_keeps_thinking_and_its_counts(tmp_path: Any) -> None:
    from pytest_llmbench.engine.cache import ResponseCache

    said = Completion(
        text="Paris.", model_id="openai/fake-model", input_tokens=9, output_tokens=17,
        tokens_estimated=False, ttft_s=None, latency_s=0.5, cost_usd=None, retries=0,
        streamed=False, finish_reason="stop", reasoning=THOUGHT, reasoning_tokens=16,
        cached_input_tokens=4,
    )  # fmt: skip
    cache = ResponseCache(tmp_path / "responses.sqlite")
    try:
        cache.put("k", said)
        assert cache.get("k") == said
        # An entry written before these fields existed reads with none of them.
        old = dataclasses.asdict(said)
        for name in ("reasoning", "reasoning_tokens", "cached_input_tokens"):
            old.pop(name)
        with sqlite3.connect(tmp_path / "responses.sqlite") as connection:
            connection.execute("UPDATE responses SET value = ? WHERE key = 'k'", (json.dumps(old),))
        back = cache.get("k")
        assert back is not None and back.text == "Paris."
        assert (back.reasoning, back.reasoning_tokens, back.cached_input_tokens) == ("", None, None)
    finally:
        cache.close()


CAPITAL = """
cases:
  - {id: france, prompt: Capital of France?, assert: [{type: equals, value: Paris.}]}
"""


@pytest.mark.parametrize("client", ["auto", "litellm"])
def test_the_record_keeps_thinking_apart_from_the_response(
    bench: Bench, monkeypatch: pytest.MonkeyPatch, client: str
) -> None:
    """The record's ``response`` is the answer alone, ``reasoning`` the thinking (redacted as
    every field, in the cache too), with its tokens, the cached input tokens and the finish
    reason; a replay from the cache gives the same record."""
    secret = "tok-inner-9c1e55f3a7"
    monkeypatch.setenv("INNER_API_TOKEN", secret)
    thought = f"{THOUGHT} The token is {secret}."
    bench.server.add_rule(Rule(reply="Paris.", reasoning=thought, cached_tokens=2))
    bench.eval_file("capital", CAPITAL)
    args = ("--models=fake", f"--client={client}", "--cache=use", "--cache-dir=cache")
    bench.run(*args).assert_outcomes(passed=1)
    (record,) = bench.records()
    assert record["response"] == "Paris."
    assert record["reasoning"] == f"{THOUGHT} The token is [REDACTED:INNER_API_TOKEN]."
    assert record["reasoning_tokens"] == len(thought.split())
    assert record["output_tokens"] == record["reasoning_tokens"] + 1
    assert (record["cached_input_tokens"], record["finish_reason"]) == (2, "stop")
    assert not [
        p
        for p in bench.pytester.path.rglob("*")
        if p.is_file() and secret.encode() in p.read_bytes()
    ]
    requests = len(bench.server.chat_requests())
    bench.run(*args[:-2], "--cache=replay", "--cache-dir=cache").assert_outcomes(passed=1)
    assert len(bench.server.chat_requests()) == requests  # no call made
    (again,) = bench.records()
    fields = ("response", "reasoning", "reasoning_tokens", "cached_input_tokens", "finish_reason")
    assert {k: again[k] for k in fields} == {k: record[k] for k in fields}
    assert again["cached"]


def test_a_long_thinking_is_cut_in_the_record_with_a_note() -> None:
    from pytest_llmbench.results.item_record import capped_reasoning
    from pytest_llmbench.results.record import REASONING_CHARS

    assert capped_reasoning("") is None
    assert capped_reasoning("short") == "short"
    cut = capped_reasoning("x" * (REASONING_CHARS + 7))
    assert cut == "x" * REASONING_CHARS + "... [7 more characters]"


def test_finish_reason_is_a_providers_word_or_none() -> None:
    """An agent's many calls, and a log-likelihood item's scored options, have no one finish
    reason of a provider: none is made up (an agent's end is ``agent_stopped``)."""
    from pytest_llmbench.agent.loop import AgentRun
    from pytest_llmbench.engine.loglikelihood_scores import _summed
    from pytest_llmbench.engine.request import agent_completion
    from pytest_llmbench.models import Usage

    run = AgentRun("Paris.", 2, (), (), "answer", False, Usage(3, 4, None, 0.5), 0, False)
    assert agent_completion(run, "openai/fake-model").finish_reason is None
    option = Completion(
        text="", model_id="m", input_tokens=5, output_tokens=1, tokens_estimated=False,
        ttft_s=None, latency_s=0.1, cost_usd=None, retries=0, streamed=False,
        finish_reason="length",
    )  # fmt: skip
    assert _summed([option, option], "B").finish_reason is None


def test_a_reply_whose_thinking_never_finished_is_no_answer() -> None:
    from pytest_llmbench.models import unfinished_thinking

    cut = unfinished_thinking("<think>Paris or Lyon, let me", "", "length")
    assert cut == "the reply ended inside its thinking when it reached max_tokens: no answer (raise max_tokens)"  # fmt: skip
    assert unfinished_thinking("\n<thinking>hmm", "", "stop") is not None
    ran_out = unfinished_thinking("", THOUGHT, "length")
    assert ran_out is not None and ran_out.startswith("ran out of tokens while reasoning")
    # An answer, however short, after finished thinking; a cut answer is the model's answer.
    assert unfinished_thinking("Paris.", THOUGHT, "length") is None
    assert unfinished_thinking("<think>a</think>Paris.", "", "stop") is None
    assert unfinished_thinking("The tag <think> is HTML-like.", "", "stop") is None
    assert unfinished_thinking("", "", "length") is None  # no thinking: an empty answer


FINISH = """
model_params: {max_tokens: 6}
cases:
  - id: thinks-too-long
    prompt: Capital of France?
    assert: [{type: icontains, value: paris}]
  - id: answers
    prompt: Capital of Spain?
    assert: [{type: icontains, value: madrid}, {type: finish-reason, value: stop}]
  - id: cut
    prompt: Capital of Italy?
    assert: [{type: not-finish-reason, value: [length, content_filter]}]
"""


def test_unfinished_thinking_is_unchecked_and_finish_reason_is_checked(bench: Bench) -> None:
    bench.server.add_rule(Rule(match="France", reply=f"<think>{THOUGHT}</think>Paris."))
    bench.server.add_rule(Rule(match="Spain", reply="Madrid."))
    bench.server.add_rule(Rule(match="Italy", reply="Rome is the capital of Italy, of course."))
    bench.eval_file("finish", FINISH)
    result = bench.run("--models=fake", "-rs")
    result.assert_outcomes(passed=1, failed=1, skipped=1)
    result.stdout.fnmatch_lines(["*llmbench: nothing checked: the reply ended inside its thinking when it reached max_tokens*"])  # fmt: skip
    records = {record["case_id"]: record for record in bench.records()}
    thinks = records["thinks-too-long"]
    assert (thinks["outcome"], thinks["error_kind"], thinks["finish_reason"]) == (
        "skipped", "unchecked", "length",
    )  # fmt: skip
    assert thinks["assertions"] == []  # not checked at all: neither right nor wrong
    assert records["answers"]["outcome"] == "passed"
    assert records["answers"]["assertions"][1]["reason"] == "finished with 'stop'"
    cut = records["cut"]
    assert cut["outcome"] == "failed" and cut["finish_reason"] == "length"


def test_an_unknown_finish_reason_is_a_collection_error_naming_the_allowed(bench: Bench) -> None:
    bench.eval_file(
        "bad", "cases:\n  - {id: a, prompt: Hi, assert: [{type: finish-reason, value: done}]}\n"
    )
    result = bench.run("--models=fake")
    result.stdout.fnmatch_lines(
        [
            "*bad.eval.yaml:*finish-reason needs one of stop, length, tool_calls, content_filter*'done'*"
        ]
    )
    assert result.ret != 0


def test_the_first_thinking_token_is_the_first_token(fake_llm: FakeLLMServer) -> None:
    """A streamed reply that thinks and answers nothing: its TTFT is its thinking's."""
    fake_llm.add_rule(Rule(reply="", reasoning=THOUGHT))
    said = _call(fake_llm, "auto", True)
    assert (said.text, said.reasoning) == ("", THOUGHT)
    assert said.ttft_s is not None and said.ttft_s <= said.latency_s


TWO_TURNS = """
cases:
  - id: talk
    turns:
      - user: Capital of France?
        assert: [{type: icontains, value: paris}]
      - user: And of Spain?
        assert: [{type: icontains, value: madrid}]
"""


def test_a_conversation_of_a_reasoning_model_records_its_thinking(bench: Bench) -> None:
    """The history sent back holds the answers alone; the record keeps the last reply's thinking,
    its reasoning and cached tokens summed over the replies as its output tokens are."""
    bench.server.add_rule(Rule(match="Spain", reply="Madrid.", reasoning="Spain: Madrid.", cached_tokens=3))  # fmt: skip
    bench.server.add_rule(Rule(match="France", reply="Paris.", reasoning=THOUGHT, cached_tokens=2))
    bench.eval_file("talk", TWO_TURNS)
    bench.run("--models=fake").assert_outcomes(passed=1)
    (record,) = bench.records()
    assert (record["response"], record["reasoning"]) == ("Madrid.", "Spain: Madrid.")
    assert record["reasoning_tokens"] == len(THOUGHT.split()) + 2
    assert (record["cached_input_tokens"], record["finish_reason"]) == (5, "stop")
    second = bench.server.chat_requests()[-1].body["messages"]
    assert [m["content"] for m in second if m["role"] == "assistant"] == ["Paris."]


def test_thinking_is_recorded_the_same_under_xdist(bench: Bench) -> None:
    bench.server.add_rule(Rule(match="France", reply="Paris.", reasoning=THOUGHT, cached_tokens=2))
    bench.server.add_rule(Rule(match="Spain", reply="<think>Madrid, surely.</think>Madrid."))
    bench.eval_file("talk", TWO_TURNS)
    bench.eval_file("capital", CAPITAL)
    fields = ("response", "reasoning", "reasoning_tokens", "cached_input_tokens", "finish_reason")
    seen = []
    for args in ((), ("-n", "2")):
        bench.run_subprocess("--models=fake", *args).assert_outcomes(passed=2)
        seen.append(sorted(tuple(r[k] for k in ("case_id", *fields)) for r in bench.records()))
    assert seen[0] == seen[1]
    # The last reply's inline thinking; the counts the server reported for the first reply,
    # plus the second's counted from its thinking (at most its 2 output tokens: estimated).
    reported = len(THOUGHT.split())
    assert ("talk", "Madrid.", "Madrid, surely.", reported + 2, 2, "stop") in seen[0]
