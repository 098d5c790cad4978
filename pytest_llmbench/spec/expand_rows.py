"""Dataset rows: the cases of a file's ``dataset:``, one per row.

:func:`dataset_rows` reads the rows (:mod:`.datasets`); each row is then expanded by its kind
(:mod:`.expand`'s table): a row asking one chat by :func:`row_case`, a row's own ``turns`` by
:mod:`.expand_turns`. A row's own prompt is sent verbatim, the file's ``prompt`` template is
rendered with the row's columns; the row's own tools (``dataset.tools``) and expected calls
(``dataset.tool_calls``) go with its case.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..scoring import parse_assertion
from .datasets import DatasetError, DatasetRow, load_dataset
from .expand_choices import NO_CHOICES, choice_expected, choice_pair
from .expand_place import FieldError
from .expand_plain import chat_template, rendered_chat
from .expand_resolve import case_images, no_context, resolve
from .functions import allowed_shape_problem

if TYPE_CHECKING:
    from .expand_place import Place
    from .functions import FunctionTools
    from .resolved import EvalCase
    from .schema import EvalSpec


def dataset_rows(spec: EvalSpec, place: Place) -> list[DatasetRow]:
    """The rows of the file's ``dataset:``; a problem reading it is an error at ``dataset:``."""
    assert spec.dataset is not None
    try:
        rows = load_dataset(
            spec.dataset,
            place.path.parent,
            needs_prompt=spec.prompt is None,
            roots=place.roots,
            used=_template_names(spec),
        )
    except DatasetError as exc:
        raise place.error(f"dataset: {exc}") from None
    return rows


def dataset_files(spec: EvalSpec, place: Place) -> tuple[Path, ...]:
    """The files the dataset was read from (after :func:`dataset_rows` read it)."""
    from .datasets.dataset_load import dataset_files as read_files

    assert spec.dataset is not None
    try:
        return read_files(spec.dataset, place.path.parent, place.roots)
    except DatasetError as exc:
        raise place.error(f"dataset: {exc}") from None


def _template_names(spec: EvalSpec) -> frozenset[str]:
    """The top-level names the file's prompt and system templates and its assertions' values
    (``{{file}}`` in an agent check) use (``{{a.b}}``: ``a``)."""
    from .templating import placeholders

    texts = [spec.prompt or "", spec.system or "", *_strings(spec.assertions)]
    names = {name for text in texts for name in placeholders(text)}
    return frozenset(name.split(".")[0] for name in names)


def _strings(value: Any) -> list[str]:
    """Every string inside ``value``, in order: lists and mappings walked without recursion (the
    values come from an eval file, which yamlguard keeps free of values that hold themselves)."""
    strings: list[str] = []
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            strings.append(item)
        elif isinstance(item, dict):
            stack.extend(reversed(list(item.values())))
        elif isinstance(item, (list, tuple)):
            stack.extend(reversed(item))
    return strings


def row_case(spec: EvalSpec, row: DatasetRow, place: Place, where: str) -> EvalCase:
    """A dataset row asking one chat: the file's ``prompt`` template rendered with the row's
    columns, or the row's own prompt sent verbatim."""
    # A row's own prompt is sent verbatim; only a file-level template is rendered.
    row_vars: dict[str, Any] | None = None
    if spec.prompt is not None:
        row_vars = dict(row.vars) if row.prompt is None else {**row.vars, "prompt": row.prompt}
    template_text = spec.prompt if spec.prompt is not None else row.prompt
    choices = NO_CHOICES
    if row.choices is not None:
        choices = choice_pair(spec, place, where, row.choices, row.answer, row.choice_labels, ())
    try:
        template, _, keys = chat_template(spec, None, template_text, None, row_vars)
        messages = rendered_chat(template, row_vars, choices.options, keys)
    except FieldError as exc:
        raise place.error(f"{where}: {exc}") from None
    if row_vars is None:
        # The row's prompt goes verbatim, but the file's `system` is a template all the same.
        messages = row_system(spec, place, where, messages, row.vars)
    _check_row_context(spec, row, place, where)
    case = resolve(
        spec,
        place,
        list(row.assertions),
        case_id=row.id,
        messages=messages,
        template=template,
        template_vars=row_vars,
        expected=choice_expected(row.expected, choices),
        **row_fields(row, place),
        choices=choices.options,
        answer_index=choices.answer_index,
        choice_labels=row.choice_labels,
        functions=_row_functions(spec, row),
    )
    return _with_row_tools(case, row, place, where)


