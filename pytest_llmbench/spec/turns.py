"""Scripted conversations: a case's ``turns:`` checked, rendered and tied to its assertions.

A case may give ``turns:`` instead of ``prompt``/``messages``: user messages that the model under
test answers one after the other, each reply generated from the whole history so far, and
assistant replies given verbatim (``- assistant: "..."``, no call) to set up a history. An
assertion attaches to the user turn whose reply it checks. :func:`script_turns` checks the
list and renders it; every problem is a :class:`TurnError` naming the key at fault inside the
case, which :mod:`.expand` turns into a ``path:line`` collection error.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from .file_kinds import file_kind
from .resolved import EvalCase, SimulatedUser, Turn
from .schema import EvalSpec, RawAssertion, SimulatedUserSpec, TurnSpec, without_stop_flag
from .templating import TemplateKeyError, render_chat, render_template

#: The keys a turn may have.
TURN_KEYS = ("user", "assistant", "assert", "weight")
#: The keys a ``simulated_user:`` may have.
SIMULATED_USER_KEYS = tuple(
    field.alias or name for name, field in SimulatedUserSpec.model_fields.items()
)
#: The case keys a simulated user replaces: it writes the user's messages itself.
SIMULATED_USER_EXCLUDES = ("prompt", "messages", "turns")


class TurnError(ValueError):
    """A problem with a case's ``turns:``; ``key`` is where it sits inside the case."""

    def __init__(self, key: tuple[Any, ...], message: str) -> None:
        super().__init__(message)
        self.key = key


@dataclass(frozen=True)
class ScriptedTurns:
    """A case's ``turns:`` checked and rendered."""

    #: the first call's chat before ``{{vars}}`` are rendered: the system prompt and the turns
    #: up to the first one the model answers
    template: tuple[dict[str, str], ...]
    messages: tuple[dict[str, str], ...]  #: ``template`` rendered
    #: every turn rendered; ``checks`` holds the indices of the turns' own assertions (in
    #: :attr:`assertions`), the case's and the file's are added by :func:`with_case_checks`
    turns: tuple[Turn, ...]
    assertions: tuple[RawAssertion, ...]  #: the turns' own assertions, in turn order
    #: where each of :attr:`assertions` is written inside the case: ``("turns", 2, "assert", 0)``
    keys: tuple[tuple[Any, ...], ...]


def script_turns(
    specs: Sequence[TurnSpec], system: str | None, variables: dict[str, Any] | None
) -> ScriptedTurns:
    """Check ``specs`` and render them (and ``system``) with ``variables`` (None: verbatim).

    Raises :class:`TurnError` for an empty list, a turn with neither or both of ``user`` and
    ``assistant``, an assertion or a weight on a turn whose reply is not generated, a list that
    does not end with a user turn, or a ``{{name}}`` the variables lack.
    """
    if not specs:
        raise TurnError(("turns",), "`turns` is empty: give at least one `- user:` turn")
    roles = [_role(spec, index) for index, spec in enumerate(specs)]
    if roles[-1] != "user":
        last = len(specs) - 1
        message = f"turns[{last}]: the last turn must be a `user` turn (the model answers it)"
        raise TurnError(("turns", last), message)
    answered = [
        role == "user" and (i + 1 == len(roles) or roles[i + 1] == "user")
        for i, role in enumerate(roles)
    ]
    turns: list[Turn] = []
    assertions: list[RawAssertion] = []
    keys: list[tuple[Any, ...]] = []
    for index, (spec, role) in enumerate(zip(specs, roles, strict=True)):
        _check_scored(spec, index, answered[index])
        checks = tuple(range(len(assertions), len(assertions) + len(spec.assertions)))
        assertions.extend(spec.assertions)
        keys.extend(("turns", index, "assert", n) for n in range(len(spec.assertions)))
        text = _render(_content(spec), variables, ("turns", index, role))
        turns.append(Turn(role, text, answered[index], spec.weight, checks))
    first = answered.index(True)
    template = _opening(specs[: first + 1], roles, system)
    return ScriptedTurns(
        template=template,
        messages=_rendered_opening(template, variables, system is not None),
        turns=tuple(turns),
        assertions=tuple(assertions),
        keys=tuple(keys),
    )


