"""From a validated eval file to its cases: inline cases, dataset rows, prompt variants.

:func:`prompt_variants` reads ``prompts:``; :func:`expand_cases` turns the file into
:class:`~pytest_llmbench.spec.schema.EvalCase` values per variant, with prompts rendered, multiple
choice options and answers normalised, images checked, and the file-level assertions, threshold,
params and tags applied. Every problem is an :class:`~pytest_llmbench.spec.schema.EvalFileError` at
the line of the key at fault.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..scoring.assertions import Assertion, parse_assertion
from .context import CONTEXT_VAR, context_text
from .datasets import DatasetError, DatasetRow, load_dataset
from .datasets.rows import UNSAFE_ID
from .functions import allowed_shape_problem
from .paths import PathRefused, check_folder_entries, resolve_eval_path
from .schema import (
    CaseSpec,
    EvalCase,
    EvalFileError,
    EvalSpec,
    Message,
    PromptVariantSpec,
    RawAssertion,
)
from .templating import TemplateKeyError, render_chat
from .turns import (
    ScriptedTurns,
    TurnError,
    conversation_refusal,
    row_turns,
    script_turns,
    simulated_user,
    simulated_user_refusal,
    turn_variables,
    with_turns,
)
from .variants import warn_unvaried_conversations
from .yamlsource import LocatedDocument

if TYPE_CHECKING:
    from .functions import FunctionTools


@dataclass(frozen=True)
class _Place:
    """Where a case comes from in its eval file, so that problems name the right line."""

    path: Path
    document: LocatedDocument
    loc: tuple[Any, ...]  #: ``("cases", n)`` for an inline case, ``("dataset",)`` for a row
    #: folders besides the eval file's that its paths may lead into (the rootdir, allowed ones)
    roots: tuple[Path, ...] = ()

    @property
    def line(self) -> int:
        """The case's own line."""
        return self.document.line_of(self.loc) or 1

    def error(self, message: str, *key: Any) -> EvalFileError:
        """An error at the line of ``key`` inside the case (the case's line without one)."""
        return EvalFileError(self.path, self.document.line_of((*self.loc, *key)) or 1, message)

    def text(self, key: str, value: Any) -> str | None:
        """A scalar as written in the file: ``yes`` stays ``yes``, not ``True``."""
        if value is None or isinstance(value, str):
            return value
        return self.document.text_of((*self.loc, key)) or str(value)


class _FieldError(ValueError):
    """A problem with one field of a case; ``key`` is its location inside the case."""

    def __init__(self, key: tuple[Any, ...], message: str) -> None:
        super().__init__(message)
        self.key = key


@dataclass(frozen=True)
class _PromptVariant:
    """One entry of ``prompts:``: a name and the template that replaces the file's ``prompt``."""

    name: str | None
    template: str | None
    system: str | None
    #: the ``file://`` the template was read from, if any
    file: Path | None = None


def prompt_variants(
    spec: EvalSpec, path: Path, document: LocatedDocument, roots: Sequence[Path] = ()
) -> list[_PromptVariant]:
    """The file's prompt variants; one unnamed variant (the file as written) without any.

    A ``file://`` variant's file must be inside the eval file's folder or ``roots``."""
    if not spec.prompts:
        return [_PromptVariant(None, spec.prompt, spec.system)]
    if spec.prompt is not None:
        line = document.line_of(("prompt",))
        raise EvalFileError(path, line, "give either `prompt` or `prompts`, not both")
    variants: list[_PromptVariant] = []
    seen: dict[str, int] = {}
    for index, entry in enumerate(spec.prompts):
        line = document.line_of(("prompts", index)) or 1
        try:
            variant = _prompt_variant(entry, index, path.parent, roots)
        except ValueError as exc:
            raise EvalFileError(path, line, f"prompts[{index}]: {exc}") from None
        assert variant.name is not None
        if variant.name in seen:
            message = f"prompts[{index}]: duplicate variant name {variant.name!r}"
            raise EvalFileError(path, line, f"{message} (first at line {seen[variant.name]})")
        seen[variant.name] = line
        variants.append(variant)
    return variants


