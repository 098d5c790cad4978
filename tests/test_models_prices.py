"""A call priced part by part (models/providers/prices.py): cached input tokens, cache writes and
reasoning tokens at their own rates, as parts of the input and output tokens, the same for both
clients; reasoning tokens counted from the thinking when the provider reports none
(models/providers/tokens.py)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from conftest import FAKE_KEY, FakeLLMServer, Rule
from pydantic import ValidationError
from test_models_reasoning import _measured

from pytest_llmbench.models.profiles import CostPer1k
from pytest_llmbench.models.providers import litellm_client, prices, tokens
from pytest_llmbench.models.providers.calls import acomplete
from pytest_llmbench.models.providers.completion import CallTarget, Completion, TokenDetails

#: Models of litellm's map with prices of their own for some parts: cache reads (all), cache
#: writes (Claude), reasoning (Gemini 2.5 Flash's equals its output price, Qwen Turbo's not).
MAP_MODELS = [
    "gpt-5",
    "openai/o3",
    "anthropic/claude-sonnet-4-5",
    "gemini/gemini-2.5-flash",
    "dashscope/qwen-turbo",
]
#: Of 1,000 input tokens 400 read from the cache and 100 written to it; of 500 output tokens
#: 300 spent thinking.
PARTS = TokenDetails(reasoning_tokens=300, cached_input_tokens=400, cache_write_tokens=100)
THOUGHT = "The user asks for the capital of France. That is Paris, so I answer Paris."
MESSAGES = [
    {"role": "user", "content": "Which city is the capital of France, the country in Europe?"}
]


def _rate(entry: dict[str, Any], key: str, fallback: float) -> float:
    value = entry.get(key)
    return fallback if value is None else float(value)


def _by_hand(entry: dict[str, Any]) -> float:
    """PARTS of 1,000 in and 500 out, priced from the map's own numbers."""
    given, out = entry["input_cost_per_token"], entry["output_cost_per_token"]
    return (
        (1000 - 400 - 100) * given
        + 400 * _rate(entry, "cache_read_input_token_cost", given)
        + 100 * _rate(entry, "cache_creation_input_token_cost", given)
        + (500 - 300) * out
        + 300 * _rate(entry, "output_cost_per_reasoning_token", out)
    )


@pytest.mark.parametrize("model", MAP_MODELS)
def test_a_call_is_priced_part_by_part_at_the_maps_rates(model: str) -> None:
    entry = prices.priced_entry(model)
    assert entry is not None
    target = CallTarget("m", model)
    assert prices.cost_usd(target, 1000, 500, PARTS) == pytest.approx(_by_hand(entry), rel=1e-12)
    # Without parts: every input token at the input price, every output token at the output's.
    whole = 1000 * entry["input_cost_per_token"] + 500 * entry["output_cost_per_token"]
    assert prices.cost_usd(target, 1000, 500) == pytest.approx(whole, rel=1e-12)
    assert prices.cost_usd(target, 1000, None, PARTS) is None


def test_the_parts_with_prices_of_their_own_change_the_cost() -> None:
    """The models above do test each rate: a price apart from the input's or output's."""
    claude = prices.rates(CallTarget("c", "anthropic/claude-sonnet-4-5"))
    qwen = prices.rates(CallTarget("q", "dashscope/qwen-turbo"))
    assert claude is not None and qwen is not None
    assert claude.cached_input < claude.input < claude.cache_write
    assert qwen.reasoning != qwen.output


@pytest.mark.parametrize("model", MAP_MODELS)
def test_litellm_prices_the_same_parts_the_same(litellm_loaded: Any, model: str) -> None:
    usage = litellm_loaded.Usage(
        prompt_tokens=1000,
        completion_tokens=500,
        total_tokens=1500,
        reasoning_tokens=300,
        cache_read_input_tokens=400,
        cache_creation_input_tokens=100,
    )
    theirs = sum(litellm_loaded.cost_per_token(model=model, usage_object=usage))
    target = CallTarget("m", model)
    ours = prices.cost_usd(target, 1000, 500, PARTS)
    assert ours == pytest.approx(theirs, rel=1e-9)
    # The litellm client records the lean client's number, exactly.
    assert litellm_client.cost_of(litellm_loaded, target, 1000, 500, PARTS) == ours


