"""Deterministic assertions that score a model's answer text.

An eval case lists ``assert:`` items. :func:`parse_assertion` turns each into an
:class:`Assertion` at collection time (raising :class:`AssertionSpecError` for a bad one), and
:func:`evaluate` checks an answer against it, giving a :class:`Verdict`. Any type can be negated
with a ``not-`` prefix. Trouble that is not about the answer (no value to compare with, a python
check that raises, an unreadable schema file) gives a failed verdict that negation leaves failed.

This module holds the parser, the registry of types and the evaluation; the values live in
:mod:`.assertion_base`, the checkers in :mod:`.text_checks`, :mod:`.structured_checks` and
:mod:`.python_checks`; the limits on latency, cost and tokens in :mod:`.performance` (a value
not measured gives an *unchecked* verdict, left out of the score).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from .base import (
    Assertion,
    AssertionContext,
    AssertionSpecError,
    CheckFailed,
    NotMeasured,
    Outcome,
    TypeSpec,
    Verdict,
    is_number,
)
from .communicated import check_communicated, communicated_value
from .final_state import STATE_TYPES, check_state_elsewhere, parse_state_assertion
from .judged import (
    JUDGE_TYPES,
    SELECT_BEST_TYPES,
    SIMILARITY_KEYS,
    GradedSpecError,
    parse_embedding_spec,
    rouge_threshold,
    scope_refusal,
)
from .model_graded import judge_keys, parse_judged
from .performance import (
    PERFORMANCE_TYPES,
    check_cost,
    check_finish_reason,
    check_latency,
    check_tokens,
    finish_reason_value,
    parse_performance,
)
from .python import check_choice, check_engine_graded, check_python, python_value
from .structured import NUMBER_POSITIONS, check_json, check_numeric, numeric_value, schema_value
from .text import (
    check_equals,
    check_regex,
    check_similarity,
    check_starts_with,
    equals_value,
    list_type,
    regex_value,
    substring_checker,
    text_value,
)
from .tool_calls import (
    TOOL_CALL_TYPES,
    check_no_tool_call,
    check_tool_call,
    check_tool_call_f1,
    check_tool_calls,
    check_valid_tool_call,
    parse_tool_call_assertion,
)

__all__ = [
    "KNOWN_TYPES",
    "Assertion",
    "AssertionContext",
    "AssertionSpecError",
    "Verdict",
    "evaluate",
    "parse_assertion",
    "score_verdicts",
]

_KEYS = ("type", "value", "weight", "tolerance", "rel_tolerance", "threshold", "position")
#: The allowed (low, high) of each numeric key; None is unbounded.
_RANGES: dict[str, tuple[float, float | None]] = {
    "weight": (0.0, None),
    "tolerance": (0.0, None),
    "rel_tolerance": (0.0, None),
    "threshold": (0.0, 1.0),
}
#: The allowed words of each word-valued key.
_CHOICES: dict[str, tuple[str, ...]] = {"position": NUMBER_POSITIONS}


# --- parsing ---------------------------------------------------------------------------------


def parse_assertion(raw: object) -> Assertion:
    """Parse one ``assert:`` item: a bare type name, or a mapping with ``type`` and extras.

    Raises :class:`AssertionSpecError` naming the offending key for anything wrong.
    """
    if isinstance(raw, str):
        raw = {"type": raw}
    elif not isinstance(raw, Mapping):
        kind = type(raw).__name__
        raise AssertionSpecError(f"an assertion must be a type name or a mapping, got {kind}")
    if _base_name(raw.get("type")) in _agent_types():
        return _parse_agent(raw)
    if _base_name(raw.get("type")) in STATE_TYPES:
        return parse_state_assertion(raw)
    type_name, base = _split_type(raw.get("type"))
    if base in TOOL_CALL_TYPES:
        return parse_tool_call_assertion(raw, type_name, base)
    if "scope" in raw and base not in JUDGE_TYPES:
        raise AssertionSpecError(scope_refusal(base, str(raw["scope"])), "scope")
    if base in PERFORMANCE_TYPES:
        return parse_performance(raw, type_name)
    if base in JUDGE_TYPES or base == "similarity":
        return _parse_graded(raw, type_name, base)
    spec = TYPES[base]
    _check_keys(raw, base, spec)
    value = raw.get("value")
    if value is None and spec.value_rule == "required":
        message = f"{base} needs a value ({spec.hint}), so it cannot be a bare type name"
        raise AssertionSpecError(message, "value")
    if value is not None:
        if spec.parse_value is None:
            raise AssertionSpecError(f"{base} takes no value", "value")
        value = spec.parse_value(base, value)
    weight = _number_key(raw, "weight") if "weight" in raw else 1.0
    options = {key: _option_key(raw, key) for key in sorted(spec.options & raw.keys())}
    needs_value = value is None and spec.value_rule != "none"
    return Assertion(
        type_name, base, type_name != base, value, weight, options, needs_value=needs_value
    )


def _base_name(type_name: Any) -> str | None:
    return type_name.removeprefix("not-") if isinstance(type_name, str) else None


def _agent_types() -> frozenset[str]:
    from .agent_parse import AGENT_TYPES

    return AGENT_TYPES


def _parse_agent(raw: Mapping[str, Any]) -> Assertion:
    """An agent check; its own parser names the offending key."""
    from .agent_parse import parse_agent_assertion

    try:
        check = parse_agent_assertion(raw)
    except ValueError as exc:
        raise AssertionSpecError(str(exc), getattr(exc, "field", None)) from None
    return Assertion(
        check.type, check.base_type, check.negate, check.value, check.weight, agent_check=check
    )


def _parse_graded(raw: Mapping[str, Any], type_name: str, base: str) -> Assertion:
    """A judged assertion, or ``similarity``: their own keys, and no ``not-`` prefix."""
    if type_name != base:
        raise AssertionSpecError(f"{base} cannot be negated with not-", "type")
    extra = judge_keys(base) if base in JUDGE_TYPES else SIMILARITY_KEYS
    allowed = ("type", "value", "weight", "threshold", *sorted(extra))
    unknown = sorted(str(key) for key in raw if key not in allowed)
    if unknown:
        names = ", ".join(repr(key) for key in unknown)
        message = f"unknown key {names} in {base} assertion; allowed keys: {', '.join(allowed)}"
        raise AssertionSpecError(message, unknown[0])
    spec = TYPES[base]
    value = raw.get("value")
    if value is None and spec.value_rule == "required":
        raise AssertionSpecError(f"{base} needs a value ({spec.hint})", "value")
    if value is not None:
        if spec.parse_value is None:
            raise AssertionSpecError(f"{base} takes no value", "value")
        value = spec.parse_value(base, value)
    weight = _number_key(raw, "weight") if "weight" in raw else 1.0
    needs_value = value is None and spec.value_rule != "none"
    try:
        if base in JUDGE_TYPES:
            graded = parse_judged(base, raw)
            if base in SELECT_BEST_TYPES:
                from .select_best import parse_select_best

                graded = parse_select_best(graded, raw)
            return Assertion(
                type_name, base, False, value, weight, {}, graded, needs_value=needs_value
            )
        embedding = parse_embedding_spec(raw)
        options = {} if embedding else {"threshold": rouge_threshold(raw)}
    except GradedSpecError as exc:
        raise AssertionSpecError(str(exc), exc.field) from None
    return Assertion(
        type_name, base, False, value, weight, options, embedding, needs_value=needs_value
    )


def _split_type(type_name: Any) -> tuple[str, str]:
    if type_name is None:
        raise AssertionSpecError("assertion has no 'type'", "type")
    if not isinstance(type_name, str):
        raise AssertionSpecError(f"assertion type must be a string, got {type_name!r}", "type")
    base = type_name.removeprefix("not-")
    if base not in TYPES:
        known = ", ".join(sorted(TYPES))
        message = (
            f"unknown assertion type {type_name!r}; known types: {known} "
            "(any but the model-graded ones and latency, cost, tokens may take not-)"
        )
        raise AssertionSpecError(message, "type")
    return type_name, base


def _check_keys(raw: Mapping[str, Any], base: str, spec: TypeSpec) -> None:
    unknown = sorted(str(key) for key in raw if key not in _KEYS)
    if unknown:
        names = ", ".join(repr(key) for key in unknown)
        message = f"unknown key {names} in assertion; allowed keys: {', '.join(_KEYS)}"
        raise AssertionSpecError(message, unknown[0])
    typed = _RANGES.keys() | _CHOICES.keys()
    for key in sorted((raw.keys() & typed) - spec.options - {"weight"}):
        users = ", ".join(name for name, other in TYPES.items() if key in other.options)
        raise AssertionSpecError(f"{key!r} does not apply to {base} (only to {users})", key)


def _option_key(raw: Mapping[str, Any], key: str) -> float | str:
    if key not in _CHOICES:
        return _number_key(raw, key)
    value, allowed = raw[key], _CHOICES[key]
    if value not in allowed:
        raise AssertionSpecError(f"{key} must be one of {', '.join(allowed)}, got {value!r}", key)
    return str(value)


def _number_key(raw: Mapping[str, Any], key: str) -> float:
    value = raw[key]
    if not is_number(value) or not math.isfinite(value):
        raise AssertionSpecError(f"{key} must be a number, got {value!r}", key)
    low, high = _RANGES[key]
    if value < low or (high is not None and value > high):
        allowed = f">= {low:g}" if high is None else f"between {low:g} and {high:g}"
        raise AssertionSpecError(f"{key} must be {allowed}, got {value!r}", key)
    return float(value)


# --- evaluation ------------------------------------------------------------------------------


def evaluate(assertion: Assertion, output: str, context: AssertionContext) -> Verdict:
    """Check ``output`` against ``assertion``; never raises for a bad answer or user code."""
    output = "" if output is None else output  # a tool-call-only answer has no text
    if assertion.agent_check is not None and assertion.base_type == "tool-count":
        from .agent import evaluate_reply_tool_count  # a function-calling reply's calls

        names = [str(call.get("name")) for call in context.tool_calls]
        return evaluate_reply_tool_count(assertion.agent_check, names)
    try:
        spec, value = _resolve(assertion, context)
        outcome = spec.check(value, output, assertion, context)
    except CheckFailed as exc:
        return Verdict(assertion.type, False, 0.0, assertion.weight, str(exc))
    except NotMeasured as exc:
        return Verdict(assertion.type, False, 0.0, assertion.weight, str(exc), unchecked=True)
    if assertion.negate:
        outcome = Outcome(not outcome.passed, f"negated: {outcome.reason}", 1.0 - outcome.score)
    return Verdict(assertion.type, outcome.passed, outcome.score, assertion.weight, outcome.reason)


def score_verdicts(verdicts: Sequence[Verdict]) -> float | None:
    """Weighted mean of the checked verdicts' scores (unchecked ones are left out); None when
    none is checked; the plain mean if all weigh 0."""
    verdicts = [verdict for verdict in verdicts if not verdict.unchecked]
    if not verdicts:
        return None
    total = sum(verdict.weight for verdict in verdicts)
    if total == 0:
        return sum(verdict.score for verdict in verdicts) / len(verdicts)
    return sum(verdict.score * verdict.weight for verdict in verdicts) / total


def case_failure(checked: Sequence[Verdict], score: float | None, threshold: float) -> str | None:
    """Why a case fails, or None: it passes when every checked verdict passes, or on partial
    credit when its weighted ``score`` reaches ``threshold``. The one rule of an item's verdict,
    used when it runs and when people's labels re-decide it after (:mod:`...results.effective`).
    """
    if all(verdict.passed for verdict in checked):
        return None
    if score is not None and score < threshold:
        return f"score {score:.3f} < threshold {threshold:g}"
    return None


def _resolve(assertion: Assertion, context: AssertionContext) -> tuple[TypeSpec, Any]:
    spec = TYPES.get(assertion.base_type)
    if spec is None:
        raise CheckFailed(f"unknown assertion type {assertion.base_type!r}")
    if assertion.value is not None or spec.value_rule == "none":
        return spec, assertion.value
    if spec.value_rule == "defaults" and context.expected is not None:
        return spec, context.expected
    raise CheckFailed(f"{assertion.type} has no value and the case has no expected")


# --- the registry ----------------------------------------------------------------------------

TYPES: dict[str, TypeSpec] = {
    "equals": TypeSpec(check_equals, "defaults", equals_value),
    "contains": TypeSpec(substring_checker("one", False), "defaults", text_value),
    "icontains": TypeSpec(substring_checker("one", True), "defaults", text_value),
    "contains-any": list_type("any", fold=False),
    "contains-all": list_type("all", fold=False),
    "icontains-any": list_type("any", fold=True),
    "icontains-all": list_type("all", fold=True),
    "regex": TypeSpec(check_regex, "defaults", regex_value),
    "starts-with": TypeSpec(check_starts_with, "defaults", text_value),
    # everything said to the user (a conversation's replies), by tau2-bench's communicate_info
    "communicated": TypeSpec(
        check_communicated, "required", communicated_value, "a string or a list of strings"
    ),
    "is-json": TypeSpec(check_json, "none"),
    "json-schema": TypeSpec(check_json, "required", schema_value, "a schema or a file path"),
    "numeric": TypeSpec(
        check_numeric,
        "defaults",
        numeric_value,
        options=frozenset({"tolerance", "rel_tolerance", "position"}),
    ),
    "similarity": TypeSpec(check_similarity, "defaults", text_value),
    "llm-rubric": TypeSpec(check_engine_graded, "required", text_value, "the rubric"),
    "closed-qa": TypeSpec(check_engine_graded, "required", text_value, "the criterion"),
    "factuality": TypeSpec(check_engine_graded, "defaults", text_value),
    "jury": TypeSpec(check_engine_graded, "none"),
    "faithfulness": TypeSpec(check_engine_graded, "none"),
    "answer-relevance": TypeSpec(check_engine_graded, "none"),
    "context-recall": TypeSpec(check_engine_graded, "defaults", text_value),
    "context-precision": TypeSpec(check_engine_graded, "none"),
    "model-graded": TypeSpec(check_engine_graded, "none"),
    "pairwise": TypeSpec(check_engine_graded, "none", text_value),  # value: what "better" means
    "select-best": TypeSpec(check_engine_graded, "none", text_value),  # value: what "best" means
    "choice": TypeSpec(check_choice, "none"),
    "latency": TypeSpec(check_latency, "none"),
    "cost": TypeSpec(check_cost, "none"),
    "tokens": TypeSpec(check_tokens, "none"),
    "finish-reason": TypeSpec(
        check_finish_reason,
        "required",
        finish_reason_value,
        "stop, length, tool_calls or content_filter",
    ),
    "python": TypeSpec(
        check_python,
        "required",
        python_value,
        "'module:function'",
        options=frozenset({"threshold"}),
    ),
    "tool-call": TypeSpec(check_tool_call, "required", hint="the tool's name"),
    "valid-tool-call": TypeSpec(check_valid_tool_call, "none"),
    "tool-call-f1": TypeSpec(check_tool_call_f1, "required", hint="the expected calls"),
    "no-tool-call": TypeSpec(check_no_tool_call, "none"),
    "tool-calls": TypeSpec(check_tool_calls, "none"),
    # checked on an agent's environment (final_state.evaluate_state), never on the answer
    "state-equals": TypeSpec(check_state_elsewhere, "none"),
    "state-subset": TypeSpec(check_state_elsewhere, "required", hint="the state's keys"),
}

#: The base assertion types; each may also be written with a ``not-`` prefix.
KNOWN_TYPES: frozenset[str] = frozenset(TYPES)