def _prompt_variant(
    entry: str | PromptVariantSpec, index: int, folder: Path, roots: Sequence[Path]
) -> _PromptVariant:
    """A variant from a template string, ``file://path`` or a mapping; ValueError when bad."""
    if isinstance(entry, str):
        key = "file" if entry.startswith("file://") else "prompt"
        entry = PromptVariantSpec.model_validate({key: entry.removeprefix("file://")})
    if (entry.prompt is None) == (entry.file is None):
        raise ValueError("give either `prompt` or `file`")
    template = entry.prompt
    name = entry.name
    file: Path | None = None
    if entry.file is not None:
        file = resolve_eval_path(entry.file, folder, roots)  # PathRefused is a ValueError
        try:
            template = file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ValueError(f"cannot read prompt file {entry.file!r}: {exc}") from None
        name = name or Path(entry.file).stem
    name = _safe_id(str(name)) if name is not None and str(name).strip() else f"p{index + 1}"
    if not (template or "").strip():
        raise ValueError("the prompt template is empty")
    return _PromptVariant(name, template, entry.system, file)


def expand_cases(
    spec: EvalSpec,
    path: Path,
    document: LocatedDocument,
    variants: list[_PromptVariant],
    roots: Sequence[Path] = (),
) -> list[EvalCase]:
    """The file's cases, per prompt variant; the paths it names must lead inside the eval file's
    folder or ``roots`` (see :mod:`.paths`)."""
    cases: list[EvalCase] = []
    for variant in variants:
        # Each variant is the file with its own `prompt` (and `system`) template.
        shaped = spec.model_copy(
            update={"prompt": variant.template, "system": variant.system or spec.system}
        )
        own: list[EvalCase] = []
        sources = () if variant.file is None else (variant.file,)
        if spec.dataset is not None:
            place = _Place(path, document, ("dataset",), tuple(roots))
            rows = _dataset_cases(shaped, place)
            own.extend(
                replace(row, sources=(*sources, *_dataset_files(spec, place))) for row in rows
            )
        for index, case in enumerate(spec.cases):
            place = _Place(path, document, ("cases", index), tuple(roots))
            if variant.name is not None and variant.system is not None and case.system is not None:
                raise place.error(
                    f"case {_inline_id(case, place)!r}: its `system` would replace the `system` "
                    f"of prompt variant {variant.name!r}; give it in one place",
                    "system",
                )
            if variant.name is not None and (case.prompt is not None or case.messages):
                key = "prompt" if case.prompt is not None else "messages"
                raise place.error(
                    f"case {_inline_id(case, place)!r}: the file's `prompts:` give the prompt; "
                    "give the case `vars:` instead",
                    key,
                )
            own.append(_inline_case(shaped, case, place))
        if not own:
            raise EvalFileError(path, 1, "no cases: give a `cases:` list or a `dataset:`")
        _check_unique_ids(own, path)
        cases.extend(
            replace(case, prompt_variant=variant.name, sources=case.sources or sources)
            for case in own
        )
    warn_unvaried_conversations(cases, path)
    return cases


def _inline_case(spec: EvalSpec, case: CaseSpec, place: _Place) -> EvalCase:
    case_id = _inline_id(case, place)
    if case.prompt is not None and case.messages is not None:
        message = f"case {case_id!r}: give either `prompt` or `messages`, not both"
        raise place.error(message, "messages")
    choices = _case_choices(spec, case, place, case_id)
    if case.simulated_user is not None:
        return _simulated_case(spec, case, place, case_id)
    scripted = None
    try:
        if case.turns is not None:
            _check_turns_case(spec, case, place, case_id)
            scripted = _inline_turns(spec, case)
            template, variables = scripted.template, scripted.variables
            messages = scripted.turns.messages
        else:
            template, variables, keys = _template(
                spec, case.system, case.prompt, case.messages, _context_vars(case)
            )
            messages = _rendered(template, variables, choices[0], keys)
    except (_FieldError, TurnError) as exc:
        raise place.error(f"case {case_id!r}: {exc}", *exc.key) from None
    expected = place.text("expected", case.expected)
    resolved = _resolve(
        spec,
        place,
        [*(scripted.turns.assertions if scripted else ()), *case.assertions],
        own_keys=scripted.own_keys(case.assertions) if scripted else None,
        case_id=case_id,
        messages=messages,
        template=template,
        template_vars=variables,
        expected=_choice_expected(expected, choices),
        **_case_fields(case),
        images=_images(place, case.images, place.path.parent, case_id),
        choices=choices[0],
        answer_index=choices[1],
        choice_labels=None,
    )
    return with_turns(resolved, scripted.turns) if scripted else resolved


