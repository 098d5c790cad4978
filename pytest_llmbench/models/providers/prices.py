"""Prices and model facts read as data from litellm's own price map, without importing litellm.

The map (``model_prices_and_context_window_backup.json``) ships inside the installed litellm
package; reading it costs tens of milliseconds, importing litellm seconds. A profile's own
``cost_per_1k`` always wins over it.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.util
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .completion import CallTarget, TokenDetails

MAP_FILE = "model_prices_and_context_window_backup.json"


@functools.lru_cache(maxsize=1)
def price_map() -> dict[str, Any]:
    """litellm's price map as shipped (empty when litellm or the file is missing)."""
    spec = importlib.util.find_spec("litellm")
    folders = list(spec.submodule_search_locations or []) if spec else []
    for folder in folders:
        path = Path(folder) / MAP_FILE
        if path.is_file():
            with path.open(encoding="utf-8") as handle:
                data = json.load(handle)
            return {key: value for key, value in data.items() if isinstance(value, dict)}
    return {}


@functools.lru_cache(maxsize=1)
def _providers() -> frozenset[str]:
    return frozenset(
        str(entry["litellm_provider"])
        for entry in price_map().values()
        if isinstance(entry.get("litellm_provider"), str)
    )


def is_provider(name: str) -> bool:
    """Whether ``name`` is a provider prefix litellm's map knows (``anthropic``, ``openai``)."""
    return name in _providers()


def provider_of(model_id: str) -> str | None:
    """The provider of a bare model name by the map (``gpt-4o-mini``: ``openai``), else None."""
    entry = price_map().get(model_id)
    provider = entry.get("litellm_provider") if entry else None
    return provider if isinstance(provider, str) else None


@functools.lru_cache(maxsize=256)
def model_info(model_id: str) -> dict[str, Any] | None:
    """The map's entry for ``model_id``: by the id as written, else without its provider prefix
    (``openai/gpt-4o`` is ``gpt-4o``), else by its last part
    (``bedrock/converse/us.amazon.nova-pro-v1:0``), as litellm looks models up."""
    found = price_map()
    candidates = (model_id, model_id.partition("/")[2], model_id.rpartition("/")[2])
    return next((found[name] for name in candidates if name and name in found), None)


@functools.lru_cache(maxsize=256)
def priced_entry(model_id: str) -> dict[str, Any] | None:
    """The map's entry that prices ``model_id``, as litellm's ``cost_per_token`` finds it: by
    the id as written, else without its provider prefix when the entry is that provider's
    (``openai/gpt-4o`` is ``gpt-4o``; ``hosted_vllm/gpt-4o`` and ``openai/deepseek-chat`` are
    unpriced: another provider's price is no price)."""
    found = price_map()
    entry: dict[str, Any] | None = found.get(model_id)
    if entry is not None:
        return entry
    head, sep, rest = model_id.partition("/")
    prefixed: dict[str, Any] = found.get(rest, {}) if sep else {}
    owner = prefixed.get("litellm_provider")
    return prefixed if owner in (head, f"text-completion-{head}") else None


@dataclass(frozen=True)
class Rates:
    """What one token of each part of a call costs, in USD per ``per_tokens`` tokens."""

    input: float
    output: float
    cached_input: float
    cache_write: float
    reasoning: float
    per_tokens: int = 1


def rates(target: CallTarget, batched: bool = False) -> Rates | None:
    """The prices of ``target``'s calls: the profile's ``cost_per_1k``, else the map's, else
    None (unknown); ``batched``: of a call answered through a provider's batch API
    (:func:`batch_rates`).

    A part without a price of its own costs what litellm charges for it: cached input and
    cache writes the input price, reasoning the output price. From the map they are
    ``cache_read_input_token_cost``, ``cache_creation_input_token_cost`` and
    ``output_cost_per_reasoning_token``; from a profile ``cached_input``, ``cache_write`` and
    ``reasoning``."""
    if batched:
        return batch_rates(target)[0]
    if target.cost_per_1k_input is not None and target.cost_per_1k_output is not None:
        given, out = target.cost_per_1k_input, target.cost_per_1k_output
        return Rates(
            given,
            out,
            _or(target.cost_per_1k_cached_input, given),
            _or(target.cost_per_1k_cache_write, given),
            _or(target.cost_per_1k_reasoning, out),
            per_tokens=1000,
        )
    entry = priced_entry(target.model_id)
    if entry is None:
        return None
    per_input = _map_rate(entry, "input_cost_per_token")
    per_output = _map_rate(entry, "output_cost_per_token")
    if per_input is None or per_output is None:
        return None
    return Rates(
        per_input,
        per_output,
        _or(_map_rate(entry, "cache_read_input_token_cost"), per_input),
        _or(_map_rate(entry, "cache_creation_input_token_cost"), per_input),
        _or(_map_rate(entry, "output_cost_per_reasoning_token"), per_output),
    )


