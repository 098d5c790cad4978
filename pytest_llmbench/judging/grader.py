"""A user's grader (``type: model-graded``): what its judge is sent and how its reply is read.

The judge gets one user message: the user's prompt, rendered, then one paragraph saying how to
answer. With structured output (``structured: true``, the default) the reply is one JSON
object, ``{"choice": LABEL}``, or ``{"reasoning": ..., "choice": LABEL}`` with
``chain_of_thought``, and its JSON schema (the labels as an enum) goes as ``response_format``.
Without it (``structured: false``) the reply is text whose last non-empty line is
``Choice: LABEL`` or the label alone; with ``chain_of_thought`` the lines before it are the
reasoning (:func:`.verdicts.parse_verdict` reads both). A choice that is not one of the labels
is a :class:`~.verdicts.VerdictError`: asked again, then the judge's error, never a score.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..scoring.model_graded import ModelGradedSpec


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
