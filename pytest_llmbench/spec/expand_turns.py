"""The scripted conversation: a case's (or a dataset row's) ``turns:`` expanded into a case.

The turns are checked and rendered by :mod:`.turns`; here they become a case whose
``messages`` are its first call's chat, whose turns' own assertions come first, and whose
case-level and file-level assertions check the reply to the last turn. An inline case's turns
render with its vars; a dataset row's are sent verbatim.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .expand_plain import case_fields, context_vars
from .expand_resolve import case_images, resolve
from .expand_rows import row_fields, row_system
from .turns import (
    ScriptedTurns,
    TurnError,
    conversation_refusal,
    row_turns,
    script_turns,
    turn_variables,
    with_turns,
)

if TYPE_CHECKING:
    from .datasets import DatasetRow
    from .expand_choices import Choices
    from .expand_place import Place
    from .resolved import EvalCase
    from .schema import CaseSpec, EvalSpec


@dataclass(frozen=True)
class _Scripted:
    """An inline case's ``turns:`` rendered, with the vars they were rendered with."""

    turns: ScriptedTurns
    variables: dict[str, Any] | None

    @property
    def template(self) -> tuple[dict[str, str], ...]:
        return self.turns.template

    def own_keys(self, case_assertions: Sequence[Any]) -> list[tuple[Any, ...]]:
        """Where each of the case's own assertions is written: the turns', then ``assert:``."""
        return [*self.turns.keys, *(("assert", n) for n in range(len(case_assertions)))]


def turns_case(
    spec: EvalSpec, case: CaseSpec, place: Place, case_id: str, choices: Choices
) -> EvalCase:
    """An inline case's scripted conversation (``choices`` are refused: they score one
    answer)."""
    _check_turns_case(spec, case, place, case_id)
    try:
        scripted = _inline_turns(spec, case)
    except TurnError as exc:
        raise place.error(f"case {case_id!r}: {exc}", *exc.key) from None
    resolved = resolve(
        spec,
        place,
        [*scripted.turns.assertions, *case.assertions],
        own_keys=scripted.own_keys(case.assertions),
        case_id=case_id,
        messages=scripted.turns.messages,
        template=scripted.template,
        template_vars=scripted.variables,
        expected=place.text("expected", case.expected),
        **case_fields(case),
        images=case_images(place, case.images, place.path.parent, case_id),
        choices=None,
        answer_index=None,
        choice_labels=None,
    )
    return with_turns(resolved, scripted.turns)


def row_turns_case(spec: EvalSpec, row: DatasetRow, place: Place, where: str) -> EvalCase:
    """A dataset row's own conversation: its turns are sent verbatim (as a row's own prompt
    is), the file's ``system`` is rendered with the row's columns."""
    assert row.turns is not None
    check_turns_file(spec, place, where, ())
    if row.choices is not None:
        raise place.error(f"{where}: `choices` score one answer; they do not go with `turns`")
    try:
        scripted = script_turns(row_turns(row.turns), spec.system, None)
    except TurnError as exc:
        raise place.error(f"{where}: {exc}") from None
    messages = row_system(spec, place, where, scripted.messages, row.vars)
    resolved = resolve(
        spec,
        place,
        [*scripted.assertions, *row.assertions],
        case_id=row.id,
        messages=messages,
        template=scripted.template,
        template_vars=None,
        expected=row.expected,
        **row_fields(row, place),
        choices=None,
        answer_index=None,
        choice_labels=None,
    )
    return with_turns(resolved, scripted)


def _check_turns_case(spec: EvalSpec, case: CaseSpec, place: Place, case_id: str) -> None:
    """``turns`` replace ``prompt`` and ``messages``, and go with plain completions only."""
    for key in ("prompt", "messages"):
        if getattr(case, key) is not None:
            message = f"case {case_id!r}: give either `turns` or `{key}`, not both"
            raise place.error(message, key)
    check_turns_file(spec, place, f"case {case_id!r}", ("turns",))
    if case.choices is not None:
        message = f"case {case_id!r}: `choices` score one answer; they do not go with `turns`"
        raise place.error(message, "choices")


def check_turns_file(spec: EvalSpec, place: Place, who: str, key: tuple[Any, ...]) -> None:
    """A conversation is answered by the model itself (:func:`.turns.conversation_refusal`);
    the refusal names the key given (a dataset row's is ``turns``)."""
    refusal = conversation_refusal(spec, key[0] if key else "turns")
    if refusal is not None:
        raise place.error(f"{who}: {refusal}", *key)


def _inline_turns(spec: EvalSpec, case: CaseSpec) -> _Scripted:
    """An inline case's turns rendered with its vars (and ``{{context}}``, the case's
    context); the file's (or the prompt variant's) ``prompt`` template, rendered with them, is
    the variable ``{{prompt}}``."""
    assert case.turns is not None
    variables = turn_variables(spec.prompt, context_vars(case))
    system = case.system if case.system is not None else spec.system
    return _Scripted(script_turns(case.turns, system, variables), variables)
