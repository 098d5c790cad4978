"""The ``latency``, ``cost`` and ``tokens`` assertions: limits on what the model call measured.

They read the item's :class:`~.base.CallMeasures`, not the answer text. Each is an upper bound
(the value passes when at most the limit), takes a ``weight`` like any assertion and no ``not-``
prefix (a lower bound on latency or cost guards nothing). A value that was not measured makes
the verdict *unchecked* (:class:`~.base.NotMeasured`), never a pass: a batched answer's latency
and TTFT (:data:`BATCHED`), a cached answer's (no call was timed), a TTFT of a call that was not
streamed, a cost without a price.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from .base import (
    Assertion,
    AssertionContext,
    AssertionSpecError,
    CallMeasures,
    NotMeasured,
    Outcome,
    is_number,
    number_text,
    pass_fail,
    weight_of,
)

#: The performance types and, for each, its keys beyond ``type`` and ``weight``: the required
#: limit first, then the optional words with their allowed values (the first is the default).
PERFORMANCE_KEYS: dict[str, tuple[str, dict[str, tuple[Any, ...]]]] = {
    "latency": ("threshold", {"metric": ("total", "ttft")}),
    "cost": ("threshold", {"include_judges": (False, True)}),
    "tokens": ("max", {"which": ("output", "input", "total", "reasoning", "cached")}),
}
PERFORMANCE_TYPES = frozenset(PERFORMANCE_KEYS)
#: Why a batched answer's latency and TTFT are unchecked: the batch API answered it hours later.
BATCHED = "batched: latency says nothing of the model"


def parse_performance(raw: Mapping[str, Any], type_name: str) -> Assertion:
    """Parse a ``latency``, ``cost`` or ``tokens`` item; :class:`AssertionSpecError` names the
    offending key."""
    base = type_name.removeprefix("not-")
    if type_name != base:
        raise AssertionSpecError(f"{base} cannot be negated with not- (it is a limit)", "type")
    limit_key, words = PERFORMANCE_KEYS[base]
    allowed = ("type", limit_key, *words, "weight")
    unknown = sorted(str(key) for key in raw if key not in allowed)
    if unknown:
        names = ", ".join(repr(key) for key in unknown)
        message = f"unknown key {names} in {base} assertion; allowed keys: {', '.join(allowed)}"
        raise AssertionSpecError(message, unknown[0])
    if limit_key not in raw:
        raise AssertionSpecError(f"{base} needs {_LIMIT_HINT[base]}", limit_key)
    options: dict[str, Any] = {limit_key: _limit(raw, base, limit_key)}
    for key, choices in words.items():
        value = raw.get(key, choices[0])
        if value not in choices or type(value) is not type(choices[0]):
            shown = ", ".join(str(choice).lower() for choice in choices)
            raise AssertionSpecError(f"{key} must be one of {shown}, got {value!r}", key)
        options[key] = value
    weight = weight_of(raw)
    return Assertion(type_name, base, False, None, weight, options)


_LIMIT_HINT = {
    "latency": "a threshold: the most seconds the call may take",
    "cost": "a threshold: the most USD the call may cost",
    "tokens": "a max: the most tokens",
}


def _limit(raw: Mapping[str, Any], base: str, key: str) -> float | int:
    value = raw[key]
    if base == "tokens":
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise AssertionSpecError(f"max must be a whole number >= 0, got {value!r}", key)
        return value
    if not is_number(value) or not math.isfinite(value) or value < 0:
        unit = "seconds" if base == "latency" else "USD"
        raise AssertionSpecError(f"{key} must be a number of {unit} >= 0, got {value!r}", key)
    return float(value)


# --- checks ----------------------------------------------------------------------------------


def check_latency(
    value: Any, output: str, assertion: Assertion, context: AssertionContext
) -> Outcome:
    """The call's total time (``metric: total``) or time to first token (``ttft``)."""
    measures = _measures(context)
    metric = assertion.options["metric"]
    if measures.batched:
        raise NotMeasured(BATCHED)
    if measures.cached:
        raise NotMeasured("the answer came from the response cache: no call was timed")
    seconds = measures.latency_s if metric == "total" else measures.ttft_s
    if seconds is None:
        raise NotMeasured(
            "no time to first token: the call was not streamed (--stream=all streams every call)"
            if metric == "ttft"
            else "no latency was measured"
        )
    name = "latency" if metric == "total" else "ttft"
    return _at_most(name, seconds, assertion.options["threshold"], " s")