def _case_fields(case: CaseSpec) -> dict[str, Any]:
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


def _context_vars(case: CaseSpec) -> dict[str, Any]:
    """The case's vars, with ``context`` as ``{{context}}`` renders it when the case gives one
    (the chunks joined by a blank line; an empty retrieval, ``""``)."""
    if case.context is None:
        return case.vars
    return {**case.vars, CONTEXT_VAR: context_text(case.context)}


def _simulated_case(spec: EvalSpec, case: CaseSpec, place: _Place, case_id: str) -> EvalCase:
    """A case whose user is simulated: its own assertions check every reply of the model, the
    case's and the file's the last one (as a scripted conversation's)."""
    assert case.simulated_user is not None
    given = [key for key in ("prompt", "messages", "turns") if getattr(case, key) is not None]
    refusal = simulated_user_refusal(given)
    if refusal is not None:
        raise place.error(f"case {case_id!r}: {refusal}", given[0])
    _check_turns_file(spec, place, f"case {case_id!r}", ("simulated_user",))
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
    resolved = _resolve(
        spec,
        place,
        [*own, *case.assertions],
        own_keys=[*own_keys, *(("assert", n) for n in range(len(case.assertions)))],
        case_id=case_id,
        messages=messages,
        template=messages,
        template_vars=None,
        expected=place.text("expected", case.expected),
        **_case_fields(case),
        images=(),
        choices=None,
        answer_index=None,
        choice_labels=None,
    )
    for index in user.checks:
        if resolved.assertions[index].graded is not None:
            message = (
                f"case {case_id!r}: `{resolved.assertions[index].type}` is judged: a simulated "
                "user's assertions are checked on every reply during the conversation; give it "
                "on the case to judge the last reply"
            )
            raise place.error(message, *own_keys[index])
    return replace(resolved, simulated_user=user)


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


def _check_turns_case(spec: EvalSpec, case: CaseSpec, place: _Place, case_id: str) -> None:
    """``turns`` replace ``prompt`` and ``messages``, and go with plain completions only."""
    for key in ("prompt", "messages"):
        if getattr(case, key) is not None:
            message = f"case {case_id!r}: give either `turns` or `{key}`, not both"
            raise place.error(message, key)
    _check_turns_file(spec, place, f"case {case_id!r}", ("turns",))
    if case.choices is not None:
        message = f"case {case_id!r}: `choices` score one answer; they do not go with `turns`"
        raise place.error(message, "choices")


def _check_turns_file(spec: EvalSpec, place: _Place, who: str, key: tuple[Any, ...]) -> None:
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
    variables = turn_variables(spec.prompt, _context_vars(case))
    system = case.system if case.system is not None else spec.system
    return _Scripted(script_turns(case.turns, system, variables), variables)


_Choices = tuple[tuple[str, ...] | None, int | None]


def _case_choices(spec: EvalSpec, case: CaseSpec, place: _Place, case_id: str) -> _Choices:
    """An inline case's ``choices:`` and the index of its ``answer:``."""
    if case.choices is None:
        if case.answer is not None:
            raise place.error(f"case {case_id!r}: `answer` needs `choices`", "answer")
        return None, None
    return _choice_pair(
        spec, place, case_id, case.choices, place.text("answer", case.answer), None, ("answer",)
    )


