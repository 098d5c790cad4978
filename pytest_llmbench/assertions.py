"""Deterministic assertions that score a model's answer text.

An eval case lists ``assert:`` items. :func:`parse_assertion` turns each into an
:class:`Assertion` at collection time (raising :class:`AssertionSpecError` for a bad one), and
:func:`evaluate` checks an answer against it, giving a :class:`Verdict`. Any type can be negated
with a ``not-`` prefix. Trouble that is not about the answer (no value to compare with, a python
check that raises, an unreadable schema file) gives a failed verdict that negation leaves failed.
"""

from __future__ import annotations

import dataclasses
import json
import math
import numbers
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from .judging.spec import (
    JUDGE_KEYS,
    JUDGE_TYPES,
    SIMILARITY_KEYS,
    EmbeddingSpec,
    GradedSpecError,
    JudgeSpec,
    parse_embedding_spec,
    parse_judge_spec,
    rouge_threshold,
)

_KEYS = ("type", "value", "weight", "tolerance", "rel_tolerance", "threshold")
#: The allowed (low, high) of each numeric key; None is unbounded.
_RANGES: dict[str, tuple[float, float | None]] = {
    "weight": (0.0, None),
    "tolerance": (0.0, None),
    "rel_tolerance": (0.0, None),
    "threshold": (0.0, 1.0),
}
_DEFAULT_THRESHOLD = 0.5
_QUOTE_LIMIT = 80
_PYTHON_REF = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*")
#: A fenced block: its info string (language) and its body.
_FENCE = re.compile(r"^[ \t]*```[ \t]*([\w+-]*)[^\n]*\n(.*?)^[ \t]*```", re.MULTILINE | re.DOTALL)
#: A number as models write it: signed, with optional thousands commas, decimals and exponent.
_NUMBER = re.compile(r"[-+]?(?:\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?|\.\d+)(?:[eE][-+]?\d+)?")


class AssertionSpecError(ValueError):
    """Bad assertion in an eval file; ``.field`` is the offending key ('type', 'value', ...)."""

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


@dataclasses.dataclass(frozen=True)
class Assertion:
    """One parsed ``assert:`` item."""

    type: str  #: as written, e.g. ``not-contains``
    base_type: str  #: without the ``not-`` prefix, e.g. ``contains``
    negate: bool = False  #: whether the ``not-`` prefix was given
    #: the value, normalised (a number given as text becomes str, a list a tuple); None if omitted
    value: Any = None
    weight: float = 1.0  #: weight in the case score, >= 0
    #: type-specific extras (tolerance, rel_tolerance, threshold) as floats; read-only
    options: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    #: how a model grades it (judged types, embedding similarity); None for local checks
    graded: JudgeSpec | EmbeddingSpec | None = None
    #: an agent check (``file-exists``, ``command``, ``tool-called``, ...): judged on the
    #: agent's workdir and tool calls, not on the answer text
    agent_check: Any = None

    @property
    def engine_graded(self) -> bool:
        """True when a model call grades this assertion (a judge panel or an embedding)."""
        return self.graded is not None

    @property
    def needs_value(self) -> bool:
        """True when no value was given but the type needs one; the case's expected is used."""
        spec = _TYPES.get(self.base_type)
        return self.value is None and spec is not None and spec.value_rule != "none"


@dataclasses.dataclass(frozen=True)
class AssertionContext:
    """What an assertion may know about the case besides the answer."""

    expected: str | None = None  #: the case's expected answer; used when a value is omitted
    prompt: str | None = None  #: the rendered prompt
    vars: Mapping[str, Any] = dataclasses.field(default_factory=dict)  #: the case's variables
    model: str = ""  #: the model name as selected
    case_id: str = ""  #: the case id inside its suite
    #: the eval file's directory; python modules and schema files resolve against it
    base_dir: Path = Path(".")
    choices: tuple[str, ...] | None = None  #: a multiple choice case's choices, in order
    answer_index: int | None = None  #: the 0-based index of the right choice
    #: the marks shown before the choices when not the letters A, B, ... (ARC's "1".."4")
    choice_labels: tuple[str, ...] | None = None


