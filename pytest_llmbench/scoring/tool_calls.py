"""Checks of a function-calling reply's tool calls (a plain file's ``tools:``), never run.

``tool-call`` passes when some call names the tool (and its arguments match as ``args_match``
says); ``valid-tool-call`` when every call names a declared tool with arguments valid against its
schema; ``tool-call-f1`` scores the calls against an expected list (precision and recall of an
optimal matching); ``tool-calls`` when the calls are exactly the expected ones in any order
(BFCL's check: a dataset's ``tool_calls`` column gives them, allowed values per argument);
``no-tool-call`` when the reply called nothing. Arguments are compared as JSON
values by :mod:`.trajectory`, the one comparator of calls.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .base import Assertion, AssertionContext, AssertionSpecError, Outcome, pass_fail
from .trajectory import ARGS_MATCH_MODES, ExpectedStep, describe_match, match_sequence

#: The function-calling assertion types.
TOOL_CALL_TYPES = frozenset(
    {"tool-call", "valid-tool-call", "tool-call-f1", "no-tool-call", "tool-calls"}
)
_KEYS = frozenset({"type", "value", "weight", "args", "args_match", "strings"})
#: How ``args_match: allowed`` compares strings: after BFCL's normalisation (the default) or as
#: written.
STRING_MODES = ("normalized", "exact")


@dataclass(frozen=True)
class ReplyCall:
    """One call of a reply: its name and its arguments parsed (None: not a JSON object)."""

    name: str
    raw_arguments: str

    @property
    def parsed(self) -> Mapping[str, Any] | None:
        """The arguments as a JSON object, or None when they are not one."""
        try:
            value = json.loads(self.raw_arguments or "{}")
        except ValueError:
            return None
        return value if isinstance(value, dict) else None

    @property
    def arguments(self) -> Mapping[str, Any] | None:
        """The arguments; None when they are not a JSON object (they match no expected args,
        but for ``args_match: ignore``)."""
        return self.parsed


def reply_calls(calls: Sequence[Mapping[str, Any]]) -> tuple[ReplyCall, ...]:
    """A completion's ``tool_calls`` (arguments as sent) as :class:`ReplyCall` values."""
    found = []
    for call in calls:
        arguments = call.get("arguments")
        text = arguments if isinstance(arguments, str) else json.dumps(arguments or {})
        found.append(ReplyCall(str(call.get("name")), text))
    return tuple(found)


# --- parsing ---------------------------------------------------------------------------------


def parse_tool_call_assertion(raw: Mapping[str, Any], type_name: str, base: str) -> Assertion:
    """A function-calling assertion; :class:`AssertionSpecError` naming the offending key."""
    unknown = sorted(str(key) for key in raw if key not in _KEYS)
    if unknown:
        allowed = ", ".join(sorted(_KEYS))
        raise AssertionSpecError(f"unknown key {unknown[0]!r} in {base}; allowed: {allowed}",
                                 unknown[0])  # fmt: skip
    strings = raw.get("strings", "normalized")
    if "strings" in raw and base in ("valid-tool-call", "no-tool-call"):
        raise AssertionSpecError("'strings' applies to tool-call, tool-calls and tool-call-f1 "
                                 "(how args_match: allowed compares strings)", "strings")  # fmt: skip
    if strings not in STRING_MODES:
        raise AssertionSpecError(f"strings must be one of {', '.join(STRING_MODES)}, got "
                                 f"{strings!r}", "strings")  # fmt: skip
    if base != "tool-call" and ({"args", "args_match"} & raw.keys()):
        key = "args" if "args" in raw else "args_match"
        raise AssertionSpecError(f"{key!r} applies to tool-call (tool-call-f1 and tool-calls "
                                 "take it per expected call)", key)  # fmt: skip
    weight = raw.get("weight", 1.0)
    if isinstance(weight, bool) or not isinstance(weight, (int, float)) or weight < 0:
        raise AssertionSpecError(f"weight must be a number >= 0, got {weight!r}", "weight")
    value = _value(base, raw)
    options = {"strings": strings} if "strings" in raw else {}
    return Assertion(type_name, base, type_name != base, value, float(weight), options)


