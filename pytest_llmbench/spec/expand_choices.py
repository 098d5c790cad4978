"""Multiple choice: a case's (or a dataset row's) ``choices`` and the index of its ``answer``.

The options are kept as text and the answer (a letter, an index counted from the file's
``answer_base``, or the option's text) resolved to a 0-based index at collection; a case that
expects nothing else expects its right option.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .expand_place import Place
    from .schema import CaseSpec, EvalSpec


@dataclass(frozen=True)
class Choices:
    """A case's multiple choice options and its right one, or neither."""

    options: tuple[str, ...] | None = None
    answer_index: int | None = None  #: 0-based


#: A case that is no multiple choice.
NO_CHOICES = Choices()


def case_choices(spec: EvalSpec, case: CaseSpec, place: Place, case_id: str) -> Choices:
    """An inline case's ``choices:`` and the index of its ``answer:``."""
    if case.choices is None:
        if case.answer is not None:
            raise place.error(f"case {case_id!r}: `answer` needs `choices`", "answer")
        return NO_CHOICES
    return choice_pair(
        spec, place, case_id, case.choices, place.text("answer", case.answer), None, ("answer",)
    )


def choice_pair(
    spec: EvalSpec,
    place: Place,
    case_id: str,
    choices: Sequence[Any],
    answer: Any,
    labels: Sequence[str] | None,
    key: tuple[Any, ...],
) -> Choices:
    """``choices`` as text and ``answer`` (at ``key``, named by the dataset's ``labels``) as
    their index; at least two options and an answer among them, or a collection error."""
    from ..scoring import answer_index

    texts = tuple(str(choice) for choice in choices)
    if len(texts) < 2:
        raise place.error(f"case {case_id!r}: `choices` needs at least two options", "choices")
    if answer is None or (isinstance(answer, str) and not answer.strip()):
        raise place.error(f"case {case_id!r}: `choices` needs an `answer`", *key)
    try:
        index = answer_index(answer, texts, labels=labels, base=spec.answer_base)
    except ValueError as exc:
        raise place.error(f"case {case_id!r}: answer: {exc}", *key) from None
    return Choices(texts, index)


def choice_expected(expected: str | None, choices: Choices) -> str | None:
    """A multiple choice case expects its right option unless it says otherwise."""
    if expected is not None or choices.options is None or choices.answer_index is None:
        return expected
    return choices.options[choices.answer_index]