def _choice_pair(
    spec: EvalSpec,
    place: _Place,
    case_id: str,
    choices: Sequence[Any],
    answer: Any,
    labels: Sequence[str] | None,
    key: tuple[Any, ...],
) -> _Choices:
    from ..scoring.choices import answer_index

    texts = tuple(str(choice) for choice in choices)
    if len(texts) < 2:
        raise place.error(f"case {case_id!r}: `choices` needs at least two options", "choices")
    if answer is None or (isinstance(answer, str) and not answer.strip()):
        raise place.error(f"case {case_id!r}: `choices` needs an `answer`", *key)
    try:
        index = answer_index(answer, texts, labels=labels, base=spec.answer_base)
    except ValueError as exc:
        raise place.error(f"case {case_id!r}: answer: {exc}", *key) from None
    return texts, index


def _choice_expected(expected: str | None, choices: _Choices) -> str | None:
    """A multiple choice case expects its right option unless it says otherwise."""
    options, index = choices
    if expected is not None or options is None or index is None:
        return expected
    return options[index]


def _images(place: _Place, refs: Sequence[str], base_dir: Path, case_id: str) -> tuple[str, ...]:
    """Image references checked now (a missing file is a collection error), in order."""
    if not refs:
        return ()
    from .images import ImageError, check_image_ref

    checked = []
    for index, ref in enumerate(refs):
        try:
            checked.append(check_image_ref(ref, base_dir, place.roots))
        except ImageError as exc:
            raise place.error(f"case {case_id!r}: images[{index}]: {exc}", "images") from None
    return tuple(checked)


def _inline_id(case: CaseSpec, place: _Place) -> str:
    """The case's id made node-id safe; ``case-<n>`` when it has none (or a blank one)."""
    written = place.text("id", case.id)
    if written is None or not written.strip():
        return f"case-{place.loc[-1] + 1}"
    return _safe_id(written)


def _dataset_cases(spec: EvalSpec, place: _Place) -> list[EvalCase]:
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
    return [_row_case(spec, row, place) for row in rows]


def _dataset_files(spec: EvalSpec, place: _Place) -> tuple[Path, ...]:
    """The files the dataset was read from (after :func:`_dataset_cases` read it)."""
    from .datasets.load import dataset_files

    assert spec.dataset is not None
    try:
        return dataset_files(spec.dataset, place.path.parent, place.roots)
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


def _row_case(spec: EvalSpec, row: DatasetRow, place: _Place) -> EvalCase:
    where = f"dataset row {row.id!r} ({row.where})"
    if row.turns is not None:
        return _row_turns_case(spec, row, place, where)
    # A row's own prompt is sent verbatim; only a file-level template is rendered.
    row_vars: dict[str, Any] | None = None
    if spec.prompt is not None:
        row_vars = dict(row.vars) if row.prompt is None else {**row.vars, "prompt": row.prompt}
    template_text = spec.prompt if spec.prompt is not None else row.prompt
    choices: _Choices = (None, None)
    if row.choices is not None:
        choices = _choice_pair(spec, place, where, row.choices, row.answer, row.choice_labels, ())
    try:
        template, _, keys = _template(spec, None, template_text, None, row_vars)
        messages = _rendered(template, row_vars, choices[0], keys)
    except _FieldError as exc:
        raise place.error(f"{where}: {exc}") from None
    if row_vars is None:
        # The row's prompt goes verbatim, but the file's `system` is a template all the same.
        messages = _row_system(spec, place, where, messages, row.vars)
    _check_row_context(spec, row, place, where)
    case = _resolve(
        spec,
        place,
        list(row.assertions),
        case_id=row.id,
        messages=messages,
        template=template,
        template_vars=row_vars,
        expected=_choice_expected(row.expected, choices),
        **_row_fields(row, place),
        choices=choices[0],
        answer_index=choices[1],
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


def _with_row_tools(case: EvalCase, row: DatasetRow, place: _Place, where: str) -> EvalCase:
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


def _row_fields(row: DatasetRow, place: _Place) -> dict[str, Any]:
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
        "images": _images(place, row.images, place.path.parent, row.id),
        "context": row.context,
    }