@dataclasses.dataclass(frozen=True)
class Verdict:
    """The result of one assertion on one answer."""

    type: str  #: the assertion type as written
    passed: bool  #: whether the assertion holds
    score: float  #: 0..1: 1.0 or 0.0 for pass/fail checks, graded for python checks
    weight: float  #: the assertion's weight
    reason: str  #: a short human-readable explanation

    def to_dict(self) -> dict[str, Any]:
        """The verdict as JSON primitives, for the wire record."""
        return {
            "type": self.type,
            "passed": bool(self.passed),
            "score": float(self.score),
            "weight": float(self.weight),
            "reason": self.reason,
        }


@dataclasses.dataclass(frozen=True)
class _Outcome:
    passed: bool
    reason: str
    score: float


class _CheckFailed(Exception):
    """The check could not be made (not a fault of the answer); the message is the reason."""


class _NotJson(Exception):
    """The output holds no parseable JSON; the message says why."""


Checker = Callable[[Any, str, Assertion, AssertionContext], _Outcome]


@dataclasses.dataclass(frozen=True)
class _TypeSpec:
    check: Checker
    #: "defaults": the case's expected when omitted; "required": must be given; "none": no value
    value_rule: Literal["defaults", "required", "none"]
    parse_value: Callable[[str, Any], Any] | None = None  #: normalises a written value, or raises
    hint: str = ""  #: what a required value looks like
    options: frozenset[str] = frozenset()


# --- parsing ---------------------------------------------------------------------------------


def parse_assertion(raw: str | Mapping[str, Any]) -> Assertion:
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
    type_name, base = _split_type(raw.get("type"))
    if base in JUDGE_TYPES or base == "similarity":
        return _parse_graded(raw, type_name, base)
    spec = _TYPES[base]
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
    options = {key: _number_key(raw, key) for key in sorted(spec.options & raw.keys())}
    return Assertion(type_name, base, type_name != base, value, weight, options)


def _base_name(type_name: Any) -> str | None:
    return type_name.removeprefix("not-") if isinstance(type_name, str) else None


def _agent_types() -> frozenset[str]:
    from .agent.checks import AGENT_TYPES

    return AGENT_TYPES


def _parse_agent(raw: Mapping[str, Any]) -> Assertion:
    """An agent check; its own parser names the offending key."""
    from .agent.checks import parse_agent_assertion

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
    extra = JUDGE_KEYS if base in JUDGE_TYPES else SIMILARITY_KEYS
    allowed = ("type", "value", "weight", "threshold", *sorted(extra))
    unknown = sorted(str(key) for key in raw if key not in allowed)
    if unknown:
        names = ", ".join(repr(key) for key in unknown)
        message = f"unknown key {names} in {base} assertion; allowed keys: {', '.join(allowed)}"
        raise AssertionSpecError(message, unknown[0])
    spec = _TYPES[base]
    value = raw.get("value")
    if value is None and spec.value_rule == "required":
        raise AssertionSpecError(f"{base} needs a value ({spec.hint})", "value")
    if value is not None:
        if spec.parse_value is None:
            raise AssertionSpecError(f"{base} takes no value", "value")
        value = spec.parse_value(base, value)
    weight = _number_key(raw, "weight") if "weight" in raw else 1.0
    try:
        if base in JUDGE_TYPES:
            return Assertion(type_name, base, False, value, weight, {}, parse_judge_spec(base, raw))
        embedding = parse_embedding_spec(raw)
        options = {} if embedding else {"threshold": rouge_threshold(raw)}
    except GradedSpecError as exc:
        raise AssertionSpecError(str(exc), exc.field) from None
    return Assertion(type_name, base, False, value, weight, options, embedding)


