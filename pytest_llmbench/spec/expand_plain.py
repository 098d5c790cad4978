"""The plain case: one chat (a ``prompt`` or ``messages``) that the model answers once.

:func:`plain_case` expands an inline case that gives neither ``turns`` nor a simulated user;
:func:`chat_template` and :func:`rendered_chat` build and render the chat of any case that
sends one (a dataset row's too), and :func:`case_fields` and :func:`context_vars` are what every
kind of inline case takes from the case as written.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .context import CONTEXT_VAR, context_text
from .expand_choices import Choices, choice_expected
from .expand_place import FieldError
from .expand_resolve import case_images, resolve
from .templating import TemplateKeyError, render_chat

if TYPE_CHECKING:
    from .expand_place import Place
    from .resolved import EvalCase
    from .schema import CaseSpec, EvalSpec, Message


def plain_case(
    spec: EvalSpec, case: CaseSpec, place: Place, case_id: str, choices: Choices
) -> EvalCase:
    """An inline case asking one chat: its template rendered with its vars (and its
    multiple choice ``choices``), its assertions and the file's."""
    try:
        template, variables, keys = chat_template(
            spec, case.system, case.prompt, case.messages, context_vars(case)
        )
        messages = rendered_chat(template, variables, choices.options, keys)
    except FieldError as exc:
        raise place.error(f"case {case_id!r}: {exc}", *exc.key) from None
    expected = place.text("expected", case.expected)
    return resolve(
        spec,
        place,
        list(case.assertions),
        case_id=case_id,
        messages=messages,
        template=template,
        template_vars=variables,
        expected=choice_expected(expected, choices),
        **case_fields(case),
        images=case_images(place, case.images, place.path.parent, case_id),
        choices=choices.options,
        answer_index=choices.answer_index,
        choice_labels=None,
    )


def case_fields(case: CaseSpec) -> dict[str, Any]:
    """What an inline case's resolved case takes from it as written, whatever asks the model
    (a prompt, turns or a simulated user)."""
    return {
        "threshold": case.threshold,
        "model_params": case.model_params,
        "tags": case.tags,
        "files": case.files,
        "vars": case.vars,
        "task": case.task.model_dump() if case.task else None,
        "expected_output_tokens": case.expected_output_tokens,
        "judge_metrics": case.judge_metrics,
        "include_dirs": case.include_dirs,
        "context": case.context,
    }


def context_vars(case: CaseSpec) -> dict[str, Any]:
    """The case's vars, with ``context`` as ``{{context}}`` renders it when the case gives one
    (the chunks joined by a blank line; an empty retrieval, ``""``)."""
    if case.context is None:
        return case.vars
    return {**case.vars, CONTEXT_VAR: context_text(case.context)}


def chat_template(
    spec: EvalSpec,
    case_system: str | None,
    prompt: str | None,
    messages: list[Message] | None,
    variables: dict[str, Any] | None,
) -> tuple[tuple[dict[str, str], ...], dict[str, Any] | None, tuple[tuple[Any, ...], ...]]:
    """The chat to send before ``{{vars}}`` are rendered, the vars to render it with, and for
    each message the case key that a missing placeholder points at.

    A system message comes first unless ``messages`` has one, then the user turn(s). Raises
    :class:`~.expand_place.FieldError` naming the case key at fault.
    """
    result: list[dict[str, str]] = []
    keys: list[tuple[Any, ...]] = []
    system = case_system if case_system is not None else spec.system
    has_system = messages is not None and any(m.role == "system" for m in messages)
    if system is not None and not has_system:
        result.append({"role": "system", "content": system})
        keys.append(("system",) if case_system is not None else ())
    if messages is not None:
        for index, item in enumerate(messages):
            result.append({"role": item.role, "content": item.content})
            keys.append(("messages", index, "content"))
        return tuple(result), variables, tuple(keys)
    if prompt is None and spec.prompt is None:
        message = "no prompt: give `prompt`, `messages`, or a file-level `prompt` template"
        raise FieldError((), message)
    # A file-level template lacking a variable is the case's fault: point at its `vars:`.
    keys.append(("prompt",) if prompt is not None else ("vars",))
    text = prompt if prompt is not None else spec.prompt
    result.append({"role": "user", "content": text or ""})
    return tuple(result), variables, tuple(keys)


def rendered_chat(
    template: tuple[dict[str, str], ...],
    variables: dict[str, Any] | None,
    choices: tuple[str, ...] | None,
    keys: tuple[tuple[Any, ...], ...],
) -> tuple[dict[str, str], ...]:
    """Render ``template``; a placeholder the vars lack is a :class:`FieldError` at its key."""
    try:
        return render_chat(template, variables, choices)
    except TemplateKeyError as exc:
        raise FieldError(keys[exc.index], str(exc)) from None
