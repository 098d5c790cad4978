"""A user's grader (``type: model-graded``): what its judge is sent and how its reply is read.

The judge gets one user message: the user's prompt, rendered, then one paragraph saying how to
answer. With structured output (``structured: true``, the default) the reply is one JSON
object, ``{"choice": LABEL}``, or ``{"reasoning": ..., "choice": LABEL}`` with
``chain_of_thought``, and its JSON schema (the labels as an enum) goes as ``response_format``.
Without it (``structured: false``) the reply is text whose last non-empty line is
``Choice: LABEL`` or the label alone; with ``chain_of_thought`` the lines before it are the
reasoning (:func:`parse_grader` reads both). A choice that is not one of the labels
is a :class:`~.verdicts.VerdictError`: asked again, then the judge's error, never a score.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from ..scoring import GRADER_SCORE_KEY, quoted, votes_text
from .replies import QUOTE_LIMIT, ParsedVerdict, VerdictError, load_object

if TYPE_CHECKING:
    from ..scoring import ModelGradedSpec


def grader_messages(prompt: str, spec: ModelGradedSpec) -> list[dict[str, str]]:
    """The judge's messages: the rendered ``prompt``, then how to answer."""
    return [{"role": "user", "content": f"{prompt.rstrip()}\n\n{_how_to_answer(spec)}"}]


def _options(spec: ModelGradedSpec) -> str:
    return ", ".join(spec.labels)


def _how_to_answer(spec: ModelGradedSpec) -> str:
    options = _options(spec)
    # No placeholder text in the shape: small judges copy it into their reply.
    if spec.structured and spec.chain_of_thought:
        return (
            'Reply with only a JSON object of two keys: first "reasoning", your reasoning '
            f'step by step, then "choice", one of {options}.'
        )
    if spec.structured:
        return f'Reply with only a JSON object of one key, "choice": one of {options}.'
    if spec.chain_of_thought:
        return (
            "First write out your reasoning step by step. Then, on the last line, write "
            f'"Choice: X", where X is one of {options}, and nothing after it.'
        )
    return f'Reply with one line, "Choice: X", where X is one of {options}.'


def grader_reason(
    spec: ModelGradedSpec, key: str, score: float, picked: list[str], reasoning: str
) -> str:
    """A grader's verdict's reason: its ``score``, the judges' votes by choice (``picked``),
    the first judge's ``reasoning``."""
    votes = votes_text(spec, picked)
    who = f"choice {picked[0]}" if len(picked) == 1 else f"votes {votes} ({spec.aggregate})"
    head = f"{key} {score:.2f} (pass >= {spec.threshold:g}); {who}"
    return f"{head}; {reasoning}" if reasoning else head


def grader_retry(spec: ModelGradedSpec) -> str:
    """What a judge is told to do after a reply that was not a valid choice."""
    if spec.structured:
        return "Answer again with only the JSON object."
    return f'Answer again, ending with the line "Choice: X" (X one of {_options(spec)}).'


def grader_schema(spec: ModelGradedSpec) -> dict[str, Any]:
    """The JSON schema of a structured reply: the reasoning first (it must come before the
    choice), then the choice as an enum of the labels."""
    properties: dict[str, Any] = {}
    if spec.chain_of_thought:
        properties["reasoning"] = {"type": "string"}
    properties["choice"] = {"type": "string", "enum": list(spec.labels)}
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties),
        "additionalProperties": False,
    }


# --- reading the reply -----------------------------------------------------------------------


#: The last line of a text reply: ``Choice: X`` (any case of "choice"), or X alone.
_CHOICE_LINE = re.compile(r"choice\s*:\s*(?P<label>.*)", re.IGNORECASE)
#: Marks a judge may wrap its label in: markdown emphasis, code, quotes, brackets.
_WRAPPING = "*`\"'()[] \t"


def parse_grader(spec: ModelGradedSpec, reply: str) -> ParsedVerdict:
    """A user's grader's reply: the label picked, its score, the reasoning. A structured reply
    is one JSON object (``choice``, and ``reasoning`` with chain of thought); a text reply's
    last non-empty line is ``Choice: X`` or X alone, the lines before it the reasoning."""
    label, scores, reasons = _grader_reply(spec, reply)
    return ParsedVerdict(scores, reasons, choice=label)


def _grader_reply(
    spec: ModelGradedSpec, reply: str
) -> tuple[str, dict[str, float], dict[str, str]]:
    """(the label picked, its score, the reasoning) of a judge's ``reply``, read strictly;
    raise :class:`VerdictError` naming what is wrong."""
    if spec.structured:
        label, reasoning = _from_json(spec, reply)
    else:
        label, reasoning = _from_text(spec, reply)
    return (
        label,
        {GRADER_SCORE_KEY: spec.score_of(label)},
        {GRADER_SCORE_KEY: reasoning},
    )


def _from_json(spec: ModelGradedSpec, reply: str) -> tuple[str, str]:
    data = load_object(reply)
    if "choice" not in data:
        raise VerdictError("missing 'choice'")
    value = data["choice"]
    if not isinstance(value, str):
        raise VerdictError(f"'choice' must be one of {', '.join(spec.labels)}, got {value!r}")
    reasoning = data.get("reasoning", "")
    if spec.chain_of_thought and "reasoning" not in data:
        raise VerdictError("missing 'reasoning'")
    if not isinstance(reasoning, str):
        raise VerdictError("'reasoning' must be a string")
    return _label(spec, value), reasoning.strip()


def _from_text(spec: ModelGradedSpec, reply: str) -> tuple[str, str]:
    lines = [line for line in (reply or "").strip().splitlines() if line.strip()]
    if not lines:
        raise VerdictError("empty reply")
    last = lines[-1].strip().strip("*`").strip()
    match = _CHOICE_LINE.fullmatch(last)
    written = match.group("label") if match else last
    reasoning = "\n".join(lines[:-1]).strip()
    if spec.chain_of_thought and not reasoning:
        raise VerdictError("no reasoning before the choice line")
    return _label(spec, written), reasoning


def _label(spec: ModelGradedSpec, written: str) -> str:
    """The label ``written`` names: exactly, or else when it matches one label ignoring case;
    surrounding marks and one trailing period are dropped first."""
    text = written.strip(_WRAPPING)
    text = text[:-1].strip(_WRAPPING) if text.endswith(".") else text
    if text in spec.labels:
        return text
    folded = [label for label in spec.labels if label.casefold() == text.casefold()]
    if len(folded) == 1:
        return folded[0]
    raise VerdictError(
        f"the choice must be one of {', '.join(spec.labels)}, got {quoted(written, QUOTE_LIMIT)}"
    )
