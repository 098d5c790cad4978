"""The deterministic text checks: ``equals``, the ``contains`` family, ``regex``,
``starts-with`` and the ROUGE-L ``similarity``, with the parsers of their written values.
"""

from __future__ import annotations

import json
from typing import Any

from .base import (
    Assertion,
    AssertionContext,
    AssertionSpecError,
    Checker,
    CheckFailed,
    Outcome,
    TypeSpec,
    is_number,
    pass_fail,
    quoted,
    regex_search,
    valid_regex,
)
from .structured import NotJson, parse_json_output

# --- values ----------------------------------------------------------------------------------


def text_value(base: str, value: Any) -> str:
    if isinstance(value, str):
        return value
    if is_number(value):  # YAML reads `value: 42` as an int
        return str(value)
    raise AssertionSpecError(f"{base} needs a string value, got {value!r}", "value")


def equals_value(base: str, value: Any) -> Any:
    return value if isinstance(value, (dict, list)) else text_value(base, value)


def _text_list_value(base: str, value: Any) -> tuple[str, ...]:
    items = value if isinstance(value, list) else []
    if items and all(isinstance(item, str) or is_number(item) for item in items):
        return tuple(str(item) for item in items)
    raise AssertionSpecError(f"{base} needs a non-empty list of strings, got {value!r}", "value")


def regex_value(base: str, value: Any) -> str:
    return valid_regex(text_value(base, value))


# --- checks ----------------------------------------------------------------------------------


def check_equals(value: Any, output: str, a: Assertion, ctx: AssertionContext) -> Outcome:
    if isinstance(value, (dict, list)):
        try:
            parsed, where = parse_json_output(output)
        except NotJson as exc:
            return Outcome(False, str(exc), 0.0)
        want = quoted(json.dumps(value))
        return pass_fail(parsed == value, f"{where} equals {want}", f"{where} differs from {want}")
    want, got = str(value).strip(), output.strip()
    return pass_fail(
        got == want,
        f"output equals {quoted(want)}",
        f"output {quoted(got)} does not equal {quoted(want)}",
    )


def substring_checker(mode: str, fold: bool) -> Checker:
    """A checker for one needle (``contains``) or a list of them (``-any``, ``-all``)."""
    how = " (ignoring case)" if fold else ""

    def check(value: Any, output: str, a: Assertion, ctx: AssertionContext) -> Outcome:
        needles = [value] if mode == "one" else list(value)
        haystack = output.casefold() if fold else output
        found = [n for n in needles if (n.casefold() if fold else n) in haystack]
        if mode == "all":
            missing = ", ".join(quoted(n, 40) for n in needles if n not in found)
            return pass_fail(
                not missing,
                f"output contains all {len(needles)} strings{how}",
                f"output does not contain {missing}{how}",
            )
        if found:
            return Outcome(True, f"output contains {quoted(found[0])}{how}", 1.0)
        lacks = (
            quoted(value)
            if mode == "one"
            else "any of " + ", ".join(quoted(n, 40) for n in needles)
        )
        return Outcome(False, f"output does not contain {lacks}{how}", 0.0)

    return check


def list_type(mode: str, fold: bool) -> TypeSpec:
    check = substring_checker(mode, fold)
    return TypeSpec(check, "required", _text_list_value, "a list of strings")


def check_regex(value: Any, output: str, a: Assertion, ctx: AssertionContext) -> Outcome:
    matched = regex_search(value, output)
    return pass_fail(
        matched, f"matched {quoted(value)}", f"no match for {quoted(value)} in {quoted(output)}"
    )


def check_starts_with(value: Any, output: str, a: Assertion, ctx: AssertionContext) -> Outcome:
    # Models often open with whitespace or a newline; that is not what the check is about.
    got, want = output.lstrip(), value.lstrip()
    return pass_fail(
        got.startswith(want),
        f"output starts with {quoted(want)}",
        f"output {quoted(got)} does not start with {quoted(want)}",
    )


def check_similarity(value: Any, output: str, a: Assertion, ctx: AssertionContext) -> Outcome:
    from .similarity import rouge_l

    if a.graded is not None:  # by embedding: the engine's verdict, never a local one
        raise CheckFailed(f"{a.type} is graded by a model call, not locally")
    score = rouge_l(output, str(value))
    threshold = float(a.options.get("threshold", 0.5))
    verb = ">=" if score >= threshold else "<"
    return Outcome(score >= threshold, f"ROUGE-L {score:.3f} {verb} {threshold:g}", score)