def simulated_user(
    spec: SimulatedUserSpec, system: str | None, variables: dict[str, Any]
) -> tuple[SimulatedUser, tuple[RawAssertion, ...], tuple[dict[str, str], ...]]:
    """A case's ``simulated_user:`` rendered with ``variables``: the simulated user (its checks
    are indices 0.. of the case's assertions), its own assertions without their
    ``stop_on_fail`` marks, and the case's messages (the system prompt alone, rendered).

    Raises :class:`TurnError` for a ``{{name}}`` the variables lack.
    """
    instructions = _render_user_key(spec.instructions, variables, "instructions")
    first = spec.first_message
    if first is not None:
        first = _render_user_key(first, variables, "first_message")
        if not first.strip():  # an empty message is never sent (providers refuse one)
            raise TurnError(("simulated_user", "first_message"), "simulated_user.first_message "
                            "renders empty: give the opening line, or leave the key out to "
                            "have the simulated user write it")  # fmt: skip
    checks = tuple(range(len(spec.assertions)))
    stop_on_fail = tuple(
        index
        for index, raw in enumerate(spec.assertions)
        if isinstance(raw, dict) and raw.get("stop_on_fail") is True
    )
    user = SimulatedUser(
        instructions,
        spec.model,
        spec.max_turns,
        spec.stop,
        first,
        checks,
        stop_on_fail,
        agent_stop=spec.agent_stop,
    )
    messages: tuple[dict[str, str], ...] = ()
    if system is not None:
        messages = _rendered_opening(({"role": "system", "content": system},), variables, True)
    return user, tuple(without_stop_flag(raw) for raw in spec.assertions), messages


def _render_user_key(text: str, variables: dict[str, Any], key: str) -> str:
    try:
        return render_template(text, variables)
    except ValueError as exc:
        raise TurnError(("simulated_user", key), f"simulated_user.{key}: {exc}") from None


def simulated_user_refusal(given: Sequence[str]) -> str | None:
    """Why a case with a ``simulated_user`` cannot also give the keys ``given`` (the first of
    :data:`SIMULATED_USER_EXCLUDES` among them), or None."""
    clash = next((key for key in SIMULATED_USER_EXCLUDES if key in given), None)
    if clash is None:
        return None
    return f"give either `simulated_user` or `{clash}`, not both: the simulated user writes the user's messages"


def with_case_checks(turns: tuple[Turn, ...], own: int, total: int) -> tuple[Turn, ...]:
    """``turns`` with the case's and the file's assertions (indices ``own`` to ``total`` of the
    case's, after the turns' own) checked on the reply to the last turn."""
    last = len(turns) - 1
    extra = tuple(range(own, total))
    return (*turns[:last], replace(turns[last], checks=(*turns[last].checks, *extra)))


def with_turns(case: EvalCase, scripted: ScriptedTurns) -> EvalCase:
    """``case`` with its turns, the case's and the file's assertions checked on the last one."""
    turns = with_case_checks(scripted.turns, len(scripted.assertions), len(case.assertions))
    return replace(case, turns=turns)


def conversation_refusal(spec: EvalSpec, key: str = "turns") -> str | None:
    """Why the file's cases cannot have a conversation, given by ``key`` (``turns`` or
    ``simulated_user``, as the user wrote it): a conversation is answered by the model itself,
    not by an agent loop, a solver or option scoring. None when they can."""
    kind = file_kind(spec.kind)
    other = (
        kind.written
        if not kind.conversations
        else "`solver`"
        if spec.solver is not None
        else "`loglikelihood`"
        if spec.loglikelihood is not None
        else None
    )
    if other is None:
        return None
    return f"`{key}` is a conversation with the model itself, not with {other}"