def _split_type(type_name: Any) -> tuple[str, str]:
    if type_name is None:
        raise AssertionSpecError("assertion has no 'type'", "type")
    if not isinstance(type_name, str):
        raise AssertionSpecError(f"assertion type must be a string, got {type_name!r}", "type")
    base = type_name.removeprefix("not-")
    if base not in _TYPES:
        known = ", ".join(sorted(_TYPES))
        message = (
            f"unknown assertion type {type_name!r}; known types: {known} "
            "(any but the model-graded ones may take not-)"
        )
        raise AssertionSpecError(message, "type")
    return type_name, base


def _check_keys(raw: Mapping[str, Any], base: str, spec: _TypeSpec) -> None:
    unknown = sorted(str(key) for key in raw if key not in _KEYS)
    if unknown:
        names = ", ".join(repr(key) for key in unknown)
        message = f"unknown key {names} in assertion; allowed keys: {', '.join(_KEYS)}"
        raise AssertionSpecError(message, unknown[0])
    for key in sorted((raw.keys() & _RANGES.keys()) - spec.options - {"weight"}):
        users = ", ".join(name for name, other in _TYPES.items() if key in other.options)
        raise AssertionSpecError(f"{key!r} does not apply to {base} (only to {users})", key)


def _number_key(raw: Mapping[str, Any], key: str) -> float:
    value = raw[key]
    if not _is_number(value) or not math.isfinite(value):
        raise AssertionSpecError(f"{key} must be a number, got {value!r}", key)
    low, high = _RANGES[key]
    if value < low or (high is not None and value > high):
        allowed = f">= {low:g}" if high is None else f"between {low:g} and {high:g}"
        raise AssertionSpecError(f"{key} must be {allowed}, got {value!r}", key)
    return float(value)


