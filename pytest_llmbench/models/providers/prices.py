"""Prices and model facts read as data from litellm's own price map, without importing litellm.

The map (``model_prices_and_context_window_backup.json``) ships inside the installed litellm
package; reading it costs tens of milliseconds, importing litellm seconds. A profile's own
``cost_per_1k`` always wins over it.
"""

from __future__ import annotations

import functools
import importlib.util
import json
from pathlib import Path
from typing import Any

from .completion import CallTarget

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


def cost_usd(
    target: CallTarget, input_tokens: int | None, output_tokens: int | None
) -> float | None:
    """USD of a call of that size: the profile's prices, else the map's, else None (unknown)."""
    if input_tokens is None or output_tokens is None:
        return None
    if target.cost_per_1k_input is not None and target.cost_per_1k_output is not None:
        spent = input_tokens * target.cost_per_1k_input + output_tokens * target.cost_per_1k_output
        return spent / 1000
    entry = priced_entry(target.model_id)
    if entry is None:
        return None
    per_input, per_output = entry.get("input_cost_per_token"), entry.get("output_cost_per_token")
    if not isinstance(per_input, (int, float)) or not isinstance(per_output, (int, float)):
        return None
    return float(per_input) * input_tokens + float(per_output) * output_tokens


def supports_vision(model_id: str) -> bool | None:
    """The map's ``supports_vision`` for ``model_id``; None when it lacks the model or flag."""
    entry = model_info(model_id)
    flag = entry.get("supports_vision") if entry else None
    return flag if isinstance(flag, bool) else None