def test_a_profiles_prices_price_the_parts(litellm_loaded: Any) -> None:
    target = CostPer1k(
        input=1.0, output=2.0, cached_input=0.5, cache_write=1.25, reasoning=3.0
    ).priced(CallTarget("p", "openai/fake-model"))
    parts = TokenDetails(reasoning_tokens=400, cached_input_tokens=200, cache_write_tokens=100)
    hand = (700 * 1.0 + 200 * 0.5 + 100 * 1.25 + 600 * 2.0 + 400 * 3.0) / 1000
    assert prices.cost_usd(target, 1000, 1000, parts) == pytest.approx(hand, rel=1e-12)
    assert litellm_client.cost_of(litellm_loaded, target, 1000, 1000, parts) == pytest.approx(
        hand, rel=1e-12
    )
    # A profile without the new keys prices every part at its input or output price.
    plain = CostPer1k(input=1.0, output=2.0).priced(CallTarget("p", "openai/fake-model"))
    assert prices.cost_usd(plain, 1000, 1000, parts) == pytest.approx(3.0)
    # The profile wins over the map, for every part.
    mapped = CostPer1k(input=1.0, output=2.0).priced(CallTarget("p", "gpt-5"))
    assert prices.cost_usd(mapped, 1000, 1000, PARTS) == pytest.approx(3.0)


def test_a_part_reported_larger_than_its_whole_is_cut_to_it() -> None:
    target = CostPer1k(input=1.0, output=2.0, cached_input=0.5, reasoning=3.0).priced(
        CallTarget("p", "m")
    )
    too_many = TokenDetails(reasoning_tokens=50, cached_input_tokens=40, cache_write_tokens=40)
    # All 10 input tokens cached (none left to write), all 5 output tokens thinking.
    assert prices.cost_usd(target, 10, 5, too_many) == pytest.approx((10 * 0.5 + 5 * 3.0) / 1000)


def test_cost_per_1k_takes_the_new_keys_and_refuses_bad_ones() -> None:
    cost = CostPer1k.model_validate({"input": 1, "output": 2, "cached_input": 0.1})
    assert (cost.cached_input, cost.cache_write, cost.reasoning) == (0.1, None, None)
    target = cost.priced(CallTarget("p", "m"))
    assert (target.cost_per_1k_cached_input, target.cost_per_1k_reasoning) == (0.1, None)
    with pytest.raises(ValidationError, match="reasoning"):
        CostPer1k.model_validate({"input": 1, "output": 2, "reasoning": -1})
    with pytest.raises(ValidationError, match="cached"):
        CostPer1k.model_validate({"input": 1, "output": 2, "cached": 0.1})


def test_a_model_only_litellms_lookup_prices_is_priced_by_litellm(litellm_loaded: Any) -> None:
    model = "bedrock/converse/us.amazon.nova-pro-v1:0"
    target = CallTarget("b", model)
    assert prices.cost_usd(target, 1000, 500) is None
    theirs = sum(
        litellm_loaded.cost_per_token(model=model, prompt_tokens=1000, completion_tokens=500)
    )
    assert litellm_client.cost_of(litellm_loaded, target, 1000, 500) == pytest.approx(theirs)


# -- the parts read from a call's usage, and reasoning tokens counted when not reported --


def test_reasoning_tokens_are_counted_from_the_thinking_when_not_reported(
    litellm_loaded: Any,
) -> None:
    usage = {"prompt_tokens": 9, "completion_tokens": 100}
    counted = litellm_loaded.token_counter(model="openai/fake-model", text=THOUGHT)
    found = tokens.details("openai/fake-model", usage, THOUGHT, 100)
    assert found == TokenDetails(counted, None, None, True)
    # Never more than the output tokens the call reported.
    assert tokens.details("openai/fake-model", usage, THOUGHT, 3).reasoning_tokens == 3
    # The provider's own count wins; a reply that did not think has none.
    reported = {**usage, "completion_tokens_details": {"reasoning_tokens": 7}}
    assert tokens.details("m", reported, THOUGHT, 100) == TokenDetails(7, None, None, False)
    assert tokens.details("m", usage, "", 100) == TokenDetails()