def _row_turns_case(spec: EvalSpec, row: DatasetRow, place: _Place, where: str) -> EvalCase:
    """A dataset row's own conversation: its turns are sent verbatim (as a row's own prompt
    is), the file's ``system`` is rendered with the row's columns."""
    assert row.turns is not None
    _check_turns_file(spec, place, where, ())
    if row.choices is not None:
        raise place.error(f"{where}: `choices` score one answer; they do not go with `turns`")
    try:
        scripted = script_turns(row_turns(row.turns), spec.system, None)
    except TurnError as exc:
        raise place.error(f"{where}: {exc}") from None
    messages = _row_system(spec, place, where, scripted.messages, row.vars)
    resolved = _resolve(
        spec,
        place,
        [*scripted.assertions, *row.assertions],
        case_id=row.id,
        messages=messages,
        template=scripted.template,
        template_vars=None,
        expected=row.expected,
        **_row_fields(row, place),
        choices=None,
        answer_index=None,
        choice_labels=None,
    )
    return with_turns(resolved, scripted)


def _row_system(
    spec: EvalSpec,
    place: _Place,
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
        line = place.document.line_of(("system",)) or 1  # the file's own key
        raise EvalFileError(place.path, line, f"{where}: system: {exc}") from None
    return ({"role": "system", "content": system}, *messages[1:])


#: The check of a case that gives `expected` and no assertion: the answer contains it, in any
#: case (`expected: Paris` passes "The capital is paris.").
DEFAULT_CHECK = "icontains"


def _resolve(
    spec: EvalSpec,
    place: _Place,
    own: list[RawAssertion],
    own_keys: Sequence[tuple[Any, ...]] | None = None,
    **case: Any,
) -> EvalCase:
    """Complete a case with the file-level assertions, threshold, params and tags.

    ``own_keys``: where each of ``own`` is written inside the case (``("assert", n)`` when
    None)."""
    if case["choices"] is not None and not any(_is_choice(raw) for raw in [*own, *spec.assertions]):
        own = [*own, "choice"]  # a multiple choice case is scored by the option it names
    if not own and not spec.assertions and case["expected"] is not None:
        own = [DEFAULT_CHECK]  # an expected answer alone is checked, never an unchecked pass
    keys = list(own_keys or ())
    keys += [("assert", n - len(keys)) for n in range(len(keys), len(own))]
    assertions = _assertions(spec, place, own, case, keys)
    threshold = case.pop("threshold")
    metrics = _judge_metrics(place, [*spec.judge_metrics, *case.pop("judge_metrics")])
    folders = _include_dirs(place, spec.include_dirs, case.pop("include_dirs"))
    if case["task"] is None and spec.task is not None:
        case["task"] = spec.task.model_dump()  # the file's, for a case (or row) without one
    resolved = EvalCase(
        id=case.pop("case_id"),
        assertions=assertions,
        threshold=spec.threshold if threshold is None else threshold,
        model_params={**spec.model_params, **case.pop("model_params")},
        tags=tuple(dict.fromkeys([*spec.tags, *case.pop("tags")])),
        line=place.line,
        judge_metrics=metrics,
        include_dirs=folders,
        **case,
    )
    return _scored(spec, place, resolved)


def _scored(spec: EvalSpec, place: _Place, case: EvalCase) -> EvalCase:
    """A ``loglikelihood:`` file's case with its options' (context, continuation) pairs."""
    settings = spec.loglikelihood
    if settings is None:
        return case
    from .loglikelihood import ScoringError, scored_case

    if spec.kind == "agent" or spec.solver is not None:
        line = place.document.line_of(("loglikelihood",)) or 1
        other = "`kind: agent`" if spec.kind == "agent" else "`solver`"
        message = f"`loglikelihood` scores the options with the model itself: not with {other}"
        raise EvalFileError(place.path, line, message)
    try:
        return scored_case(case, settings)
    except ScoringError as exc:
        line = place.document.line_of((*place.loc, *exc.key)) or place.line
        raise EvalFileError(place.path, line, f"case {case.id!r}: {exc}") from None


def _include_dirs(place: _Place, shared: list[str], own: list[str]) -> tuple[Path, ...]:
    """The file's folders then the case's, relative to the eval file, inside the project and
    holding no special file; each must exist (a collection error at its entry otherwise)."""
    folders: dict[Path, None] = {}
    for names, key in ((shared, ("include_dirs",)), (own, (*place.loc, "include_dirs"))):
        for index, name in enumerate(names):
            line = place.document.line_of((*key, index)) or place.line
            try:
                folder = resolve_eval_path(name, place.path.parent, place.roots)
                if not folder.is_dir():
                    raise PathRefused(f"{name!r} is not a folder next to the eval file")
                check_folder_entries(folder)
            except PathRefused as exc:
                raise EvalFileError(place.path, line, f"include_dirs: {exc}") from None
            folders[folder] = None
    return tuple(folders)


def _check_schema_files(
    place: _Place, assertions: Sequence[Assertion], keys: Sequence[tuple[Any, ...]]
) -> None:
    """A ``json-schema`` file is read when the answer is scored: its path is checked now."""
    for index, assertion in enumerate(assertions):
        if assertion.base_type != "json-schema" or not isinstance(assertion.value, str):
            continue
        try:
            resolve_eval_path(assertion.value, place.path.parent, place.roots)
        except PathRefused as exc:
            at = keys[index] if index < len(keys) else ()
            raise place.error(f"{assertion.type}: {exc}", *at) from None


def _graders(
    spec: EvalSpec,
    place: _Place,
    assertions: tuple[Assertion, ...],
    case: dict[str, Any],
    keys: Sequence[tuple[Any, ...]],
) -> tuple[Assertion, ...]:
    """The case's ``model-graded`` assertions with their prompts read and checked; a bad one
    is an error at its ``prompt`` (a file-level one's, in the file's ``assert:``)."""
    from .graders import GraderError, resolve_graders

    try:
        return resolve_graders(
            assertions,
            folder=place.path.parent,
            roots=place.roots,
            case_vars=case["vars"],
            has_expected=case["expected"] is not None,
            has_context=case["context"] is not None or spec.solver is not None,
        )
    except GraderError as exc:
        message = f"case {case['case_id']!r}: {exc}"
        if exc.index < len(keys):
            raise place.error(message, *keys[exc.index], exc.key) from None
        at = ("assert", exc.index - len(keys), exc.key)
        raise EvalFileError(place.path, place.document.line_of(at) or place.line, message) from None


def _judge_metrics(place: _Place, names: list[str]) -> tuple[str, ...]:
    """Jury dimension names as keys (``Brand voice`` -> ``brand_voice``), each once."""
    from ..scoring.judged import dimension_key

    try:
        return tuple(dict.fromkeys(dimension_key(name) for name in names))
    except ValueError as exc:
        raise place.error(f"judge_metrics: {exc}", "judge_metrics") from None


def _assertions(
    spec: EvalSpec,
    place: _Place,
    own: list[RawAssertion],
    case: dict[str, Any],
    keys: Sequence[tuple[Any, ...]],
) -> tuple[Assertion, ...]:
    """The case's own assertions, then the file-level ones; each needs a value or expected.
    ``keys``: where each of ``own`` is written inside the case."""
    assertions = tuple(parse_assertion(item) for item in [*own, *spec.assertions])
    _check_schema_files(place, assertions, keys)
    assertions = _graders(spec, place, assertions, case, keys)
    for index, assertion in enumerate(assertions):
        # tool-count also counts a function-calling reply's calls (a plain file's tools:, or
        # a dataset row's)
        offered = bool(spec.tools) or case.get("functions") is not None
        counts_calls = assertion.base_type == "tool-count" and offered
        if assertion.agent_check is not None and spec.kind != "agent" and not counts_calls:
            mine = index < len(own)
            at = keys[index] if mine else ()
            message = f"`{assertion.type}` checks an agent's work: it needs `kind: agent`"
            raise place.error(f"case {case['case_id']!r}: {message}", *at)
        if assertion.type == "choice" and case["choices"] is None:
            mine = index < len(own)
            at = keys[index] if mine else ()
            message = "`choice` scores multiple choice: the case needs `choices` and `answer`"
            raise place.error(f"case {case['case_id']!r}: {message}", *at)
        if assertion.needs_value and case["expected"] is None:
            mine = index < len(own)
            origin = "" if mine else " (from the file-level `assert:`)"
            message = f"`{assertion.type}`{origin} needs a value or `expected`"
            at = keys[index] if mine else ()
            raise place.error(f"case {case['case_id']!r}: {message}", *at)
        if _lacks_context(spec, assertion, case["context"]):
            at = keys[index] if index < len(own) else ()
            raise place.error(f"case {case['case_id']!r}: {_no_context(assertion)}", *at)
    return assertions


def _lacks_context(spec: EvalSpec, assertion: Assertion, context: tuple[str, ...] | None) -> bool:
    """Whether ``assertion`` reads a context the case cannot have: none given, no solver (an
    empty retrieval, ``[]``, is a context: its verdicts are unchecked at run time)."""
    from ..scoring.judged import CONTEXT_TYPES

    return assertion.base_type in CONTEXT_TYPES and context is None and spec.solver is None


def _no_context(assertion: Assertion) -> str:
    """Why a context metric cannot judge a case that gives no context."""
    return (
        f"`{assertion.type}` judges the answer against its retrieved context: the case needs "
        "`context` (or the file a `solver` that returns it); a retrieval that found nothing "
        "is `context: []`"
    )


def _check_row_context(spec: EvalSpec, row: DatasetRow, place: _Place, where: str) -> None:
    """A row that gives no context (no cell, null, an empty CSV cell) under a context metric:
    an error naming the row and its line. Only a context metric's type is parsed: collecting
    10,000 rows parses each row's assertions enough."""
    from ..scoring.judged import CONTEXT_TYPES

    if row.context is not None or spec.solver is not None:
        return
    for raw in [*row.assertions, *spec.assertions]:
        type_name = raw if isinstance(raw, str) else raw.get("type")
        if str(type_name).removeprefix("not-") in CONTEXT_TYPES:
            raise place.error(f"{where}: {_no_context(parse_assertion(raw))}")


def _is_choice(raw: RawAssertion) -> bool:
    return raw == "choice" or (isinstance(raw, dict) and raw.get("type") == "choice")


def _template(
    spec: EvalSpec,
    case_system: str | None,
    prompt: str | None,
    messages: list[Message] | None,
    variables: dict[str, Any] | None,
) -> tuple[tuple[dict[str, str], ...], dict[str, Any] | None, tuple[tuple[Any, ...], ...]]:
    """The chat to send before ``{{vars}}`` are rendered, the vars to render it with, and for
    each message the case key that a missing placeholder points at.

    A system message comes first unless ``messages`` has one, then the user turn(s). Raises
    :class:`_FieldError` naming the case key at fault.
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
        raise _FieldError((), message)
    # A file-level template lacking a variable is the case's fault: point at its `vars:`.
    keys.append(("prompt",) if prompt is not None else ("vars",))
    text = prompt if prompt is not None else spec.prompt
    result.append({"role": "user", "content": text or ""})
    return tuple(result), variables, tuple(keys)


def _rendered(
    template: tuple[dict[str, str], ...],
    variables: dict[str, Any] | None,
    choices: tuple[str, ...] | None,
    keys: tuple[tuple[Any, ...], ...],
) -> tuple[dict[str, str], ...]:
    """Render ``template``; a placeholder the vars lack is a :class:`_FieldError` at its key."""
    try:
        return render_chat(template, variables, choices)
    except TemplateKeyError as exc:
        raise _FieldError(keys[exc.index], str(exc)) from None


def _safe_id(case_id: str) -> str:
    return UNSAFE_ID.sub("-", case_id.strip())


def _check_unique_ids(cases: list[EvalCase], path: Path) -> None:
    seen: dict[str, int] = {}
    for case in cases:
        if case.id in seen:
            message = f"duplicate case id {case.id!r} (first at line {seen[case.id]})"
            raise EvalFileError(path, case.line, message)
        seen[case.id] = case.line
