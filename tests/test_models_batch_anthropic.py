"""Anthropic's Message Batches (models/providers/batch_anthropic.py) against a fake of its API
on 127.0.0.1 (tests/fake_anthropic_batches.py): a batch line's params are the body litellm's
live path sends for the same call, a batched answer reads as the live one (but for its batch
fields and price), the batch's lifecycle, and every bad results line is an error naming the
batch and the line, never an answer given to another call. No key in any error.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
from conftest import Rule
from fake_anthropic_batches import API_KEY, FakeAnthropicBatches, Script

from pytest_llmbench.models.item_errors import BatchError, ProviderError
from pytest_llmbench.models.providers import batch_anthropic, litellm_client
from pytest_llmbench.models.providers.batch_anthropic import (
    AnthropicBatches,
    read_results,
    state_of,
    unix_seconds,
)
from pytest_llmbench.models.providers.batch_backend import (
    CANCELLED,
    COMPLETED,
    EXPIRED,
    IN_PROGRESS,
    BatchLine,
    BatchResults,
    BatchState,
)
from pytest_llmbench.models.providers.completion import CallTarget, Completion
from pytest_llmbench.models.providers.transport_retry import Timeouts

MODEL = "anthropic/claude-haiku-4-5"
#: claude-haiku-4-5's batch prices per token (litellm's map: input_cost_per_token_batches,
#: output_cost_per_token_batches), half its live 1e-06 / 5e-06
BATCH_IN, BATCH_OUT = 5e-07, 2.5e-06
#: The fields of a completion that say how it was answered, not what: apart for a batch.
BATCH_FIELDS = ("latency_s", "ttft_s", "cost_usd", "batched", "batch_id", "batch_wait_s")
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "The weather in a city",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    }
]
RULES = [
    Rule(match="capital of France", reply="Paris is the capital."),
    Rule(match="capital of Japan", reply="Tokyo."),
    Rule(match="think hard", reply="42", reasoning="six times seven is forty two"),
    Rule(match="weather", tool_calls=[{"name": "get_weather", "arguments": {"city": "Oslo"}}]),
    Rule(match="long story", reply="once upon a time there lived a king"),
    Rule(match="cached", reply="from cache", cached_tokens=40, cache_write_tokens=12),
    Rule(match="refuse me", status=400, error_message="max_tokens: must be at most 64000"),
]


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeAnthropicBatches]:
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_API_BASE", "ANTHROPIC_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    with FakeAnthropicBatches(RULES) as server:
        yield server


@pytest.fixture
def target(fake: FakeAnthropicBatches) -> CallTarget:
    return CallTarget("claude", MODEL, api_base=fake.base_url, api_key=API_KEY)


def line(prompt: str, target: CallTarget | None = None, **params: Any) -> BatchLine:
    """A chat call's batch line; its id a cache key's shape (64 hex digits)."""
    messages = [{"role": "user", "content": prompt}]
    key = hashlib.sha256(json.dumps([prompt, params], sort_keys=True).encode()).hexdigest()
    return BatchLine(key, target or CallTarget("claude", MODEL), messages, params)


def run_batch(
    target: CallTarget, lines: list[BatchLine], *, max_polls: int = 10
) -> tuple[list[BatchState], BatchResults]:
    """Create a batch of ``lines``, poll it until it ends, read its results."""

    async def go() -> tuple[list[BatchState], BatchResults]:
        backend = AnthropicBatches(target)
        batch_id = await backend.create(lines, {"llmbench_input_sha256": "0" * 64})
        states = [await backend.poll(batch_id)]
        while not states[-1].terminal and len(states) < max_polls:
            states.append(await backend.poll(batch_id))
        results = await backend.results(states[-1], {one.custom_id: one for one in lines})
        assert isinstance(results, BatchResults)
        return states, results

    return asyncio.run(go())


def live(target: CallTarget, one: BatchLine) -> Completion:
    """The same call made live through litellm (whole, not streamed) against the fake."""
    litellm = litellm_client.import_litellm()
    return asyncio.run(
        litellm_client.chat_once(
            litellm, target, one.messages, one.params, False, Timeouts(call_s=30), 0
        )
    )


def answered(result: Completion | BatchError) -> Completion:
    assert isinstance(result, Completion), result
    return result


def failed(result: Completion | BatchError) -> str:
    assert isinstance(result, BatchError), result
    assert result.kind == "batch"
    return result.message


# -- the request: what litellm's live path sends -------------------------------------------


PARAMS = [
    pytest.param("capital of France?", {}, id="plain"),
    pytest.param("capital of France?", {"temperature": 0, "max_tokens": 50}, id="sampling"),
    pytest.param("think hard", {"reasoning_effort": "low", "max_tokens": 3000}, id="effort"),
    pytest.param(
        "think hard",
        {"thinking": {"type": "enabled", "budget_tokens": 2000}, "max_tokens": 4000},
        id="thinking",
    ),
    pytest.param("weather?", {"tools": TOOLS, "tool_choice": "auto", "stop": ["X"]}, id="tools"),
    pytest.param("give json", {"response_format": {"type": "json_object"}}, id="json"),
    pytest.param("capital of Japan?", {"top_p": 0.5, "drop_params": True}, id="dropped"),
]


@pytest.mark.parametrize(("prompt", "params"), PARAMS)
def test_a_lines_params_are_the_live_calls_body(
    litellm_loaded: Any,
    fake: FakeAnthropicBatches,
    target: CallTarget,
    prompt: str,
    params: dict[str, Any],
) -> None:
    system = {"role": "system", "content": "Answer briefly."}
    profiled = dataclasses.replace(target, params={"max_tokens": 777, **params})
    one = line(prompt, profiled, **params)
    one = dataclasses.replace(one, messages=[system, *one.messages])
    live(profiled, one)
    run_batch(profiled, [one])
    assert fake.batch_params[one.custom_id] == fake.messages_bodies[-1]
    assert "stream" not in fake.batch_params[one.custom_id]
    assert fake.batch_params[one.custom_id]["system"] == [
        {"type": "text", "text": "Answer briefly."}
    ]
    for headers in fake.headers_seen:
        assert headers["x-api-key"] == API_KEY
        assert headers["anthropic-version"] == "2023-06-01"


def test_each_line_is_sent_as_its_own_target_would_send_it(
    litellm_loaded: Any, fake: FakeAnthropicBatches, target: CallTarget
) -> None:
    brief = dataclasses.replace(target, params={"max_tokens": 5, "temperature": 0})
    sonnet = CallTarget("sonnet", "anthropic/claude-sonnet-4-5", params={"max_tokens": 900})
    lines = [line("capital of France?", brief), line("capital of Japan?", sonnet)]
    _, results = run_batch(target, lines)
    first, second = (fake.batch_params[one.custom_id] for one in lines)
    assert (first["model"], first["max_tokens"], first["temperature"]) == (
        "claude-haiku-4-5",
        5,
        0,
    )
    assert (second["model"], second["max_tokens"]) == ("claude-sonnet-4-5", 900)
    assert "temperature" not in second
    sonnet_answer = answered(results[lines[1].custom_id])
    assert sonnet_answer.model_id == "anthropic/claude-sonnet-4-5"
    # claude-sonnet-4-5's batch prices: 1.5e-06 in, 7.5e-06 out (3 words in, 1 out)
    assert sonnet_answer.cost_usd == pytest.approx(3 * 1.5e-06 + 1 * 7.5e-06)


def test_a_beta_header_goes_on_the_batch(
    litellm_loaded: Any, fake: FakeAnthropicBatches, target: CallTarget
) -> None:
    beta = {"anthropic-beta": "context-1m-2025-08-07"}
    run_batch(target, [line("capital of France?", extra_headers=beta)])
    assert fake.headers_seen[0]["anthropic-beta"] == "context-1m-2025-08-07"


def test_results_are_read_from_the_endpoint_only(
    litellm_loaded: Any, fake: FakeAnthropicBatches, target: CallTarget
) -> None:
    """A results_url on another host is not followed: the key goes to the endpoint only."""
    fake.results_host = "http://127.0.0.1:9"
    paris = line("capital of France?")
    _, results = run_batch(target, [paris])
    assert answered(results[paris.custom_id]).text == "Paris is the capital."
    assert fake.downloads == 1


def test_only_chat_calls_are_batched(fake: FakeAnthropicBatches, target: CallTarget) -> None:
    embed = dataclasses.replace(line("capital of France?"), kind="embed")
    with pytest.raises(ValueError, match="chat calls only, not embed"):
        asyncio.run(AnthropicBatches(target).create([embed], {}))
    assert fake.creates == 0


def test_a_call_with_its_own_headers_cannot_be_batched(target: CallTarget) -> None:
    one = line("capital of France?", extra_headers={"X-Trace": "1"})
    with pytest.raises(ValueError, match="X-Trace"):
        batch_anthropic.translated(target, one.messages, one.params)
    settings = dataclasses.replace(target, extra={"vertex_project": "p"})
    with pytest.raises(ValueError, match=r"passes litellm settings \(vertex_project\)"):
        batch_anthropic.translated(settings, one.messages, {})


# -- the answer: what litellm's live path reads -------------------------------------------


ANSWERS = [
    pytest.param("capital of France?", {}, "stop", id="text"),
    pytest.param(
        "think hard",
        {"thinking": {"type": "enabled", "budget_tokens": 1024}, "max_tokens": 2000},
        "stop",
        id="thinking",
    ),
    pytest.param("weather in Oslo?", {"tools": TOOLS}, "tool_calls", id="tool-calls"),
    pytest.param("tell a long story", {"max_tokens": 3}, "length", id="cut-by-max-tokens"),
    pytest.param("cached prompt", {}, "stop", id="cache-tokens"),
]


@pytest.mark.parametrize(("prompt", "params", "finish"), ANSWERS)
def test_a_batched_answer_equals_the_live_one(
    litellm_loaded: Any,
    fake: FakeAnthropicBatches,
    target: CallTarget,
    prompt: str,
    params: dict[str, Any],
    finish: str,
) -> None:
    one = line(prompt, **params)
    by_live = live(target, one)
    states, results = run_batch(target, [one])
    batched = answered(results[one.custom_id])
    apart = {name: None for name in BATCH_FIELDS}
    assert dataclasses.replace(batched, **apart) == dataclasses.replace(by_live, **apart)
    assert batched.finish_reason == finish
    assert batched.batched and batched.batch_id == states[-1].batch_id
    assert batched.latency_s == 0.0 and batched.ttft_s is None
    assert batched.batch_wait_s is not None and batched.batch_wait_s >= 0
    assert by_live.cost_usd is not None and batched.cost_usd is not None
    assert batched.cost_usd == pytest.approx(by_live.cost_usd / 2)


def test_each_answer_shape_is_read(
    litellm_loaded: Any, fake: FakeAnthropicBatches, target: CallTarget
) -> None:
    lines = [line(p, **kw) for p, kw, _ in (a.values for a in ANSWERS)]
    _, results = run_batch(target, lines)
    text, thought, tools, cut, cached = (answered(results[one.custom_id]) for one in lines)
    assert text.text == "Paris is the capital." and text.reasoning == ""
    assert thought.text == "42" and thought.reasoning == "six times seven is forty two"
    assert tools.tool_calls == (
        {"id": tools.tool_calls[0]["id"], "name": "get_weather", "arguments": '{"city": "Oslo"}'},
    )
    assert tools.tool_calls[0]["id"].startswith("toolu_")
    assert cut.text == "once upon a"
    assert (cached.cached_input_tokens, cached.cache_write_tokens) == (40, 12)
    # litellm counts cache reads and writes among the input tokens: 2 words, 40 read, 12 written
    assert cached.input_tokens == 2 + 40 + 12


def test_the_cost_is_the_batch_price(
    litellm_loaded: Any, fake: FakeAnthropicBatches, target: CallTarget
) -> None:
    one = line("capital of France?")
    _, results = run_batch(target, [one])
    paris = answered(results[one.custom_id])
    # the fake counts words: the prompt's 3 in, the reply's 4 out
    assert (paris.input_tokens, paris.output_tokens) == (3, 4)
    assert paris.cost_usd == pytest.approx(3 * BATCH_IN + 4 * BATCH_OUT)
    assert paris.cost_usd == pytest.approx(1.15e-05)


# -- the lifecycle -------------------------------------------------------------------------


def test_polls_until_ended_then_every_line_once(
    litellm_loaded: Any, fake: FakeAnthropicBatches, target: CallTarget
) -> None:
    fake.script = Script(polls=2)
    lines = [line("capital of France?"), line("capital of Japan?")]
    states, results = run_batch(target, lines)
    assert [state.status for state in states] == [IN_PROGRESS, COMPLETED]
    assert [state.provider_status for state in states] == ["in_progress", "ended"]
    assert (states[0].total, states[0].done, states[0].failed) == (2, 0, 0)
    assert (states[-1].total, states[-1].done, states[-1].failed) == (2, 2, 0)
    created, expires = states[-1].created_at, states[-1].expires_at
    assert created is not None and expires is not None and expires - created == 24 * 3600
    assert (fake.creates, fake.polls, fake.downloads) == (1, 2, 1)
    assert fake.lines_received == {one.custom_id: 1 for one in lines}
    assert answered(results[lines[0].custom_id]).text == "Paris is the capital."
    assert answered(results[lines[1].custom_id]).text == "Tokyo."


def test_find_finds_nothing_anthropic_keeps_no_metadata(target: CallTarget) -> None:
    assert asyncio.run(AnthropicBatches(target).find("0" * 64)) is None


def test_an_expired_batch_keeps_its_answers(
    litellm_loaded: Any, fake: FakeAnthropicBatches, target: CallTarget
) -> None:
    paris, tokyo = line("capital of France?"), line("capital of Japan?")
    fake.script = Script(expired={tokyo.custom_id})
    states, results = run_batch(target, [paris, tokyo])
    assert states[-1].status == EXPIRED
    assert (states[-1].done, states[-1].failed) == (1, 1)
    assert answered(results[paris.custom_id]).text == "Paris is the capital."
    message = failed(results[tokyo.custom_id])
    assert message.startswith(f"batch {states[-1].batch_id}, results line ")
    assert "expired before it was answered (24 h window)" in message


def test_a_cancelled_batch(
    litellm_loaded: Any, fake: FakeAnthropicBatches, target: CallTarget
) -> None:
    fake.script = Script(polls=5)
    paris = line("capital of France?")

    async def go() -> tuple[BatchState, BatchState, BatchResults]:
        backend = AnthropicBatches(target)
        batch_id = await backend.create([paris], {})
        await backend.cancel(batch_id)
        canceling = await backend.poll(batch_id)
        ended = await backend.poll(batch_id)
        return canceling, ended, await backend.results(ended, {paris.custom_id: paris})

    canceling, ended, results = asyncio.run(go())
    assert fake.cancels == 1
    assert (canceling.status, ended.status) == (IN_PROGRESS, CANCELLED)
    assert (ended.provider_status, ended.failed) == ("ended", 1)
    assert "was cancelled before it was answered" in failed(results[paris.custom_id])


def test_results_of_a_batch_still_running_are_refused(target: CallTarget) -> None:
    running = BatchState("msgbatch_x", IN_PROGRESS, "in_progress")
    with pytest.raises(ValueError, match="msgbatch_x has not ended"):
        asyncio.run(AnthropicBatches(target).results(running, {}))


# -- bad results lines ---------------------------------------------------------------------


def test_every_bad_line_is_an_error_naming_batch_and_line(
    litellm_loaded: Any, fake: FakeAnthropicBatches, target: CallTarget
) -> None:
    good, gone, twice, refused, empty = lines = [
        line("capital of France?"),
        line("capital of Japan?"),
        line("tell a long story"),
        line("refuse me"),
        line("cached prompt"),
    ]
    fake.script = Script(
        missing={gone.custom_id},
        duplicated={twice.custom_id},
        succeeded_without_message={empty.custom_id},
        extra_lines=[
            b"{not json",
            json.dumps({"result": {"type": "succeeded"}}).encode(),
            json.dumps({"custom_id": "f" * 64, "result": {"type": "canceled"}}).encode(),
        ],
    )
    states, results = run_batch(target, lines)
    batch = states[-1].batch_id
    assert set(results) == {one.custom_id for one in lines}
    assert answered(results[good.custom_id]).text == "Paris is the capital."
    missing = failed(results[gone.custom_id])
    assert missing.startswith(f"batch {batch}: no results line for custom_id {gone.custom_id}")
    assert "not JSON" in missing and "f" * 64 in missing  # the lines no call could take
    assert "seen twice (first on line" in failed(results[twice.custom_id])
    assert "neither answer is used" in failed(results[twice.custom_id])
    assert "the request failed: invalid_request_error: max_tokens: must be at most" in failed(
        results[refused.custom_id]
    )
    assert "a succeeded result without a message" in failed(results[empty.custom_id])
    orphans = list(results.problems)
    assert len(orphans) == 3
    assert orphans[0].startswith(f"batch {batch}, results line 6: not JSON")
    assert orphans[1] == f"batch {batch}, results line 7: no custom_id"
    assert orphans[2] == f"batch {batch}, results line 8: custom_id {'f' * 64} was not sent in it"
    for result in results.values():
        if isinstance(result, BatchError):
            assert batch in result.message


def test_an_answer_goes_to_its_own_call_whatever_the_order(litellm_loaded: Any) -> None:
    """Lines are matched by custom_id, never by position (the file is in reverse order)."""
    paris, tokyo = line("capital of France?"), line("capital of Japan?")

    def entry(one: BatchLine, text: str) -> bytes:
        message = {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "claude-haiku-4-5",
            "content": [{"type": "text", "text": text}],
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": 3, "output_tokens": 1},
        }
        result = {"type": "succeeded", "message": message}
        return json.dumps({"custom_id": one.custom_id, "result": result}).encode()

    data = entry(tokyo, "Tokyo") + b"\n\n" + entry(paris, "Paris") + b"\n"
    sent = {paris.custom_id: paris, tokyo.custom_id: tokyo}
    results = read_results("msgbatch_order", data, sent)
    assert answered(results[paris.custom_id]).text == "Paris"
    assert answered(results[tokyo.custom_id]).text == "Tokyo"
    assert results.problems == ()


# -- the batch's state ---------------------------------------------------------------------


def test_state_of_an_ended_batch() -> None:
    ended: Mapping[str, Any] = {
        "processing_status": "ended",
        "request_counts": {"processing": 0, "succeeded": 3, "errored": 1, "canceled": 0},
        "created_at": "2024-08-20T18:37:24.100435Z",
        "expires_at": "2024-08-21T18:37:24.100435123Z",
    }
    state = state_of("msgbatch_a", {**ended, "request_counts": {"succeeded": 3, "errored": 1}})
    assert (state.status, state.total, state.done, state.failed) == (COMPLETED, 4, 3, 1)
    assert state.created_at == pytest.approx(1724179044.100435)
    assert state.expires_at == pytest.approx(1724179044.100435 + 86400)
    expired = {**ended, "request_counts": {"succeeded": 1, "expired": 2}}
    assert state_of("b", {**expired, "cancel_initiated_at": "2024-08-20T19:00:00Z"}).status == (
        EXPIRED
    )
    cancelled = {**ended, "cancel_initiated_at": "2024-08-20T19:00:00Z"}
    assert state_of("c", {**cancelled, "request_counts": {"canceled": 4}}).status == CANCELLED
    assert state_of("d", {**ended, "processing_status": "canceling"}).status == IN_PROGRESS
    with pytest.raises(ProviderError, match="batch e: unknown processing_status 'paused'"):
        state_of("e", {**ended, "processing_status": "paused"})


def test_unix_seconds() -> None:
    assert unix_seconds("1970-01-01T00:01:00Z") == 60.0
    assert unix_seconds("1970-01-01T01:00:00+01:00") == 0.0
    assert unix_seconds(None) is None and unix_seconds("yesterday") is None


def test_the_endpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("ANTHROPIC_API_BASE", "ANTHROPIC_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    assert batch_anthropic.base_url(CallTarget("c", MODEL)) == "https://api.anthropic.com"
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://proxy.example/v1/")
    assert batch_anthropic.base_url(CallTarget("c", MODEL)) == "http://proxy.example"
    given = CallTarget("c", MODEL, api_base="http://127.0.0.1:9/v1/messages")
    assert batch_anthropic.base_url(given) == "http://127.0.0.1:9"


# -- errors, and no key in them ------------------------------------------------------------


def test_a_refused_key_is_a_provider_error_without_the_key(
    litellm_loaded: Any, fake: FakeAnthropicBatches, target: CallTarget
) -> None:
    secret = "sk-ant-not-the-right-one-5555"
    wrong = dataclasses.replace(target, api_key=secret)
    with pytest.raises(ProviderError) as caught:
        asyncio.run(AnthropicBatches(wrong).create([line("capital of France?")], {}))
    assert caught.value.kind == "provider"
    assert str(caught.value) == ("claude: AuthenticationError (HTTP 401): invalid x-api-key")
    assert fake.creates == 0


def test_an_unknown_batch_and_a_closed_port(target: CallTarget) -> None:
    with pytest.raises(ProviderError) as caught:
        asyncio.run(AnthropicBatches(target).poll("msgbatch_nope"))
    assert str(caught.value) == "claude: NotFoundError (HTTP 404): batch msgbatch_nope not found"
    closed = dataclasses.replace(target, api_base="http://127.0.0.1:9")
    with pytest.raises(ProviderError) as caught:
        asyncio.run(AnthropicBatches(closed).poll("msgbatch_nope"))
    assert caught.value.kind == "connection"
    assert API_KEY not in str(caught.value)


def test_no_key_no_request(
    monkeypatch: pytest.MonkeyPatch, fake: FakeAnthropicBatches, target: CallTarget
) -> None:
    keyless = dataclasses.replace(target, api_key=None)
    with pytest.raises(ProviderError) as caught:
        asyncio.run(AnthropicBatches(keyless).poll("msgbatch_x"))
    assert caught.value.kind == "missing_key"
    assert "ANTHROPIC_API_KEY is not set" in str(caught.value)
    assert fake.headers_seen == []
    monkeypatch.setenv("ANTHROPIC_API_KEY", API_KEY)
    with pytest.raises(ProviderError, match="HTTP 404"):
        asyncio.run(AnthropicBatches(keyless).poll("msgbatch_x"))
    assert fake.headers_seen[-1]["x-api-key"] == API_KEY


def test_an_error_echoing_the_key_is_redacted(
    litellm_loaded: Any, fake: FakeAnthropicBatches, target: CallTarget
) -> None:
    fake.rules.insert(0, Rule(match="echo", status=400, error_message=f"bad key {API_KEY}"))
    one = line("echo my key")
    _, results = run_batch(target, [one])
    message = failed(results[one.custom_id])
    assert API_KEY not in message and "[REDACTED]" in message