def test_cache_writes_are_read_from_each_providers_shape(litellm_loaded: Any) -> None:
    # Anthropic's usage as litellm gives it (prompt_tokens with the cache reads and writes).
    usage = litellm_loaded.Usage(prompt_tokens=100, completion_tokens=20, total_tokens=120,
                                 cache_creation_input_tokens=6, cache_read_input_tokens=4)  # fmt: skip
    assert tokens.details("m", usage, "", 20) == TokenDetails(None, 4, 6, False)
    openai = {"prompt_tokens_details": {"cached_tokens": 4, "cache_write_tokens": 6}}
    assert tokens.details("m", openai, "", None) == TokenDetails(None, 4, 6, False)
    anthropic = {"cache_read_input_tokens": 4, "cache_creation_input_tokens": 6}
    assert tokens.details("m", anthropic, "", None) == TokenDetails(None, 4, 6, False)
    bedrock = {"prompt_tokens_details": {"cache_creation_tokens": 6}}
    assert tokens.details("m", bedrock, "", None).cache_write_tokens == 6
    # litellm fills a zero where the provider said nothing: no write.
    assert tokens.details("m", {"prompt_tokens_details": {"cache_write_tokens": 0}}, "", None) == (
        TokenDetails()
    )


# -- both clients, against the fake server --


def _call(
    server: FakeLLMServer, client: str, stream: bool, model: str, **cost: float
) -> Completion:
    target = CallTarget(
        "m", model, server.base_url, api_key=FAKE_KEY, client=client, **cost
    )  # fmt: skip
    return asyncio.run(acomplete(target, MESSAGES, {}, stream=stream))


PROFILE_PRICES = {
    "cost_per_1k_input": 1.0,
    "cost_per_1k_output": 2.0,
    "cost_per_1k_cached_input": 0.5,
    "cost_per_1k_cache_write": 1.25,
    "cost_per_1k_reasoning": 3.0,
}


@pytest.mark.parametrize(
    "rule",
    [
        Rule(reply="Paris.", reasoning=THOUGHT, cached_tokens=2, cache_write_tokens=3),
        Rule(reply="Paris.", reasoning=THOUGHT, reasoning_tokens_reported=False),
        Rule(reply=f"<think>{THOUGHT}</think>Paris."),
    ],
    ids=["reported", "thinking-apart-not-counted", "thinking-inline"],
)
@pytest.mark.parametrize("stream", [False, True])
def test_both_clients_record_the_same_parts_and_cost(
    fake_llm: FakeLLMServer, litellm_loaded: Any, rule: Rule, stream: bool
) -> None:
    fake_llm.add_rule(rule)
    lean, other = (
        _call(fake_llm, client, stream, "openai/fake-model", **PROFILE_PRICES)
        for client in ("auto", "litellm")
    )
    assert _measured(lean) == _measured(other)
    assert lean.reasoning == THOUGHT and lean.reasoning_tokens
    assert lean.reasoning_tokens_estimated is (
        rule.reasoning is None or not rule.reasoning_tokens_reported
    )
    assert lean.input_tokens is not None and lean.output_tokens is not None
    cached, written = rule.cached_tokens or 0, rule.cache_write_tokens or 0
    assert (lean.cached_input_tokens, lean.cache_write_tokens) == (
        rule.cached_tokens,
        rule.cache_write_tokens,
    )
    thought = lean.reasoning_tokens
    hand = (
        (lean.input_tokens - cached - written) * 1.0
        + cached * 0.5
        + written * 1.25
        + (lean.output_tokens - thought) * 2.0
        + thought * 3.0
    ) / 1000
    assert lean.cost_usd == pytest.approx(hand, rel=1e-12)


def test_both_clients_price_cached_tokens_at_the_maps_rate(
    fake_llm: FakeLLMServer, litellm_loaded: Any
) -> None:
    """A model of the map the lean client calls (gpt-4o: cache reads at half the input price)."""
    fake_llm.add_rule(Rule(reply="Paris.", cached_tokens=5))
    lean, other = (
        _call(fake_llm, client, False, "openai/gpt-4o") for client in ("auto", "litellm")
    )
    assert _measured(lean) == _measured(other)
    entry = prices.priced_entry("gpt-4o")
    assert entry is not None and lean.input_tokens is not None and lean.output_tokens
    hand = (
        (lean.input_tokens - 5) * entry["input_cost_per_token"]
        + 5 * entry["cache_read_input_token_cost"]
        + lean.output_tokens * entry["output_cost_per_token"]
    )
    assert lean.cost_usd == pytest.approx(hand, rel=1e-12)
