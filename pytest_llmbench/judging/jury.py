"""The jury (``type: jury``): each judge scores every dimension of the answer from 1 to 5, the
six standard ones first (three more for ``scope: conversation``), then the user's. What the
judge is told of each dimension, the reply's shape and schema, its strict reading, and how the
panel's per-dimension scores make the assertion's score and reason.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..scoring import clip, dimension_key, quoted
from .replies import (
    QUOTE_LIMIT,
    ParsedVerdict,
    VerdictError,
    is_number,
    json_type,
    reason_text,
    required,
    shown,
)
from .tagging import REASON_SHAPE, json_object

#: The standard jury dimensions, in the order they are scored and reported.
JURY_DIMENSIONS: tuple[str, ...] = (
    "correctness",
    "completeness",
    "relevance",
    "format",
    "coherence",
    "following_instructions",
)
#: The dimensions a jury with ``scope: conversation`` scores after the six.
CONVERSATION_DIMENSIONS: tuple[str, ...] = (
    "role_adherence",
    "knowledge_retention",
    "goal_completion",
)
_DEFINITIONS = {
    "correctness": "is it factually and logically right (agrees with the reference, if any)?",
    "completeness": "does it answer every part of the question, leaving nothing essential out?",
    "relevance": "does it stay on the question, without off-topic or padded content?",
    "format": "is it in the requested form (length, structure, markup, language)?",
    "coherence": "is it clear, well organised and free of contradictions?",
    "following_instructions": "does it obey every instruction in the system prompt and question?",
    "role_adherence": "does the assistant keep to the role, persona and rules of its system "
    "prompt on every turn?",
    "knowledge_retention": "does the assistant remember and use what was said on earlier turns, "
    "without asking for it again or contradicting it?",
    "goal_completion": "by the last turn, has the assistant done what the user came for?",
}
#: The jury's task, as the judge is told it.
JURY_SCALE = (
    "Score each dimension with an integer from 1 to 5: 1 very poor, 2 poor, "
    "3 acceptable, 4 good, 5 excellent."
)


def check_dimensions(dimensions: tuple[str, ...]) -> None:
    """Raise ValueError unless ``dimensions`` are at least one, each a key, none repeated."""
    if not dimensions:
        raise ValueError("a jury needs at least one dimension")
    for name in dimensions:
        if name != dimension_key(name):
            raise ValueError(f"dimension {name!r} is not a key; use {dimension_key(name)!r}")
    repeated = sorted({name for name in dimensions if dimensions.count(name) > 1})
    if repeated:
        raise ValueError(f"repeated dimensions: {', '.join(repeated)}")


def dimension_lines(dimensions: tuple[str, ...]) -> str:
    """What the judge is told of each dimension: its definition, or its name for the user's."""
    return "\n".join(_dimension_line(key) for key in dimensions)


def _dimension_line(key: str) -> str:
    definition = _DEFINITIONS.get(key)
    if definition is None:
        definition = f"as the name says ({key.replace('_', ' ')})."
    return f"- {key}: {definition}"


def jury_shape(dimensions: tuple[str, ...]) -> str:
    """The reply's shape, as the judge is shown it."""
    fields = (f'"{key}": {{"score": <1 to 5>, {REASON_SHAPE}}}' for key in dimensions)
    return "{" + ", ".join(fields) + "}"


def jury_schema(dimensions: tuple[str, ...]) -> dict[str, Any]:
    """The reply's JSON Schema: an object per dimension, its score and reason."""
    # An enum rather than minimum/maximum: llama.cpp's grammar enforces enums, not ranges.
    score = {"type": "integer", "enum": [1, 2, 3, 4, 5]}
    dimension = json_object({"score": score, "reason": {"type": "string"}})
    return json_object({key: dimension for key in dimensions})


def parse_jury(dimensions: tuple[str, ...], data: dict[str, Any]) -> ParsedVerdict:
    """Every dimension's score (an integer 1..5) and reason; raise :class:`VerdictError`."""
    missing = [key for key in dimensions if key not in data]
    if missing:
        plural = "s" if len(missing) > 1 else ""
        names = ", ".join(quoted(key, QUOTE_LIMIT) for key in missing)
        raise VerdictError(clip(f"missing dimension{plural} {names}", 200))
    scores: dict[str, float] = {}
    reasons: dict[str, str] = {}
    for key in dimensions:
        entry = data[key]
        if not isinstance(entry, dict):
            what = json_type(entry)
            raise VerdictError(
                f"{quoted(key, QUOTE_LIMIT)} must be an object with score and reason, got {what}"
            )
        scores[key] = _jury_score(required(entry, "score", key), f"{key}.score")
        reasons[key] = reason_text(entry, key)
    return ParsedVerdict(scores, reasons)


def _jury_score(value: Any, path: str) -> float:
    # The range test comes first: it is safe for huge integers and NaN, float() is not.
    if not is_number(value) or not 1 <= value <= 5 or value != int(value):
        raise VerdictError(
            f"{quoted(path, QUOTE_LIMIT)} must be an integer 1..5, got {shown(value)}"
        )
    return float(value)


def scaled(score: float) -> float:
    """A dimension's score (1..5) on 0..1."""
    return (min(max(score, 1.0), 5.0) - 1.0) / 4.0


def jury_reason(
    aggregate: str,
    threshold: float,
    judges: int,
    dimensions: Mapping[str, float],
    passed: Mapping[str, bool],
) -> str:
    """The verdict's reason: the statistic over ``judges`` valid judges, each dimension's
    score, and those below the threshold."""
    shown_scores = ", ".join(f"{key} {value:.2f}" for key, value in dimensions.items())
    failing = [key for key, ok in passed.items() if not ok]
    head = f"{aggregate} over {judges} judge(s), pass >= {threshold:g}: {shown_scores}"
    if failing:
        head += f"; below: {', '.join(failing)}"
    return head
