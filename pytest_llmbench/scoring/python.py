"""The checks that need more than the answer text: ``python`` (a user function, loaded from
the eval file's directory) and ``choice`` (the case's choices and answer key), and the stub
that model-graded types answer with when someone evaluates them locally.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from .base import (
    Assertion,
    AssertionContext,
    AssertionSpecError,
    CheckFailed,
    Outcome,
    clip,
    is_number,
    number_text,
)

_DEFAULT_THRESHOLD = 0.5
_PYTHON_REF = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*")


def python_value(base: str, value: Any) -> str:
    if isinstance(value, str) and _PYTHON_REF.fullmatch(value):
        return value
    message = f"{base} value must look like 'module.sub:function', got {value!r}"
    raise AssertionSpecError(message, "value")


def check_python(value: Any, output: str, a: Assertion, ctx: AssertionContext) -> Outcome:
    function = _load_function(value, ctx.base_dir)
    try:
        result = function(output, ctx)
    except Exception as exc:
        raise CheckFailed(f"{value} raised {type(exc).__name__}: {clip(str(exc))}") from None
    return _python_outcome(value, result, a.options.get("threshold", _DEFAULT_THRESHOLD))


def _load_function(ref: str, base_dir: Path) -> Callable[..., Any]:
    from ..userimport import UserImportError, load_callable

    try:
        return load_callable(ref, base_dir)
    except UserImportError as exc:
        raise CheckFailed(clip(str(exc), 200)) from None


def _python_outcome(ref: str, result: Any, threshold: float) -> Outcome:
    if isinstance(result, bool):
        return Outcome(result, f"{ref} returned {result}", float(result))
    if is_number(result):
        score = _unit_score(ref, result)
        passed = score >= threshold
        reason = f"score {number_text(score)} {'>=' if passed else '<'} threshold {number_text(threshold)}"
        return Outcome(passed, reason, score)
    if isinstance(result, Mapping):
        return _dict_outcome(ref, result, threshold)
    kind = type(result).__name__
    raise CheckFailed(f"{ref} returned {kind}; expected a bool, a float or a dict")


def _dict_outcome(ref: str, result: Mapping[str, Any], threshold: float) -> Outcome:
    unknown = sorted(str(key) for key in result if key not in ("pass", "score", "reason"))
    passed, score, reason = result.get("pass"), result.get("score"), result.get("reason")
    if unknown or (passed is None and score is None):
        expected = "expected keys pass, score, reason"
        raise CheckFailed(f"{ref} returned {clip(repr(result))}; {expected}")
    if passed is not None and not isinstance(passed, bool):
        raise CheckFailed(f"{ref} returned 'pass': {passed!r}; expected a bool")
    if passed is not None and score is not None:
        score = _unit_score(ref, score)
        outcome = Outcome(
            passed, f"{ref} returned pass={passed}, score {number_text(score)}", score
        )
    else:
        outcome = _python_outcome(ref, passed if score is None else score, threshold)
    return outcome if reason is None else dataclasses.replace(outcome, reason=clip(str(reason)))


def _unit_score(ref: str, value: Any) -> float:
    score = float(value)
    if not 0.0 <= score <= 1.0:
        raise CheckFailed(f"{ref} returned score {value!r}, outside 0..1")
    return score


def check_choice(value: Any, output: str, a: Assertion, ctx: AssertionContext) -> Outcome:
    """The choice the answer names, against the case's answer key (see :mod:`.choices`)."""
    from .choices import choice_marks, extract_choice

    choices, right = ctx.choices, ctx.answer_index
    if not choices:
        raise CheckFailed("the case has no choices")
    try:
        marks = choice_marks(choices, ctx.choice_labels)
    except ValueError as exc:
        raise CheckFailed(str(exc)) from None
    if right is None or not 0 <= right < len(marks):
        raise CheckFailed(f"the case has no answer among its {len(marks)} choices")
    chosen = extract_choice(output, choices, ctx.choice_labels)
    answer = f"{marks[right]} ({clip(choices[right], 40)})"
    if chosen is None:
        return Outcome(False, f"named no choice; answer {answer}", 0.0)
    if chosen == right:
        return Outcome(True, f"chose {answer}, the answer", 1.0)
    picked = f"{marks[chosen]} ({clip(choices[chosen], 40)})"
    return Outcome(False, f"chose {picked}; answer {answer}", 0.0)


def check_engine_graded(value: Any, output: str, a: Assertion, ctx: AssertionContext) -> Outcome:
    # Judges and embeddings are called by the engine, which gives the verdict; reaching this
    # means a caller evaluated locally what only a model can grade.
    raise CheckFailed(f"{a.type} is graded by a model call, not locally")
