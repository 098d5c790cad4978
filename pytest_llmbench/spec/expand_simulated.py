"""The simulated user: a case whose user messages a second model writes (``simulated_user:``).

The simulated user's own assertions check every reply of the model during the conversation;
the case's and the file's check the last reply, as a scripted conversation's do. A judged
assertion cannot be among the former (it would call a judge on every reply).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from .expand_plain import case_fields
from .expand_resolve import resolve
from .expand_turns import check_turns_file
from .turns import TurnError, simulated_user, simulated_user_refusal, turn_variables

if TYPE_CHECKING:
    from .expand_choices import Choices
    from .expand_place import Place
    from .resolved import EvalCase
    from .schema import CaseSpec, EvalSpec


def simulated_case(
    spec: EvalSpec, case: CaseSpec, place: Place, case_id: str, choices: Choices
) -> EvalCase:
    """A case whose user is simulated: its own assertions check every reply of the model, the
    case's and the file's the last one (as a scripted conversation's). ``choices`` are
    refused: they go with one prompt."""
    assert case.simulated_user is not None
    given = [key for key in ("prompt", "messages", "turns") if getattr(case, key) is not None]
    refusal = simulated_user_refusal(given)
    if refusal is not None:
        raise place.error(f"case {case_id!r}: {refusal}", given[0])
    check_turns_file(spec, place, f"case {case_id!r}", ("simulated_user",))
    for key in ("choices", "images"):
        if getattr(case, key):
            message = f"case {case_id!r}: `{key}` go with one prompt, not a simulated user"
            raise place.error(message, key)
    system = case.system if case.system is not None else spec.system
    try:
        variables = turn_variables(spec.prompt, case.vars)  # {{prompt}}, as in turns
        user, own, messages = simulated_user(case.simulated_user, system, variables)
    except TurnError as exc:
        raise place.error(f"case {case_id!r}: {exc}", *exc.key) from None
    own_keys = [("simulated_user", "assert", n) for n in range(len(own))]
    resolved = resolve(
        spec,
        place,
        [*own, *case.assertions],
        own_keys=[*own_keys, *(("assert", n) for n in range(len(case.assertions)))],
        case_id=case_id,
        messages=messages,
        template=messages,
        template_vars=None,
        expected=place.text("expected", case.expected),
        **case_fields(case),
        images=(),
        choices=None,
        answer_index=None,
        choice_labels=None,
    )
    _check_unjudged(resolved, user.checks, place, own_keys)
    return replace(resolved, simulated_user=user)


def _check_unjudged(
    case: EvalCase, checks: Sequence[int], place: Place, keys: Sequence[tuple[Any, ...]]
) -> None:
    """A simulated user's assertions (``checks``, written at ``keys``) run on every reply
    during the conversation: none may call a judge."""
    for index in checks:
        if case.assertions[index].graded is not None:
            message = (
                f"case {case.id!r}: `{case.assertions[index].type}` is judged: a simulated "
                "user's assertions are checked on every reply during the conversation; give it "
                "on the case to judge the last reply"
            )
            raise place.error(message, *keys[index])