def _row_functions(spec: EvalSpec, row: DatasetRow) -> FunctionTools | None:
    """The row's function definitions (``dataset.tools``) under the file's ``tool_shim`` and
    ``tool_choice``; None when the row gives none."""
    if row.tools is None:
        return None
    return replace(row.tools, tool_shim=spec.tool_shim, tool_choice=spec.tool_choice)


def _with_row_tools(case: EvalCase, row: DatasetRow, place: Place, where: str) -> EvalCase:
    """The case with each ``tool-calls`` that gives no value checking the row's expected
    calls (``dataset.tool_calls``); allowed values of the shape the row's schemas ask for."""
    problem = allowed_shape_problem(case.assertions, row.tools) if row.tools else None
    if problem is not None:
        raise place.error(f"{where}: {problem}")
    open_calls = [a.base_type == "tool-calls" and a.value is None for a in case.assertions]
    if not any(open_calls):
        return case
    if row.tool_calls is None:
        raise place.error(f"{where}: `tool-calls` without a value checks the row's expected "
                          "calls: map them with dataset.tool_calls")  # fmt: skip
    assertions = tuple(
        replace(assertion, value=row.tool_calls) if is_open else assertion
        for assertion, is_open in zip(case.assertions, open_calls, strict=True)
    )
    return replace(case, assertions=assertions)


def row_fields(row: DatasetRow, place: Place) -> dict[str, Any]:
    """What a dataset row's case takes from the row as it is, prompt or conversation alike."""
    return {
        "threshold": row.threshold,
        "model_params": {},
        "tags": list(row.tags),
        "files": {},
        "vars": row.vars,
        "task": row.task,
        "expected_output_tokens": row.expected_output_tokens,
        "judge_metrics": list(row.judge_metrics),
        "include_dirs": [],
        "images": case_images(place, row.images, place.path.parent, row.id),
        "context": row.context,
    }


def row_system(
    spec: EvalSpec,
    place: Place,
    where: str,
    messages: tuple[dict[str, str], ...],
    variables: dict[str, Any],
) -> tuple[dict[str, str], ...]:
    """``messages`` with the file's ``system`` message rendered with the row's columns; an
    unknown ``{{name}}`` is a collection error at the file's ``system``."""
    from .templating import render_template

    if spec.system is None or not messages or messages[0]["role"] != "system":
        return messages
    try:
        system = render_template(messages[0]["content"], variables)
    except ValueError as exc:
        raise place.file_error(f"{where}: system: {exc}", "system") from None
    return ({"role": "system", "content": system}, *messages[1:])


def _check_row_context(spec: EvalSpec, row: DatasetRow, place: Place, where: str) -> None:
    """A row that gives no context (no cell, null, an empty CSV cell) under a context metric:
    an error naming the row and its line. Only a context metric's type is parsed: collecting
    10,000 rows parses each row's assertions enough."""
    from ..scoring import CONTEXT_TYPES

    if row.context is not None or spec.solver is not None:
        return
    for raw in [*row.assertions, *spec.assertions]:
        type_name = raw if isinstance(raw, str) else raw.get("type")
        if str(type_name).removeprefix("not-") in CONTEXT_TYPES:
            raise place.error(f"{where}: {no_context(parse_assertion(raw))}")
