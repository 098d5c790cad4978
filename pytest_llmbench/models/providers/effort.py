"""Reasoning effort: the values of the effort axis and the call parameters each provider takes.

An effort is a level (:data:`EFFORT_LEVELS`, OpenAI's ``reasoning_effort`` values) or a thinking
budget in tokens (an integer). How a model is sent one is its profile's ``effort:`` key
(:data:`EFFORT_MAPPINGS`):

- ``auto`` (the default): a level is ``reasoning_effort`` for every provider (litellm turns it
  into Anthropic's and Gemini's thinking budgets); a budget is ``thinking: {type: enabled,
  budget_tokens: N}`` for Anthropic, Gemini, Vertex AI and Bedrock (litellm's own shape) and
  refused for the others. A model litellm's price map does not mark ``supports_reasoning``
  is refused either way: it would get a parameter it ignores or rejects.
- ``reasoning_effort``: always ``reasoning_effort: <level>`` (a budget is refused);
- ``thinking_budget``: always ``thinking``: a budget as given, a level as litellm's budget for
  it (:data:`LEVEL_BUDGETS`), ``none`` as ``{type: disabled}``;
- ``enable_thinking``: ``extra_body: {chat_template_kwargs: {enable_thinking: false}}`` for
  ``none``, ``true`` for anything else (vLLM or SGLang serving Qwen3);
- ``passthrough``: ``reasoning_effort: <value>`` as given, never refused.

Pure: no network, no ``import litellm`` (the price map is read as data by :mod:`.prices`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from . import prices
from .routes import split_model

if TYPE_CHECKING:
    from ..profiles import ModelProfile

#: The effort levels, as OpenAI's ``reasoning_effort`` takes them, least first.
EFFORT_LEVELS = ("none", "minimal", "low", "medium", "high", "xhigh", "max")
#: How a profile maps an effort to call parameters (its ``effort:`` key); ``auto`` by default.
EFFORT_MAPPINGS = ("auto", "reasoning_effort", "thinking_budget", "enable_thinking", "passthrough")
#: litellm's thinking budget of each level (its ``DEFAULT_REASONING_EFFORT_*_THINKING_BUDGET``
#: for Anthropic; ``minimal`` is Anthropic's least budget, 1024), used by ``thinking_budget``.
LEVEL_BUDGETS: Mapping[str, int] = {
    "minimal": 1024,
    "low": 1024,
    "medium": 2048,
    "high": 4096,
    "xhigh": 8192,
    "max": 16384,
}
#: The providers whose litellm transformation takes ``thinking: {type, budget_tokens}``.
BUDGET_PROVIDERS = ("anthropic", "gemini", "vertex_ai", "vertex_ai_beta", "bedrock")
#: Anthropic refuses a thinking budget below this many tokens.
ANTHROPIC_MIN_BUDGET = 1024
#: The profile key that says how to send an effort (named in errors).
_FIX = (
    "set `effort:` in its profile to how it takes one (reasoning_effort, thinking_budget, "
    "enable_thinking), or `effort: passthrough` to send the value as reasoning_effort as it is"
)
_FIX_BUDGET = (
    "give a level, or set `effort: thinking_budget` in its profile to send the budget as "
    "`thinking`, or `effort: passthrough` to send it as reasoning_effort as it is"
)


class EffortError(ValueError):
    """An effort that is no effort, or that a model cannot be sent; the message says why."""


def parse_effort(value: object) -> str | int:
    """A level of :data:`EFFORT_LEVELS` (any case) or a budget of at least 1 token (an integer,
    or its digits as text); else :class:`EffortError` listing what is accepted."""
    if isinstance(value, int) and not isinstance(value, bool):
        if value >= 1:
            return value
    elif isinstance(value, str):
        word = value.strip().lower()
        if word in EFFORT_LEVELS:
            return word
        if word.isdigit() and int(word) >= 1:
            return int(word)
    raise EffortError(
        f"effort {value!r} is not one of {', '.join(EFFORT_LEVELS)} or a thinking budget in "
        "tokens (an integer of at least 1)"
    )


def effort_text(effort: str | int) -> str:
    """How an effort is written in labels, ids and tables: ``high``, ``8000``."""
    return str(effort)


def effort_params(
    profile: ModelProfile, effort: str | int, params: Mapping[str, Any]
) -> dict[str, Any]:
    """The call parameters that send ``effort`` to ``profile``'s model, to set over ``params``
    (the profile's and the case's: an ``extra_body`` there is kept, its ``chat_template_kwargs``
    too). :class:`EffortError` names the model and the fix when it cannot be sent."""
    mapping = profile.effort
    if mapping == "passthrough":
        return {"reasoning_effort": effort}
    if mapping == "enable_thinking":
        return {"extra_body": _template_kwargs(params, enable_thinking=effort != "none")}
    if mapping == "thinking_budget":
        return {"thinking": _thinking(effort)}
    if mapping == "reasoning_effort":
        if isinstance(effort, int):
            raise _refused(profile, effort, "takes a level (its profile says `effort: "
                           "reasoning_effort`), not a thinking budget", _FIX_BUDGET)  # fmt: skip
        return {"reasoning_effort": effort}
    return _auto(profile, effort)


def _auto(profile: ModelProfile, effort: str | int) -> dict[str, Any]:
    """``effort: auto``: by provider, for a model litellm's price map says reasons."""
    if not reasons(profile.model):
        raise _refused(
            profile, effort, "is not a reasoning model by litellm's price map (supports_reasoning)"
        )
    if isinstance(effort, str):
        return {"reasoning_effort": effort}
    provider = split_model(profile.model)[0]
    if provider not in BUDGET_PROVIDERS:
        raise _refused(
            profile, effort, f"takes a level, not a thinking budget (only {', '.join(BUDGET_PROVIDERS)} "
            "take a budget)"
        )  # fmt: skip
    if provider == "anthropic" and effort < ANTHROPIC_MIN_BUDGET:
        raise _refused(
            profile, effort, f"takes a thinking budget of at least {ANTHROPIC_MIN_BUDGET} tokens"
        )
    return {"thinking": _thinking(effort)}


def reasons(model_id: str) -> bool:
    """Whether litellm's price map marks ``model_id`` ``supports_reasoning``."""
    entry = prices.model_info(model_id)
    return bool(entry and entry.get("supports_reasoning") is True)


def _thinking(effort: str | int) -> dict[str, Any]:
    """litellm's ``thinking`` parameter for ``effort``."""
    if effort == "none":
        return {"type": "disabled"}
    budget = effort if isinstance(effort, int) else LEVEL_BUDGETS[effort]
    return {"type": "enabled", "budget_tokens": budget}


def _template_kwargs(params: Mapping[str, Any], **kwargs: Any) -> dict[str, Any]:
    """``params``' ``extra_body`` with ``kwargs`` set in its ``chat_template_kwargs``."""
    body = params.get("extra_body")
    body = dict(body) if isinstance(body, Mapping) else {}
    template = body.get("chat_template_kwargs")
    body["chat_template_kwargs"] = {**(template if isinstance(template, Mapping) else {}), **kwargs}
    return body


def _refused(profile: ModelProfile, effort: str | int, why: str, fix: str = _FIX) -> EffortError:
    return EffortError(
        f"effort {effort_text(effort)} for model {profile.name} ({profile.model}): it {why}; {fix}"
    )