def _value(base: str, raw: Mapping[str, Any]) -> Any:
    value = raw.get("value")
    if base in ("valid-tool-call", "no-tool-call"):
        if value is not None:
            raise AssertionSpecError(f"{base} takes no value", "value")
        return None
    if base == "tool-calls" and value is None:
        return None  # the dataset row's expected calls (``dataset.tool_calls``), set at load
    if base == "tool-call":
        if not isinstance(value, str) or not value:
            raise AssertionSpecError("tool-call needs a value: the tool's name", "value")
        return expected_step(value, raw.get("args"), raw.get("args_match", "exact"))
    if not isinstance(value, list) or not value:
        raise AssertionSpecError(f"{base} needs a value: a list of tool names or "
                                 "{name, args, args_match}", "value")  # fmt: skip
    return tuple(_f1_step(item, base) for item in value)


def _f1_step(item: Any, base: str = "tool-call-f1") -> ExpectedStep:
    if isinstance(item, str):
        return expected_step(item, None, "exact")
    if not isinstance(item, dict) or not isinstance(item.get("name"), str):
        raise AssertionSpecError(f"{base}: {item!r} is not a name or {{name, args}}", "value")
    extra = sorted(set(item) - {"name", "args", "args_match"})
    if extra:
        raise AssertionSpecError(f"{base}: unknown key {extra[0]!r} in {item!r}", "value")
    return expected_step(item["name"], item.get("args"), item.get("args_match", "exact"))


def expected_step(name: str, args: Any, mode: Any) -> ExpectedStep:
    """One expected call; an ``args`` that is not a mapping or an unknown ``args_match`` is
    an :class:`AssertionSpecError`."""
    if mode not in ARGS_MATCH_MODES:
        raise AssertionSpecError(f"args_match must be one of {', '.join(ARGS_MATCH_MODES)}, "
                                 f"got {mode!r}", "args_match")  # fmt: skip
    if args is not None and not isinstance(args, dict):
        raise AssertionSpecError(f"args must be a mapping, got {args!r}", "args")
    if mode == "allowed" and args is not None:
        scalar = next((key for key, allowed in args.items() if not isinstance(allowed, list)), None)
        if scalar is not None:
            raise AssertionSpecError(f"args_match: allowed takes a list of allowed values per "
                                     f"argument; {scalar!r} has {args[scalar]!r}", "args")  # fmt: skip
    return ExpectedStep(name, args, mode)


def expected_steps(assertion: Assertion) -> tuple[ExpectedStep, ...]:
    """The calls a ``tool-call``, ``tool-calls`` or ``tool-call-f1`` expects, as written."""
    if isinstance(assertion.value, ExpectedStep):
        return (assertion.value,)
    if isinstance(assertion.value, tuple):
        return tuple(step for step in assertion.value if isinstance(step, ExpectedStep))
    return ()


def expected_names(assertion: Assertion) -> tuple[str, ...]:
    """The tools a ``tool-call`` or ``tool-call-f1`` expects (each must be declared)."""
    return tuple(step.name for step in expected_steps(assertion))


# --- checks ----------------------------------------------------------------------------------


def check_tool_call(
    value: Any, output: str, assertion: Assertion, ctx: AssertionContext
) -> Outcome:
    """Some call is the expected one (name, and arguments as ``args_match`` says)."""
    calls = reply_calls(ctx.tool_calls)
    [step] = with_schemas((value,), assertion, ctx)
    passed = any(step.matches(call) for call in calls)
    why = _why_unmatched(step, list(enumerate(calls, 1))) or _shown(calls)
    return pass_fail(passed, f"called {step.shown()}",
                     f"no call matched {step.shown()} ({step.args_match}); {why}")  # fmt: skip


def check_valid_tool_call(
    value: Any, output: str, assertion: Assertion, ctx: AssertionContext
) -> Outcome:
    """Every call names a declared tool and its arguments validate against that tool's schema."""
    calls = reply_calls(ctx.tool_calls)
    if not calls:
        return pass_fail(False, "", "the reply made no tool call")
    for call in calls:
        problem = _violation(call, ctx.tool_schemas or {})
        if problem is not None:
            return pass_fail(False, "", problem)
    return pass_fail(True, f"{len(calls)} valid call(s): {_shown(calls)}", "")