def turn_variables(template: str | None, variables: dict[str, Any]) -> dict[str, Any]:
    """The variables an inline case's turns render with: its vars, and the file's (or the
    prompt variant's) ``prompt`` template rendered with them as ``{{prompt}}``."""
    rendered = dict(variables)
    if template is not None and "prompt" not in rendered:
        try:
            rendered["prompt"] = render_template(template, variables)
        except ValueError as exc:
            raise TurnError(("vars",), str(exc)) from None
    return rendered


def row_turns(raw: Sequence[Any]) -> list[TurnSpec]:
    """A dataset row's ``turns`` validated; :class:`TurnError` names the turn at fault."""
    from pydantic import ValidationError

    specs = []
    for index, turn in enumerate(raw):
        try:
            specs.append(TurnSpec.model_validate(turn))
        except ValidationError as exc:
            raise TurnError((), f"turns[{index}]: {_turn_problem(exc)}") from None
    return specs


def _turn_problem(error: Any) -> str:
    """A turn's first schema problem as text: ``unknown key 'usr' (did you mean 'user'?)``."""
    first = error.errors(include_url=False)[0]
    loc = [str(part) for part in first["loc"]]
    if first["type"] == "extra_forbidden":
        return f"unknown key {loc[-1]!r}{turn_key_hint(loc[-1])}"
    message = first["msg"].removeprefix("Value error, ")
    return f"{'.'.join(loc)}: {message}" if loc else message


def turn_key_hint(key: str, keys: Sequence[str] = TURN_KEYS) -> str:
    """`` (did you mean 'user'?)`` for a mistyped turn key (or one of ``keys``), else ''."""
    close = difflib.get_close_matches(key, keys, n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _role(spec: TurnSpec, index: int) -> str:
    if (spec.user is None) == (spec.assistant is None):
        which = "both" if spec.user is not None else "neither"
        message = f"turns[{index}]: give either `user` or `assistant`, not {which}"
        raise TurnError(("turns", index), message)
    return "user" if spec.user is not None else "assistant"


def _content(spec: TurnSpec) -> str:
    return spec.user if spec.user is not None else spec.assistant or ""


def _check_scored(spec: TurnSpec, index: int, answered: bool) -> None:
    """Assertions and weights belong to the turns the model answers."""
    if answered:
        return
    key = "assert" if spec.assertions else "weight" if "weight" in spec.model_fields_set else None
    if key is None:
        return
    if spec.assistant is not None:
        why = "an `assistant` turn is given verbatim: there is no reply of the model to check"
    else:
        why = f"the reply to this turn is given verbatim by turns[{index + 1}]: nothing to check"
    raise TurnError(("turns", index, key), f"turns[{index}]: `{key}`: {why}")


def _render(text: str, variables: dict[str, Any] | None, key: tuple[Any, ...]) -> str:
    try:
        return render_template(text, variables)
    except ValueError as exc:
        raise TurnError(key, f"{key[0]}[{key[1]}]: {exc}") from None


def _opening(
    specs: Sequence[TurnSpec], roles: Sequence[str], system: str | None
) -> tuple[dict[str, str], ...]:
    head = [] if system is None else [{"role": "system", "content": system}]
    turns = [
        {"role": role, "content": _content(spec)} for spec, role in zip(specs, roles, strict=False)
    ]
    return tuple(head + turns)


def _rendered_opening(
    template: tuple[dict[str, str], ...], variables: dict[str, Any] | None, has_system: bool
) -> tuple[dict[str, str], ...]:
    """The opening rendered; only the system prompt can fail here (the turns rendered before)."""
    try:
        return render_chat(template, variables)
    except TemplateKeyError as exc:
        if has_system and exc.index == 0:
            raise TurnError(("system",), str(exc)) from None
        raise TurnError(("turns",), str(exc)) from None  # pragma: no cover - rendered above