def check_cost(value: Any, output: str, assertion: Assertion, context: AssertionContext) -> Outcome:
    """The model call's cost, plus the item's judge calls' with ``include_judges: true``."""
    measures = _measures(context)
    if measures.cost_usd is None:
        raise NotMeasured(
            f"cost unknown: no price for {context.model or 'the model'} "
            "(give its profile cost_per_1k)"
        )
    cost, name = measures.cost_usd, "cost"
    if assertion.options["include_judges"]:
        if measures.judge_cost is None and measures.judge_calls:
            raise NotMeasured("the judges' cost is unknown: no price for a judge model")
        cost, name = cost + (measures.judge_cost or 0.0), "cost with judges"
    return _at_most(name, cost, assertion.options["threshold"], " USD")


def check_tokens(
    value: Any, output: str, assertion: Assertion, context: AssertionContext
) -> Outcome:
    """The call's output, input or total tokens; or of them, the reasoning tokens (output
    tokens spent thinking) or the cached input tokens (read from the provider's prompt
    cache), unchecked when the provider reported none (a model that did not think)."""
    measures = _measures(context)
    which = assertion.options["which"]
    counts = {"input": measures.input_tokens, "output": measures.output_tokens}
    name = f"{which} tokens"
    if which == "total":
        known = [count for count in counts.values() if count is not None]
        count = sum(known) if len(known) == 2 else None
    elif which == "reasoning":
        count = measures.reasoning_tokens
        if count is None:
            raise NotMeasured(
                "no reasoning tokens: the provider reported none and no thinking came back"
            )
        name = "reasoning tokens (estimated)" if measures.reasoning_tokens_estimated else name
    elif which == "cached":
        count = measures.cached_input_tokens
        if count is None:
            raise NotMeasured("no cached input tokens: the provider reported none")
        name = "cached input tokens"
    else:
        count = counts[which]
    if count is None:
        raise NotMeasured(f"no {which} token count was reported or estimated")
    return _at_most(name, count, assertion.options["max"], "")


def _measures(context: AssertionContext) -> CallMeasures:
    if context.measures is None:
        raise NotMeasured("the answer carries no measurements")
    return context.measures


def _at_most(name: str, value: float, limit: float, unit: str) -> Outcome:
    shown, bound = number_text(value), number_text(limit)
    return pass_fail(
        value <= limit,
        f"{name} {shown}{unit} <= {bound}{unit}",
        f"{name} {shown}{unit} > {bound}{unit}",
    )


#: The finish reasons a ``finish-reason`` assertion may name: OpenAI's, as litellm gives every
#: provider's (``length``: ``max_tokens`` reached; ``content_filter``: the provider withheld it).
FINISH_REASONS = ("stop", "length", "tool_calls", "content_filter")


#: Other words servers use for the four (Anthropic's and Bedrock's through a lean path, Hugging
#: Face TGI, inspect_ai's names, the deprecated ``function_call``), read as them by the check.
FINISH_REASON_ALIASES = {
    "end_turn": "stop", "stop_sequence": "stop", "eos": "stop", "eos_token": "stop",
    "max_tokens": "length", "model_length": "length",
    "function_call": "tool_calls", "tool_use": "tool_calls",
    "safety": "content_filter", "refusal": "content_filter",
}  # fmt: skip


def finish_reason_value(base: str, value: Any) -> tuple[str, ...]:
    """A ``finish-reason`` value: one reason or a list of them, each of :data:`FINISH_REASONS`."""
    values = value if isinstance(value, list) else [value]
    unknown = [v for v in values if v not in FINISH_REASONS]
    if not values or unknown:
        allowed = ", ".join(FINISH_REASONS)
        shown = repr(unknown[0]) if unknown else "an empty list"
        raise AssertionSpecError(
            f"{base} needs one of {allowed} (or a list of them), got {shown}", "value"
        )
    return tuple(values)


def check_finish_reason(
    value: Any, output: str, assertion: Assertion, context: AssertionContext
) -> Outcome:
    """Why the model stopped is one of ``value``; a reply without a finish reason of its own
    (an agent's loop, log-likelihood scores) has nothing to check."""
    reason = _measures(context).finish_reason
    if reason is None:
        raise NotMeasured("no finish reason: the answer is not one reply of the model")
    allowed = " or ".join(value)
    read = FINISH_REASON_ALIASES.get(reason, reason)
    said = f"{reason!r} (read as {read!r})" if read != reason else repr(reason)
    return pass_fail(read in value, f"finished with {said}", f"finished with {said}, not {allowed}")
