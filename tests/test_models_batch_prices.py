"""Batch prices (models/providers/prices.py): the price map's ``*_batches`` keys, a profile's
``cost_per_1k_batch``, and litellm's rule (half the live price) where neither gives one, checked
against figures computed by hand from the map."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_llmbench.models import ProfileError, load_profiles
from pytest_llmbench.models.profiles import CostPer1k, ModelProfile
from pytest_llmbench.models.providers import prices
from pytest_llmbench.models.providers.completion import CallTarget, TokenDetails


def test_gpt_4o_mini_costs_half_in_a_batch_by_the_maps_batch_keys() -> None:
    target = CallTarget("m", "gpt-4o-mini")
    # 1000 · 1.5e-7 + 200 · 6e-7 live; 1000 · 7.5e-8 + 200 · 3e-7 in a batch
    assert prices.cost_usd(target, 1000, 200) == pytest.approx(0.00027, abs=1e-15)
    assert prices.cost_usd(target, 1000, 200, batched=True) == pytest.approx(0.000135, abs=1e-15)
    assert prices.batch_price_estimated(target) is False


def test_a_provider_prefix_finds_the_same_batch_keys() -> None:
    bare = prices.cost_usd(CallTarget("m", "gpt-4o-mini"), 1000, 200, batched=True)
    assert prices.cost_usd(CallTarget("m", "openai/gpt-4o-mini"), 1000, 200, batched=True) == bare
    # another provider's entry is no price, live or batch
    assert prices.rates(CallTarget("m", "hosted_vllm/gpt-4o-mini"), batched=True) is None


def test_claude_haiku_4_5_prices_each_part_at_its_batch_key() -> None:
    target = CallTarget("m", "claude-haiku-4-5")
    parts = TokenDetails(cached_input_tokens=400, cache_write_tokens=100)
    # input 5e-7, cache read 5e-8, cache write 6.25e-7, output 2.5e-6 (the map's *_batches)
    by_hand = 500 * 5e-7 + 400 * 5e-8 + 100 * 6.25e-7 + 300 * 2.5e-6
    assert by_hand == pytest.approx(0.0010825)
    got = prices.cost_usd(target, 1000, 300, parts, batched=True)
    assert got == pytest.approx(by_hand, rel=1e-12)
    live = prices.cost_usd(target, 1000, 300, parts)
    assert live == pytest.approx(500 * 1e-6 + 400 * 1e-7 + 100 * 1.25e-6 + 300 * 5e-6, rel=1e-12)


def test_gpt_5s_cached_and_reasoning_tokens_cost_their_batch_rates() -> None:
    target = CallTarget("m", "gpt-5")
    parts = TokenDetails(reasoning_tokens=300, cached_input_tokens=400)
    # input 6.25e-7, cache read 6.25e-8 (its batch key), output 5e-6; reasoning: the map has
    # no batch key for it, so the batch output price
    by_hand = 600 * 6.25e-7 + 400 * 6.25e-8 + 200 * 5e-6 + 300 * 5e-6
    assert prices.cost_usd(target, 1000, 500, parts, batched=True) == pytest.approx(by_hand)


def test_a_part_without_a_batch_key_costs_the_batch_input_price_as_litellm_charges_it() -> None:
    # gpt-4o-mini has input and output batch keys, none for cache reads: litellm's
    # batch_cost_calculator then charges cached input as input, at the batch input price
    target = CallTarget("m", "gpt-4o-mini")
    parts = TokenDetails(cached_input_tokens=400)
    by_hand = 1000 * 7.5e-8 + 200 * 3e-7
    assert prices.cost_usd(target, 1000, 200, parts, batched=True) == pytest.approx(by_hand)
    assert prices.batch_price_estimated(target) is False


_MODELS = (
    "gpt-4o-mini", "gpt-4o", "gpt-5", "claude-haiku-4-5", "anthropic/claude-haiku-4-5",
    "claude-sonnet-4-5", "azure/gpt-4o-mini", "gemini/gemini-2.5-flash",
)  # fmt: skip
#: (cached input, cache writes, reasoning) of 1000 input and 200 output tokens
_PARTS = ((0, 0, 0), (400, 0, 0), (400, 100, 0), (0, 0, 50), (300, 0, 80))


@pytest.mark.parametrize("model", _MODELS)
def test_a_batched_call_costs_what_litellms_batch_cost_calculator_charges(model: str) -> None:
    import os

    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    from litellm.cost_calculator import batch_cost_calculator
    from litellm.types.utils import (
        CompletionTokensDetailsWrapper,
        PromptTokensDetailsWrapper,
        Usage,
    )

    for cached, written, reasoning in _PARTS:
        usage = Usage(
            prompt_tokens=1000,
            completion_tokens=200,
            total_tokens=1200,
            prompt_tokens_details=PromptTokensDetailsWrapper(
                cached_tokens=cached, cache_creation_tokens=written
            ),
            completion_tokens_details=CompletionTokensDetailsWrapper(reasoning_tokens=reasoning),
        )
        if written:
            usage.cache_creation_input_tokens = written
        reference = sum(batch_cost_calculator(usage, model))
        parts = TokenDetails(reasoning or None, cached or None, written or None)
        ours = prices.cost_usd(CallTarget("m", model), 1000, 200, parts, batched=True)
        assert ours == pytest.approx(reference, rel=1e-9, abs=1e-15), (cached, written, reasoning)


def test_a_model_without_batch_keys_costs_half_by_litellms_rule() -> None:
    target = CallTarget("m", "azure/gpt-4o-mini")
    entry = prices.priced_entry("azure/gpt-4o-mini")
    assert entry is not None and "input_cost_per_token_batches" not in entry
    assert prices.batch_price_estimated(target) is True
    # (1000 · 1.5e-7 + 200 · 6e-7) / 2
    assert prices.cost_usd(target, 1000, 200, batched=True) == pytest.approx(0.000135)
    parts = TokenDetails(cached_input_tokens=400, reasoning_tokens=50)
    live = prices.cost_usd(target, 1000, 200, parts)
    assert live is not None
    assert prices.cost_usd(target, 1000, 200, parts, batched=True) == pytest.approx(live / 2)


def test_an_unpriced_model_has_no_batch_price_and_is_not_estimated() -> None:
    target = CallTarget("m", "hosted_vllm/some-local-model")
    assert prices.cost_usd(target, 1000, 200, batched=True) is None
    assert prices.batch_price_estimated(target) is False


def _profile(**keys: object) -> CallTarget:
    profile = ModelProfile(name="p", model="gpt-4o-mini", **keys)  # type: ignore[arg-type]
    return profile.priced(CallTarget("p", "gpt-4o-mini"))


def test_a_profiles_cost_per_1k_batch_wins_over_the_map() -> None:
    target = _profile(
        cost_per_1k=CostPer1k(input=0.001, output=0.002),
        cost_per_1k_batch=CostPer1k(input=0.0004, output=0.0008, cached_input=0.0001),
    )
    parts = TokenDetails(cached_input_tokens=400, reasoning_tokens=100)
    # 600 · 0.0004 + 400 · 0.0001 + 200 · 0.0008 (reasoning: the batch output price), per 1,000
    by_hand = (600 * 0.0004 + 400 * 0.0001 + 200 * 0.0008) / 1000
    assert prices.cost_usd(target, 1000, 200, parts, batched=True) == pytest.approx(by_hand)
    assert prices.cost_usd(target, 1000, 200) == pytest.approx((1000 * 0.001 + 200 * 0.002) / 1000)
    assert prices.batch_price_estimated(target) is False


def test_a_profiles_batch_price_alone_leaves_the_live_price_to_the_map() -> None:
    target = _profile(cost_per_1k_batch=CostPer1k(input=0.00001, output=0.00002))
    assert prices.cost_usd(target, 1000, 200) == pytest.approx(0.00027)
    assert prices.cost_usd(target, 1000, 200, batched=True) == pytest.approx(
        (1000 * 0.00001 + 200 * 0.00002) / 1000
    )


def test_a_profiles_live_price_alone_is_halved_not_the_maps_batch_price() -> None:
    target = _profile(cost_per_1k=CostPer1k(input=0.01, output=0.02))
    assert prices.cost_usd(target, 1000, 200, batched=True) == pytest.approx(
        (1000 * 0.01 + 200 * 0.02) / 1000 / 2
    )
    assert prices.batch_price_estimated(target) is True


def test_cost_per_1k_batch_is_read_and_checked_in_a_profile_file(tmp_path: Path) -> None:
    good = tmp_path / "good.yaml"
    good.write_text(
        "models:\n  a:\n    model: gpt-4o-mini\n"
        "    cost_per_1k_batch: {input: 0.0001, output: 0.0002, reasoning: 0.0003}\n"
    )
    profile = load_profiles([good]).models["a"]
    assert profile.cost_per_1k_batch == CostPer1k(input=0.0001, output=0.0002, reasoning=0.0003)
    bad = tmp_path / "bad.yaml"
    bad.write_text("models:\n  a:\n    model: m\n    cost_per_1k_batch: {input: -1, output: 0}\n")
    with pytest.raises(ProfileError) as info:
        load_profiles([bad])
    assert (info.value.line, "cost_per_1k_batch.input" in str(info.value)) == (4, True)
    typo = tmp_path / "typo.yaml"
    typo.write_text("models:\n  a:\n    model: m\n    cost_per_1k_batch: {input: 1, out: 2}\n")
    with pytest.raises(ProfileError, match=r"unknown key 'cost_per_1k_batch\.out'"):
        load_profiles([typo])