#: the price map's batch key of each part of a call, and the live key it halves without one
_BATCH_KEYS = (
    ("input_cost_per_token_batches", "input"),
    ("output_cost_per_token_batches", "output"),
    ("cache_read_input_token_cost_batches", "cached_input"),
    ("cache_creation_input_token_cost_batches", "cache_write"),
    ("output_cost_per_reasoning_token_batches", "reasoning"),
)


def batch_rates(target: CallTarget) -> tuple[Rates | None, bool]:
    """The prices of ``target``'s calls answered through a batch API, and whether they are
    estimated by litellm's rule (half the live price) for want of a batch price.

    The profile's ``cost_per_1k_batch`` wins (a part it leaves out costs its batch input or
    output price, as in ``cost_per_1k``). A profile with only ``cost_per_1k`` prices its batch
    calls at half of those (the profile's prices replace the map's). Else the map's
    ``*_batches`` keys of the entry that prices the model (:func:`priced_entry`), read as
    litellm's ``batch_cost_calculator`` reads them: with a batch input price, cached input and
    cache writes without batch keys of their own cost that price; without one, each part
    costs half its live price; output without a batch key costs half the live output price,
    and reasoning tokens the batch output price. Estimated when the input or output price is
    halved so. None: no live price either."""
    given = target.cost_per_1k_batch
    if given is not None:
        return (
            Rates(
                given.input,
                given.output,
                _or(given.cached_input, given.input),
                _or(given.cache_write, given.input),
                _or(given.reasoning, given.output),
                per_tokens=1000,
            ),
            False,
        )
    live = rates(target)
    if live is None:
        return None, False
    entry = priced_entry(target.model_id) if live.per_tokens == 1 else None  # the map's
    if entry is None:
        return dataclasses.replace(live, per_tokens=live.per_tokens * 2), True
    found = {part: _map_rate(entry, key) for key, part in _BATCH_KEYS}

    def part(name: str) -> float:
        value = found[name]
        return float(getattr(live, name)) / 2 if value is None else value

    # As litellm's batch_cost_calculator: with a batch input price, cached input and cache
    # writes without batch keys of their own are input at that price; without one, every part
    # costs half its live price.
    batch_input = found["input"]
    output = part("output")
    reasoning = found["reasoning"]
    prices = Rates(
        part("input"),
        output,
        _or(found["cached_input"], batch_input)
        if batch_input is not None
        else part("cached_input"),
        _or(found["cache_write"], batch_input) if batch_input is not None else part("cache_write"),
        output if reasoning is None else reasoning,
    )
    return prices, found["input"] is None or found["output"] is None


def batch_price_estimated(target: CallTarget) -> bool:
    """Whether ``target``'s batch price is litellm's rule (half the live price): neither the
    profile (``cost_per_1k_batch``) nor the price map gives one."""
    return batch_rates(target)[1]


def _or(value: float | None, fallback: float) -> float:
    return fallback if value is None else value


def _map_rate(entry: dict[str, Any], key: str) -> float | None:
    """The map's ``key`` price (0 is a price), else None."""
    value = entry.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def cost_usd(
    target: CallTarget,
    input_tokens: int | None,
    output_tokens: int | None,
    details: TokenDetails | None = None,
    *,
    batched: bool = False,
) -> float | None:
    """USD of a call of that size: the profile's prices, else the map's, else None (unknown);
    ``batched``: answered through a batch API, at the batch prices (:func:`batch_rates`).

    The parts in ``details`` are priced at their own rates (:func:`rates`) and the rest at the
    input and output prices: cached input tokens and cache writes are part of the input
    tokens, reasoning tokens part of the output tokens, never counted twice (a part reported
    larger than its whole is cut to it)."""
    if input_tokens is None or output_tokens is None:
        return None
    prices = rates(target, batched)
    if prices is None:
        return None
    return priced(prices, input_tokens, output_tokens, details or TokenDetails())


def priced(rates: Rates, input_tokens: int, output_tokens: int, details: TokenDetails) -> float:
    """USD of ``input_tokens`` and ``output_tokens`` of which ``details`` are priced apart."""
    cached = min(details.cached_input_tokens or 0, input_tokens)
    written = min(details.cache_write_tokens or 0, input_tokens - cached)
    thought = min(details.reasoning_tokens or 0, output_tokens)
    spent = (
        (input_tokens - cached - written) * rates.input
        + cached * rates.cached_input
        + written * rates.cache_write
        + (output_tokens - thought) * rates.output
        + thought * rates.reasoning
    )
    return spent / rates.per_tokens if rates.per_tokens != 1 else spent


def supports_vision(model_id: str) -> bool | None:
    """The map's ``supports_vision`` for ``model_id``; None when it lacks the model or flag."""
    entry = model_info(model_id)
    flag = entry.get("supports_vision") if entry else None
    return flag if isinstance(flag, bool) else None