def _is_number(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _text_value(base: str, value: Any) -> str:
    if isinstance(value, str):
        return value
    if _is_number(value):  # YAML reads `value: 42` as an int
        return str(value)
    raise AssertionSpecError(f"{base} needs a string value, got {value!r}", "value")


def _equals_value(base: str, value: Any) -> Any:
    return value if isinstance(value, (dict, list)) else _text_value(base, value)


def _text_list_value(base: str, value: Any) -> tuple[str, ...]:
    items = value if isinstance(value, list) else []
    if items and all(isinstance(item, str) or _is_number(item) for item in items):
        return tuple(str(item) for item in items)
    raise AssertionSpecError(f"{base} needs a non-empty list of strings, got {value!r}", "value")


def _regex_value(base: str, value: Any) -> str:
    pattern = _text_value(base, value)
    try:
        re.compile(pattern)
    except re.error as exc:
        raise AssertionSpecError(f"invalid regex {pattern!r}: {exc}", "value") from None
    return pattern


def _python_value(base: str, value: Any) -> str:
    if isinstance(value, str) and _PYTHON_REF.fullmatch(value):
        return value
    message = f"{base} value must look like 'module.sub:function', got {value!r}"
    raise AssertionSpecError(message, "value")


def _numeric_value(base: str, value: Any) -> float:
    if _is_number(value) and math.isfinite(value):
        return float(value)
    raise AssertionSpecError(f"{base} needs a number, got {value!r}", "value")


def _schema_value(base: str, value: Any) -> str | dict[str, Any]:
    if isinstance(value, str) and value.strip():
        return value
    if isinstance(value, Mapping):
        try:
            _schema_validator(value)  # a broken inline schema is a collection error
        except _CheckFailed as exc:
            raise AssertionSpecError(str(exc), "value") from None
        return dict(value)
    message = f"{base} needs a schema mapping or a .json/.yaml schema file path, got {value!r}"
    raise AssertionSpecError(message, "value")


# --- evaluation ------------------------------------------------------------------------------


def evaluate(assertion: Assertion, output: str, context: AssertionContext) -> Verdict:
    """Check ``output`` against ``assertion``; never raises for a bad answer or user code."""
    output = "" if output is None else output  # a tool-call-only answer has no text
    try:
        spec, value = _resolve(assertion, context)
        outcome = spec.check(value, output, assertion, context)
    except _CheckFailed as exc:
        return Verdict(assertion.type, False, 0.0, assertion.weight, str(exc))
    if assertion.negate:
        outcome = _Outcome(not outcome.passed, f"negated: {outcome.reason}", 1.0 - outcome.score)
    return Verdict(assertion.type, outcome.passed, outcome.score, assertion.weight, outcome.reason)


def score_verdicts(verdicts: Sequence[Verdict]) -> float | None:
    """Weighted mean of the verdicts' scores; None when empty; the plain mean if all weigh 0."""
    if not verdicts:
        return None
    total = sum(verdict.weight for verdict in verdicts)
    if total == 0:
        return sum(verdict.score for verdict in verdicts) / len(verdicts)
    return sum(verdict.score * verdict.weight for verdict in verdicts) / total


def _resolve(assertion: Assertion, context: AssertionContext) -> tuple[_TypeSpec, Any]:
    spec = _TYPES.get(assertion.base_type)
    if spec is None:
        raise _CheckFailed(f"unknown assertion type {assertion.base_type!r}")
    if assertion.value is not None or spec.value_rule == "none":
        return spec, assertion.value
    if spec.value_rule == "defaults" and context.expected is not None:
        return spec, context.expected
    raise _CheckFailed(f"{assertion.type} has no value and the case has no expected")


def _binary(passed: bool, if_passed: str, if_failed: str) -> _Outcome:
    return _Outcome(passed, if_passed if passed else if_failed, 1.0 if passed else 0.0)


def _clip(text: str, limit: int = _QUOTE_LIMIT) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _q(text: str, limit: int = _QUOTE_LIMIT) -> str:
    escaped = text.replace("\n", "\\n").replace("\r", "\\r").replace("\t", "\\t")
    return f"'{_clip(escaped, limit)}'"


def _num(value: float) -> str:
    return f"{value:.10g}"


def _check_equals(value: Any, output: str, a: Assertion, ctx: AssertionContext) -> _Outcome:
    if isinstance(value, (dict, list)):
        try:
            parsed, where = _parse_json_output(output)
        except _NotJson as exc:
            return _Outcome(False, str(exc), 0.0)
        want = _q(json.dumps(value))
        return _binary(parsed == value, f"{where} equals {want}", f"{where} differs from {want}")
    want, got = str(value).strip(), output.strip()
    return _binary(
        got == want, f"output equals {_q(want)}", f"output {_q(got)} does not equal {_q(want)}"
    )


def _substring_checker(mode: str, fold: bool) -> Checker:
    """A checker for one needle (``contains``) or a list of them (``-any``, ``-all``)."""
    how = " (ignoring case)" if fold else ""

    def check(value: Any, output: str, a: Assertion, ctx: AssertionContext) -> _Outcome:
        needles = [value] if mode == "one" else list(value)
        haystack = output.casefold() if fold else output
        found = [n for n in needles if (n.casefold() if fold else n) in haystack]
        if mode == "all":
            missing = ", ".join(_q(n, 40) for n in needles if n not in found)
            return _binary(
                not missing,
                f"output contains all {len(needles)} strings{how}",
                f"output does not contain {missing}{how}",
            )
        if found:
            return _Outcome(True, f"output contains {_q(found[0])}{how}", 1.0)
        lacks = _q(value) if mode == "one" else "any of " + ", ".join(_q(n, 40) for n in needles)
        return _Outcome(False, f"output does not contain {lacks}{how}", 0.0)

    return check


def _check_regex(value: Any, output: str, a: Assertion, ctx: AssertionContext) -> _Outcome:
    try:
        pattern = re.compile(value)
    except re.error as exc:  # only a pattern taken from the case's expected gets here
        raise _CheckFailed(f"invalid regex {_q(value)}: {exc}") from None
    matched = pattern.search(output) is not None
    return _binary(matched, f"matched {_q(value)}", f"no match for {_q(value)} in {_q(output)}")


def _check_starts_with(value: Any, output: str, a: Assertion, ctx: AssertionContext) -> _Outcome:
    # Models often open with whitespace or a newline; that is not what the check is about.
    got, want = output.lstrip(), value.lstrip()
    return _binary(
        got.startswith(want),
        f"output starts with {_q(want)}",
        f"output {_q(got)} does not start with {_q(want)}",
    )


def _parse_json_output(output: str) -> tuple[Any, str]:
    """Parse the whole output as JSON, else its single ```json (or bare ```) fenced block."""
    try:
        return json.loads(output), "output"
    except json.JSONDecodeError as exc:
        whole_error = _json_error(exc)
    blocks = [body for lang, body in _FENCE.findall(output) if lang.lower() in ("", "json")]
    if len(blocks) != 1:
        extra = f" and it has {len(blocks)} fenced blocks" if blocks else ""
        raise _NotJson(f"output is not JSON ({whole_error}){extra}")
    try:
        return json.loads(blocks[0]), "fenced block"
    except json.JSONDecodeError as exc:
        raise _NotJson(f"fenced block is not JSON ({_json_error(exc)})") from None


def _json_error(exc: json.JSONDecodeError) -> str:
    return f"{exc.msg} at line {exc.lineno} column {exc.colno}"


def _check_json(value: Any, output: str, a: Assertion, ctx: AssertionContext) -> _Outcome:
    """``is-json`` (no value) and ``json-schema``: the output's JSON, checked against a schema."""
    schema = _load_schema(value, ctx.base_dir) if isinstance(value, str) else value
    validator = None if schema is None else _schema_validator(schema)
    try:
        data, where = _parse_json_output(output)
    except _NotJson as exc:
        return _Outcome(False, str(exc), 0.0)
    if validator is None:
        return _Outcome(True, f"{where} is valid JSON", 1.0)
    import jsonschema

    try:
        error = jsonschema.exceptions.best_match(validator.iter_errors(data))
    except Exception as exc:
        reason = f"cannot apply the schema: {type(exc).__name__}: {_clip(str(exc))}"
        raise _CheckFailed(reason) from None
    if error is None:
        return _Outcome(True, f"{where} matches the schema", 1.0)
    message = _clip(error.message, 2 * _QUOTE_LIMIT)
    return _Outcome(False, f"schema violation at {error.json_path}: {message}", 0.0)


def _schema_validator(schema: Mapping[str, Any]) -> Any:
    """A validator for ``schema``; raises _CheckFailed when the schema itself is invalid."""
    import jsonschema  # lazy: only evals that use json-schema pay for the import

    cls = jsonschema.validators.validator_for(schema)
    try:
        cls.check_schema(dict(schema))
    except jsonschema.SchemaError as exc:
        raise _CheckFailed(f"invalid JSON schema: {_clip(exc.message, 2 * _QUOTE_LIMIT)}") from None
    return cls(schema)


def _load_schema(ref: str, base_dir: Path) -> Mapping[str, Any]:
    path = base_dir / ref
    try:
        text = path.read_text(encoding="utf-8")
        if path.suffix.lower() in (".yaml", ".yml"):
            import yaml

            schema = yaml.safe_load(text)
        else:
            schema = json.loads(text)
    except Exception as exc:
        raise _CheckFailed(f"cannot load schema file {ref}: {_clip(str(exc))}") from None
    if not isinstance(schema, Mapping):
        raise _CheckFailed(f"schema file {ref} does not hold a mapping")
    return schema


def _first_number(text: str) -> float | None:
    match = _NUMBER.search(text)
    return None if match is None else float(match.group().replace(",", ""))


def _check_numeric(value: Any, output: str, a: Assertion, ctx: AssertionContext) -> _Outcome:
    want = float(value) if _is_number(value) else _first_number(value)
    if want is None:
        raise _CheckFailed(f"expected {_q(value)} holds no number")
    got = _first_number(output)
    if got is None:
        return _Outcome(False, f"no number in output {_q(output)}", 0.0)
    allowed = max(a.options.get("tolerance", 0.0), a.options.get("rel_tolerance", 0.0) * abs(want))
    diff = abs(got - want)
    # isclose forgives float rounding, e.g. |0.35 - 0.3| against a tolerance of 0.05
    within = diff <= allowed or (allowed > 0 and math.isclose(diff, allowed))
    g, w, t = _num(got), _num(want), _num(allowed)
    if allowed == 0:
        return _binary(within, f"{g} equals {w}", f"{g} is not {w}")
    return _binary(within, f"{g} is within {t} of {w}", f"{g} is not within {t} of {w}")


def _check_python(value: Any, output: str, a: Assertion, ctx: AssertionContext) -> _Outcome:
    function = _load_function(value, ctx.base_dir)
    try:
        result = function(output, ctx)
    except Exception as exc:
        raise _CheckFailed(f"{value} raised {type(exc).__name__}: {_clip(str(exc))}") from None
    return _python_outcome(value, result, a.options.get("threshold", _DEFAULT_THRESHOLD))


def _load_function(ref: str, base_dir: Path) -> Callable[..., Any]:
    from .userimport import UserImportError, load_callable

    try:
        return load_callable(ref, base_dir)
    except UserImportError as exc:
        raise _CheckFailed(_clip(str(exc), 200)) from None


def _python_outcome(ref: str, result: Any, threshold: float) -> _Outcome:
    if isinstance(result, bool):
        return _Outcome(result, f"{ref} returned {result}", float(result))
    if _is_number(result):
        score = _unit_score(ref, result)
        passed = score >= threshold
        reason = f"score {_num(score)} {'>=' if passed else '<'} threshold {_num(threshold)}"
        return _Outcome(passed, reason, score)
    if isinstance(result, Mapping):
        return _dict_outcome(ref, result, threshold)
    kind = type(result).__name__
    raise _CheckFailed(f"{ref} returned {kind}; expected a bool, a float or a dict")


def _dict_outcome(ref: str, result: Mapping[str, Any], threshold: float) -> _Outcome:
    unknown = sorted(str(key) for key in result if key not in ("pass", "score", "reason"))
    passed, score, reason = result.get("pass"), result.get("score"), result.get("reason")
    if unknown or (passed is None and score is None):
        expected = "expected keys pass, score, reason"
        raise _CheckFailed(f"{ref} returned {_clip(repr(result))}; {expected}")
    if passed is not None and not isinstance(passed, bool):
        raise _CheckFailed(f"{ref} returned 'pass': {passed!r}; expected a bool")
    if passed is not None and score is not None:
        score = _unit_score(ref, score)
        outcome = _Outcome(passed, f"{ref} returned pass={passed}, score {_num(score)}", score)
    else:
        outcome = _python_outcome(ref, passed if score is None else score, threshold)
    return outcome if reason is None else dataclasses.replace(outcome, reason=_clip(str(reason)))


def _unit_score(ref: str, value: Any) -> float:
    score = float(value)
    if not 0.0 <= score <= 1.0:
        raise _CheckFailed(f"{ref} returned score {value!r}, outside 0..1")
    return score


# --- the registry ----------------------------------------------------------------------------


def _list_type(mode: str, fold: bool) -> _TypeSpec:
    check = _substring_checker(mode, fold)
    return _TypeSpec(check, "required", _text_list_value, "a list of strings")


def _check_similarity(value: Any, output: str, a: Assertion, ctx: AssertionContext) -> _Outcome:
    from .judging.similarity import rouge_l

    if a.graded is not None:  # by embedding: the engine's verdict, never a local one
        raise _CheckFailed(f"{a.type} is graded by a model call, not locally")
    score = rouge_l(output, str(value))
    threshold = float(a.options.get("threshold", 0.5))
    verb = ">=" if score >= threshold else "<"
    return _Outcome(score >= threshold, f"ROUGE-L {score:.3f} {verb} {threshold:g}", score)


def _check_choice(value: Any, output: str, a: Assertion, ctx: AssertionContext) -> _Outcome:
    """The choice the answer names, against the case's answer key (see :mod:`.choices`)."""
    from .choices import choice_marks, extract_choice

    choices, right = ctx.choices, ctx.answer_index
    if not choices:
        raise _CheckFailed("the case has no choices")
    try:
        marks = choice_marks(choices, ctx.choice_labels)
    except ValueError as exc:
        raise _CheckFailed(str(exc)) from None
    if right is None or not 0 <= right < len(marks):
        raise _CheckFailed(f"the case has no answer among its {len(marks)} choices")
    chosen = extract_choice(output, choices, ctx.choice_labels)
    answer = f"{marks[right]} ({_clip(choices[right], 40)})"
    if chosen is None:
        return _Outcome(False, f"named no choice; answer {answer}", 0.0)
    if chosen == right:
        return _Outcome(True, f"chose {answer}, the answer", 1.0)
    picked = f"{marks[chosen]} ({_clip(choices[chosen], 40)})"
    return _Outcome(False, f"chose {picked}; answer {answer}", 0.0)


def _check_engine_graded(value: Any, output: str, a: Assertion, ctx: AssertionContext) -> _Outcome:
    # Judges and embeddings are called by the engine, which gives the verdict; reaching this
    # means a caller evaluated locally what only a model can grade.
    raise _CheckFailed(f"{a.type} is graded by a model call, not locally")


_TYPES: dict[str, _TypeSpec] = {
    "equals": _TypeSpec(_check_equals, "defaults", _equals_value),
    "contains": _TypeSpec(_substring_checker("one", False), "defaults", _text_value),
    "icontains": _TypeSpec(_substring_checker("one", True), "defaults", _text_value),
    "contains-any": _list_type("any", fold=False),
    "contains-all": _list_type("all", fold=False),
    "icontains-any": _list_type("any", fold=True),
    "icontains-all": _list_type("all", fold=True),
    "regex": _TypeSpec(_check_regex, "defaults", _regex_value),
    "starts-with": _TypeSpec(_check_starts_with, "defaults", _text_value),
    "is-json": _TypeSpec(_check_json, "none"),
    "json-schema": _TypeSpec(_check_json, "required", _schema_value, "a schema or a file path"),
    "numeric": _TypeSpec(
        _check_numeric,
        "defaults",
        _numeric_value,
        options=frozenset({"tolerance", "rel_tolerance"}),
    ),
    "similarity": _TypeSpec(_check_similarity, "defaults", _text_value),
    "llm-rubric": _TypeSpec(_check_engine_graded, "required", _text_value, "the rubric"),
    "closed-qa": _TypeSpec(_check_engine_graded, "required", _text_value, "the criterion"),
    "factuality": _TypeSpec(_check_engine_graded, "defaults", _text_value),
    "jury": _TypeSpec(_check_engine_graded, "none"),
    "choice": _TypeSpec(_check_choice, "none"),
    "python": _TypeSpec(
        _check_python,
        "required",
        _python_value,
        "'module:function'",
        options=frozenset({"threshold"}),
    ),
}

#: The base assertion types; each may also be written with a ``not-`` prefix.
KNOWN_TYPES: frozenset[str] = frozenset(_TYPES)
