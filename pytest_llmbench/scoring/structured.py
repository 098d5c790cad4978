"""The structured checks: ``is-json`` and ``json-schema`` on the answer's JSON (whole, or its
one fenced block), and ``numeric`` on a number it writes (the last, by default), within a tolerance.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..yamlguard import check_yaml_limits, json_value
from .base import (
    QUOTE_LIMIT,
    Assertion,
    AssertionContext,
    AssertionSpecError,
    CheckFailed,
    Outcome,
    clip,
    is_number,
    number_text,
    pass_fail,
    quoted,
)

#: A fenced block: its info string (language) and its body.
_FENCE = re.compile(r"^[ \t]*```[ \t]*([\w+-]*)[^\n]*\n(.*?)^[ \t]*```", re.MULTILINE | re.DOTALL)
#: A number as models write it: signed, with optional thousands commas, decimals and exponent.
_NUMBER = re.compile(r"[-+]?(?:\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?|\.\d+)(?:[eE][-+]?\d+)?")


#: Which number of the answer ``numeric`` reads: the answer usually restates the question's
#: numbers before its own ("12 times 12 is 144"), so the last one is the default.
NUMBER_POSITIONS = ("last", "first", "any", "only")


class NotJson(Exception):
    """The output holds no parseable JSON; the message says why."""


# --- values ----------------------------------------------------------------------------------


def numeric_value(base: str, value: Any) -> float:
    if is_number(value) and math.isfinite(value):
        return float(value)
    raise AssertionSpecError(f"{base} needs a number, got {value!r}", "value")


def schema_value(base: str, value: Any) -> str | dict[str, Any]:
    if isinstance(value, str) and value.strip():
        return value
    if isinstance(value, Mapping):
        try:
            _schema_validator(value)  # a broken inline schema is a collection error
        except CheckFailed as exc:
            raise AssertionSpecError(str(exc), "value") from None
        return dict(value)
    message = f"{base} needs a schema mapping or a .json/.yaml schema file path, got {value!r}"
    raise AssertionSpecError(message, "value")


# --- checks ----------------------------------------------------------------------------------


def parse_json_output(output: str) -> tuple[Any, str]:
    """Parse the whole output as JSON, else its single ```json (or bare ```) fenced block."""
    try:
        return json.loads(output), "output"
    except json.JSONDecodeError as exc:
        whole_error = _json_error(exc)
    blocks = [body for lang, body in _FENCE.findall(output) if lang.lower() in ("", "json")]
    if len(blocks) != 1:
        extra = f" and it has {len(blocks)} fenced blocks" if blocks else ""
        raise NotJson(f"output is not JSON ({whole_error}){extra}")
    try:
        return json.loads(blocks[0]), "fenced block"
    except json.JSONDecodeError as exc:
        raise NotJson(f"fenced block is not JSON ({_json_error(exc)})") from None


def _json_error(exc: json.JSONDecodeError) -> str:
    return f"{exc.msg} at line {exc.lineno} column {exc.colno}"


def check_json(value: Any, output: str, a: Assertion, ctx: AssertionContext) -> Outcome:
    """``is-json`` (no value) and ``json-schema``: the output's JSON, checked against a schema."""
    schema = _load_schema(value, ctx.base_dir) if isinstance(value, str) else value
    validator = None if schema is None else _schema_validator(schema)
    try:
        data, where = parse_json_output(output)
    except NotJson as exc:
        return Outcome(False, str(exc), 0.0)
    if validator is None:
        return Outcome(True, f"{where} is valid JSON", 1.0)
    import jsonschema

    try:
        error = jsonschema.exceptions.best_match(validator.iter_errors(data))
    except Exception as exc:
        reason = f"cannot apply the schema: {type(exc).__name__}: {clip(str(exc))}"
        raise CheckFailed(reason) from None
    if error is None:
        return Outcome(True, f"{where} matches the schema", 1.0)
    message = clip(error.message, 2 * QUOTE_LIMIT)
    return Outcome(False, f"schema violation at {error.json_path}: {message}", 0.0)


def _schema_validator(schema: Mapping[str, Any]) -> Any:
    """A validator for ``schema``; raises CheckFailed when the schema itself is invalid."""
    import jsonschema  # lazy: only evals that use json-schema pay for the import

    cls = jsonschema.validators.validator_for(schema)
    try:
        cls.check_schema(dict(schema))
    except jsonschema.SchemaError as exc:
        raise CheckFailed(f"invalid JSON schema: {clip(exc.message, 2 * QUOTE_LIMIT)}") from None
    return cls(schema)


def _load_schema(ref: str, base_dir: Path) -> Mapping[str, Any]:
    path = base_dir / ref
    try:
        text = path.read_text(encoding="utf-8")
        if path.suffix.lower() in (".yaml", ".yml"):
            import yaml

            check_yaml_limits(text)  # an alias inside its own anchor, a bomb: refused first
            schema = yaml.safe_load(text)
        else:
            schema = json_value(text)
    except Exception as exc:
        raise CheckFailed(f"cannot load schema file {ref}: {clip(str(exc))}") from None
    if not isinstance(schema, Mapping):
        raise CheckFailed(f"schema file {ref} does not hold a mapping")
    return schema


def _numbers(text: str) -> list[float]:
    return [float(match.group().replace(",", "")) for match in _NUMBER.finditer(text)]


def _first_number(text: str) -> float | None:
    numbers = _numbers(text)
    return numbers[0] if numbers else None


def check_numeric(value: Any, output: str, a: Assertion, ctx: AssertionContext) -> Outcome:
    want = float(value) if is_number(value) else _first_number(value)
    if want is None:
        raise CheckFailed(f"expected {quoted(value)} holds no number")
    found = _numbers(output)
    if not found:
        return Outcome(False, f"no number in output {quoted(output)}", 0.0)
    position = a.options.get("position", "last")
    if position == "only" and len(found) > 1:
        listed = ", ".join(number_text(n) for n in found[:5])
        return Outcome(False, f"{len(found)} numbers in output ({listed}), expected only one", 0.0)
    allowed = max(a.options.get("tolerance", 0.0), a.options.get("rel_tolerance", 0.0) * abs(want))
    candidates = found if position == "any" else [found[0] if position == "first" else found[-1]]
    got = min(candidates, key=lambda n: abs(n - want))
    diff = abs(got - want)
    # isclose forgives float rounding, e.g. |0.35 - 0.3| against a tolerance of 0.05
    within = diff <= allowed or (allowed > 0 and math.isclose(diff, allowed))
    g, w, t = number_text(got), number_text(want), number_text(allowed)
    if position == "any" and not within:
        near = f"within {t} of {w}" if allowed else w
        return Outcome(False, f"no number in the output is {near} (closest {g})", 0.0)
    if allowed == 0:
        return pass_fail(within, f"{g} equals {w}", f"{g} is not {w}")
    return pass_fail(within, f"{g} is within {t} of {w}", f"{g} is not within {t} of {w}")
