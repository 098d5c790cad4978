"""Reading a judge's reply: one JSON object, strictly, and its fields, each checked for its type
and range. Every problem is a :class:`VerdictError` with a short message that says what is
wrong; the engine shows it to the judge in a retry and, after the last attempt, records it as
the judge's error. Each judge kind's parser (:mod:`.verdicts`, :mod:`.jury`, :mod:`.rubric`,
:mod:`.rag_metrics`, :mod:`.grader`) reads its shape with these.
"""

from __future__ import annotations

import dataclasses
import json
import re
from typing import Any

from ..scoring import clip, quoted

QUOTE_LIMIT = 60  # a judge's reply is quoted shorter than an answer
#: A reply that is one fenced block; the body must then hold the object and nothing else.
_FENCED = re.compile(r"```(?i:json)?\s*(.*?)\s*```", re.DOTALL)


class VerdictError(ValueError):
    """A judge reply that is not a valid verdict; the message says what is wrong."""


@dataclasses.dataclass(frozen=True)
class ParsedVerdict:
    """The scores and reasons of one valid judge reply, keyed by the request's score keys."""

    #: key -> score: jury 1..5, rubric 0..1, factuality and closed_qa 1.0 or 0.0
    scores: dict[str, float]
    #: key -> the judge's reason; factuality's starts with "choice X: "
    reasons: dict[str, str]
    #: a RAG metric's per-claim (``{claim, supported, reason}``) or per-chunk
    #: (``{chunk, relevant, reason}``) verdicts; with no score, the verdict is undetermined
    #: (nothing to count) and ``reasons`` says why
    details: tuple[dict[str, Any], ...] = ()
    #: model-graded: the label of the choice the judge picked
    choice: str | None = None


class _DuplicateKey(Exception):
    """A JSON object names a key twice; which value the judge meant is unknowable."""


def load_object(reply: str) -> dict[str, Any]:
    """The one JSON object ``reply`` is (in a single ``` fence at most), keys unique."""
    if not isinstance(reply, str):
        raise VerdictError(f"reply must be text, got {type(reply).__name__}")
    text = _unfenced(reply.strip())
    if not text:
        raise VerdictError("empty reply")
    value, end = _decode(text)
    rest = text[end:].strip()
    if rest.startswith(("{", "[")):
        raise VerdictError(
            f"more than one JSON value: {quoted(rest, QUOTE_LIMIT)} follows the first"
        )
    if rest:
        raise VerdictError(f"text after the JSON object: {quoted(rest, QUOTE_LIMIT)}")
    if not isinstance(value, dict):
        raise VerdictError(f"expected a JSON object, got {json_type(value)}")
    return value


def _unfenced(text: str) -> str:
    if not text.startswith("```"):
        return text
    match = _FENCED.fullmatch(text)
    if match is None:
        raise VerdictError("unclosed ``` fence")
    body = match.group(1)
    if "```" in body:
        raise VerdictError("more than one ``` fence")
    return body


def _decode(text: str) -> tuple[Any, int]:
    # strict=False: a control character written raw inside a string (a newline or a tab in a
    # reason, as small models write under a JSON grammar) is read as it is, not refused: the
    # reply means the same with it escaped.
    decoder = json.JSONDecoder(object_pairs_hook=_unique_keys, strict=False)
    try:
        return decoder.raw_decode(text)
    except json.JSONDecodeError as exc:
        start = text.find("{")
        if exc.pos == 0 and start > 0:
            raise VerdictError(
                f"text before the JSON object: {quoted(text[:start], QUOTE_LIMIT)}"
            ) from None
        raise VerdictError(f"not JSON: {exc.msg} at {exc.lineno}:{exc.colno}") from None
    except _DuplicateKey as exc:
        raise VerdictError(f"duplicate key {quoted(str(exc), QUOTE_LIMIT)}") from None
    except (RecursionError, ValueError) as exc:  # nested too deep; an integer too long
        raise VerdictError(f"not JSON: {clip(str(exc), QUOTE_LIMIT)}") from None


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise _DuplicateKey(key)
        result[key] = value
    return result


def entries(data: dict[str, Any], name: str) -> list[dict[str, Any]]:
    """``data[name]``: a list of objects."""
    value = required(data, name)
    if not isinstance(value, list) or not all(isinstance(item, dict) for item in value):
        raise VerdictError(
            f"{quoted(name, QUOTE_LIMIT)} must be a list of objects, got {shown(value)}"
        )
    return value


def boolean(entry: dict[str, Any], name: str, parent: str) -> bool:
    """``entry[name]``: true or false (``parent`` names the entry in errors)."""
    value = required(entry, name, parent)
    if not isinstance(value, bool):
        raise VerdictError(
            f"{quoted(parent + '.' + name, QUOTE_LIMIT)} must be true or false, got {shown(value)}"
        )
    return value


def required(data: dict[str, Any], name: str, parent: str | None = None) -> Any:
    """``data[name]``, which must be there."""
    if name not in data:
        path = f"{parent}.{name}" if parent else name
        raise VerdictError(f"missing {quoted(path, QUOTE_LIMIT)}")
    return data[name]


def reason_text(data: dict[str, Any], parent: str | None = None) -> str:
    """``data["reason"]``: a string."""
    value = required(data, "reason", parent)
    if not isinstance(value, str):
        path = f"{parent}.reason" if parent else "reason"
        raise VerdictError(f"{quoted(path, QUOTE_LIMIT)} must be a string, got {json_type(value)}")
    return value


def letter(data: dict[str, Any], name: str, allowed: dict[str, float]) -> str:
    """``data[name]``: one of the ``allowed`` letters, any case, spaces around it ignored."""
    value = required(data, name)
    letter = value.strip().upper() if isinstance(value, str) else None
    if letter is None or letter not in allowed:
        options = ", ".join(allowed)
        raise VerdictError(
            f"{quoted(name, QUOTE_LIMIT)} must be one of {options}, got {shown(value)}"
        )
    return letter


def is_number(value: Any) -> bool:
    """Whether ``value`` is a JSON number (a boolean is not)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def json_type(value: Any) -> str:
    """The JSON name of ``value``'s type, for errors."""
    names = {dict: "object", list: "array", str: "string", bool: "boolean", type(None): "null"}
    return names.get(type(value), "number")


def shown(value: Any) -> str:
    """``value`` as JSON, clipped, for errors."""
    return clip(json.dumps(value, ensure_ascii=False), QUOTE_LIMIT)