def _violation(call: ReplyCall, schemas: Mapping[str, Mapping[str, Any]]) -> str | None:
    import jsonschema

    schema = schemas.get(call.name)
    if schema is None:
        return f"{call.name} is not a declared tool (declared: {', '.join(schemas) or 'none'})"
    arguments = call.parsed
    if arguments is None:
        return f"{call.name}: the arguments are not a JSON object: {call.raw_arguments[:80]!r}"
    error = jsonschema.exceptions.best_match(
        jsonschema.validators.validator_for(schema)(schema).iter_errors(arguments)
    )
    if error is None:
        return None
    where = "/".join(str(part) for part in error.absolute_path)
    return f"{call.name}: {f'{where}: ' if where else ''}{error.message}"


def check_tool_call_f1(
    value: Any, output: str, assertion: Assertion, ctx: AssertionContext
) -> Outcome:
    """F1 of the calls against the expected list, on an optimal (unordered) matching."""
    steps = with_schemas(value, assertion, ctx)
    calls = reply_calls(ctx.tool_calls)
    matched = len(match_sequence(steps, calls, "unordered").matched)
    precision = matched / len(calls) if calls else 0.0
    recall = matched / len(steps)
    f1 = 2 * precision * recall / (precision + recall) if matched else 0.0
    reason = (f"F1 {f1:.2f} (precision {matched}/{len(calls)}, recall {matched}/{len(steps)}); "
              f"{_shown(calls)}")  # fmt: skip
    return Outcome(f1 == 1.0, reason, f1)


def check_tool_calls(
    value: Any, output: str, assertion: Assertion, ctx: AssertionContext
) -> Outcome:
    """The calls are the expected ones, in any order, paired optimally, with nothing extra;
    scored by the share of expected calls (and calls made) that paired."""
    steps = with_schemas(value or (), assertion, ctx)
    calls = reply_calls(ctx.tool_calls)
    result = match_sequence(steps, calls, "unordered")
    reason = describe_match(result, steps, calls)
    unpaired = [(j + 1, calls[j]) for j in result.extra]
    whys = [_why_unmatched(steps[i], unpaired) for i in result.missing]
    if any(whys):
        reason += "; " + "; ".join(why for why in whys if why)
    return Outcome(result.passed, reason, result.score)


def with_schemas(
    steps: Sequence[ExpectedStep], assertion: Assertion, ctx: AssertionContext
) -> tuple[ExpectedStep, ...]:
    """The expected calls with their functions' schemas and the assertion's ``strings``, which
    ``args_match: allowed`` judges by (BFCL's rules: required, declared, types, strings)."""
    schemas = ctx.tool_schemas or {}
    normalize = assertion.options.get("strings", "normalized") == "normalized"
    return tuple(
        dataclasses.replace(step, schema=schemas.get(step.name), normalize_strings=normalize)
        if step.args_match == "allowed"
        else step
        for step in steps
    )


def _why_unmatched(step: ExpectedStep, calls: Sequence[tuple[int, ReplyCall]]) -> str:
    """Why the numbered calls of the step's function do not match it (``args_match:
    allowed``: the argument and BFCL's rule), or "" when none names it or the mode says no
    more."""
    if step.args_match != "allowed":
        return ""
    reasons = [
        f"call {n} ({step.name}): {step.mismatch(call)}"
        for n, call in calls
        if call.name == step.name and step.mismatch(call) is not None
    ]
    return "; ".join(reasons[:3])


def check_no_tool_call(
    value: Any, output: str, assertion: Assertion, ctx: AssertionContext
) -> Outcome:
    """The reply called no tool."""
    calls = reply_calls(ctx.tool_calls)
    return pass_fail(not calls, "no tool call", f"the reply called tools: {_shown(calls)}")


def _shown(calls: Sequence[ReplyCall]) -> str:
    if not calls:
        return "the reply made no tool call"
    return "calls: " + ", ".join(f"{call.name}({call.raw_arguments[:60]})" for call in calls)
