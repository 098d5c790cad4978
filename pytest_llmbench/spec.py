"""The eval file schema and its expansion into concrete cases.

``load_spec`` reads a ``*.eval.yaml`` file, validates it with pydantic (unknown keys refused)
and turns it into :class:`EvalCase` values: inline cases and dataset rows alike, with prompts
rendered and assertions parsed. Every problem is an :class:`EvalFileError` carrying the file
and line, so collection can report ``path:line: message`` without a traceback.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from .assertions import Assertion, AssertionSpecError, parse_assertion
from .datasets import DatasetError, DatasetRow, DatasetSource, load_dataset
from .yamlsource import LocatedDocument, SourceError, load_located_file

EVAL_SUFFIX = ".eval.yaml"
TEMPLATE_VAR = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_.-]*)\s*\}\}")
# Characters that split or confuse pytest node ids ("file::name[param]"); as in datasets.py.
_UNSAFE_ID = re.compile(r"(?:::|[\[\]/\s])+")


class EvalFileError(Exception):
    """A problem in an eval file: ``str()`` is ``path:line: message``."""

    def __init__(self, path: Path, line: int | None, message: str) -> None:
        where = f"{path}:{line}" if line is not None else f"{path}"
        super().__init__(f"{where}: {message}")
        self.path = path
        self.line = line
        self.message = message


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class Message(_Strict):
    """One chat message."""

    role: Literal["system", "user", "assistant", "tool"] = Field(description="Chat role")
    content: str = Field(description="Message text; may use {{vars}}")


class TaskSpec(_Strict):
    """360-eval style task description, used by judges in later features."""

    task_type: str = Field(description="Kind of task, e.g. summarization")
    task_criteria: str | None = Field(None, description="What a good answer does")


RawAssertion = str | dict[str, Any]
#: The agent tools every ``kind: agent`` file may name; others are ``module:function`` refs.
BUILTIN_TOOL_NAMES = ("read_file", "write_file", "list_dir", "run_command")
_TOOL_REF = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*")


class AgentLimits(_Strict):
    """Budgets of one agent item's whole loop."""

    seconds: float | None = Field(None, gt=0, description="Wall time of the loop")
    tokens: int | None = Field(None, gt=0, description="Input + output tokens of the loop")


class _AssertionItemError(ValueError):
    """A bad ``assert:`` item; ``loc`` is where it sits inside the ``assert:`` list."""

    def __init__(self, index: int, error: AssertionSpecError, raw: RawAssertion) -> None:
        super().__init__(str(error))
        in_mapping = isinstance(raw, dict) and error.field in raw
        self.loc: tuple[Any, ...] = (index, error.field) if in_mapping else (index,)


def _check_assertions(value: list[RawAssertion]) -> list[RawAssertion]:
    for index, raw in enumerate(value):
        try:
            parse_assertion(raw)
        except AssertionSpecError as exc:
            raise _AssertionItemError(index, exc, raw) from None
    return value


class PromptVariantSpec(_Strict):
    """One entry of ``prompts:`` written as a mapping."""

    name: str | None = Field(None, description="Variant name in ids and results")
    prompt: str | None = Field(None, description="User prompt template with {{vars}}")
    file: str | None = Field(None, description="File holding the template, next to the eval file")
    system: str | None = Field(None, description="System prompt of this variant")


class CaseSpec(_Strict):
    """One inline case of an eval file."""

    id: str | int | None = Field(None, description="Case id; defaults to case-<n> (1-based)")
    prompt: str | None = Field(None, description="User prompt; may use {{vars}}")
    messages: list[Message] | None = Field(None, description="Chat messages instead of prompt")
    system: str | None = Field(None, description="System prompt for this case")
    vars: dict[str, Any] = Field(default_factory=dict, description="Values for {{vars}}")
    expected: str | int | float | bool | None = Field(None, description="Expected answer")
    assertions: list[RawAssertion] = Field(
        default_factory=list, alias="assert", description="Assertions scoring the answer"
    )
    threshold: float | None = Field(None, ge=0, le=1, description="Score needed to pass")
    model_params: dict[str, Any] = Field(default_factory=dict, description="litellm params")
    tags: list[str] = Field(default_factory=list, description="Tags, also pytest markers")
    files: dict[str, str] = Field(default_factory=dict, description="Files seeding the workdir")
    task: TaskSpec | None = Field(None, description="Task type and criteria")
    expected_output_tokens: int | None = Field(None, gt=0, description="Expected answer length")
    judge_metrics: list[str] = Field(
        default_factory=list, description="Extra dimensions the case's juries score"
    )
    include_dirs: list[str] = Field(
        default_factory=list, description="Folders copied into the workdir (agent files)"
    )
    images: list[str] = Field(default_factory=list, description="Images sent with the prompt")
    choices: list[str] | None = Field(None, description="Multiple choice options")
    answer: str | int | None = Field(None, description="The right choice: letter, index or text")

    _validate_assertions = field_validator("assertions")(_check_assertions)


class EvalSpec(_Strict):
    """A whole ``*.eval.yaml`` file."""

    description: str | None = Field(None, description="Human-readable suite description")
    system: str | None = Field(None, description="System prompt for every case")
    prompt: str | None = Field(None, description="Prompt template for cases without prompt")
    model_params: dict[str, Any] = Field(default_factory=dict, description="litellm params")
    threshold: float = Field(1.0, ge=0, le=1, description="Score a case needs to pass")
    assertions: list[RawAssertion] = Field(
        default_factory=list, alias="assert", description="Assertions added to every case"
    )
    tags: list[str] = Field(default_factory=list, description="Tags added to every case")
    dataset: DatasetSource | None = Field(
        None, description="Cases from CSV, JSONL, parquet, a Hugging Face folder or a factory"
    )
    cases: list[CaseSpec] = Field(default_factory=list, description="Inline cases")
    parallel_safe: bool = Field(True, description="False: this file's calls run one at a time")
    judge_metrics: list[str] = Field(
        default_factory=list, description="Extra dimensions every jury of the file scores"
    )
    kind: Literal["completion", "agent"] = Field("completion", description="agent: a tool loop")
    tools: list[str] = Field(default_factory=list, description="Agent tools: built-ins or refs")
    max_turns: int = Field(10, ge=1, le=200, description="Model calls of an agent loop")
    limits: AgentLimits | None = Field(None, description="Agent loop budgets")
    sandbox: Literal["auto", "required", "off"] = Field(
        "auto", description="run_command under bubblewrap: when available, required, or never"
    )
    tool_shim: Literal["auto", "always", "never"] = Field(
        "auto", description="JSON-in-text tool calls for models without native tool calls"
    )
    tool_shim_model: str | None = Field(
        None, description="A second model that turns free-text replies into shim tool calls"
    )
    post_process: str | None = Field(
        None, description="Command run after each agent item with {results}; prints JSON scores"
    )
    include_dirs: list[str] = Field(
        default_factory=list, description="Folders copied into every agent item's workdir"
    )
    prompts: list[str | PromptVariantSpec] = Field(
        default_factory=list, description="Prompt variants: each case runs under each"
    )
    solver: str | None = Field(
        None, description="module:function producing the answer from the case and a client"
    )
    answer_base: Literal[0, 1] = Field(
        0, description="Numeric multiple choice answers count from 0 (default) or 1"
    )

    @field_validator("solver")
    @classmethod
    def _solver_ref(cls, value: str | None) -> str | None:
        if value is not None and not _TOOL_REF.fullmatch(value):
            raise ValueError(f"expected 'module:function', got {value!r}")
        return value

    @field_validator("tools")
    @classmethod
    def _known_tools(cls, value: list[str]) -> list[str]:
        for name in value:
            if name not in BUILTIN_TOOL_NAMES and not _TOOL_REF.fullmatch(name):
                known = ", ".join(BUILTIN_TOOL_NAMES)
                raise ValueError(f"unknown tool {name!r}: use one of {known} or 'module:function'")
        return value

    _validate_assertions = field_validator("assertions")(_check_assertions)


@dataclass(frozen=True)
class EvalCase:
    """A fully resolved case: what one item sends and how it is scored."""

    id: str
    messages: tuple[dict[str, str], ...]
    expected: str | None
    assertions: tuple[Assertion, ...]
    threshold: float
    model_params: dict[str, Any]
    tags: tuple[str, ...]
    files: dict[str, str]
    vars: dict[str, Any]
    task: dict[str, Any] | None
    expected_output_tokens: int | None
    line: int
    #: extra jury dimensions (normalised keys): the file's, then the case's
    judge_metrics: tuple[str, ...] = ()
    #: folders (resolved, the file's then the case's) copied into an agent item's workdir
    include_dirs: tuple[Path, ...] = ()
    #: the name of the ``prompts:`` variant this case was rendered with
    prompt_variant: str | None = None
    #: images sent with the last user message: absolute paths or URLs
    images: tuple[str, ...] = ()
    #: multiple choice options, the right one (0-based) and the dataset's labels of them
    choices: tuple[str, ...] | None = None
    answer_index: int | None = None
    choice_labels: tuple[str, ...] | None = None
    #: the chat before ``{{vars}}`` were rendered, and the vars (None: literal text)
    template: tuple[dict[str, str], ...] = ()
    template_vars: dict[str, Any] | None = None

    def render(self, template: Sequence[Mapping[str, str]]) -> tuple[dict[str, str], ...]:
        """``template`` (this case's, or a rewrite of it) with the case's vars and choices.

        Raises ValueError for a placeholder the vars lack.
        """
        return render_chat(template, self.template_vars, self.choices)

    @property
    def prompt(self) -> str | None:
        """The last user message."""
        return last_user_text(self.messages)


def last_user_text(messages: Sequence[Mapping[str, Any]] | None) -> str | None:
    """The text of the last user message (image parts left out), or None."""
    for message in reversed(messages or ()):
        if message.get("role") == "user":
            return None if message.get("content") is None else message_text(message)
    return None


def message_text(message: Mapping[str, Any]) -> str:
    """A message's text: its content, or the text parts of a content list (images left out)."""
    content = message.get("content")
    if isinstance(content, list):
        return "".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return "" if content is None else str(content)


@dataclass(frozen=True)
class AgentSpec:
    """How the items of a ``kind: agent`` file run: tools, turns, budgets, sandbox."""

    tools: tuple[str, ...]
    max_turns: int
    limit_seconds: float | None
    limit_tokens: int | None
    sandbox: str
    tool_shim: str
    post_process: str | None
    #: a second model (profile name or litellm id) reading free-text replies in shim mode
    shim_model: str | None = None


@dataclass(frozen=True)
class LoadedEval:
    """An eval file after validation and expansion."""

    path: Path
    suite: str
    description: str | None
    cases: tuple[EvalCase, ...]
    parallel_safe: bool = True
    agent: AgentSpec | None = None
    #: ``module:function`` that answers each case (``solver:``)
    solver: str | None = None
    #: the names of the file's ``prompts:`` variants, in order (empty without variants)
    prompt_variants: tuple[str, ...] = ()


def suite_name(path: Path) -> str:
    """``capitals.eval.yaml`` -> ``capitals``."""
    name = path.name
    return name[: -len(EVAL_SUFFIX)] if name.endswith(EVAL_SUFFIX) else path.stem


def load_spec(path: Path) -> LoadedEval:
    """Load, validate and expand one eval file, or raise :class:`EvalFileError`."""
    try:
        document = load_located_file(path)
    except SourceError as exc:
        raise EvalFileError(path, exc.line, exc.message) from None
    if not isinstance(document.data, dict):
        raise EvalFileError(path, document.line_of(()) or 1, _not_a_mapping(document.data))
    try:
        spec = EvalSpec.model_validate(document.data)
    except ValidationError as exc:
        raise _first_error(path, document, exc) from None
    variants = _prompt_variants(spec, path, document)
    cases = _expand(spec, path, document, variants)
    agent = _agent_spec(spec, path, document)
    _check_solver(spec, path, document)
    if spec.solver is not None and agent is not None:
        raise EvalFileError(path, document.line_of(("solver",)), "`solver` and `kind: agent` "
                            "do not go together: a solver is the agent")  # fmt: skip
    return LoadedEval(
        path,
        suite_name(path),
        spec.description,
        tuple(cases),
        spec.parallel_safe,
        agent,
        solver=spec.solver,
        prompt_variants=tuple(variant.name for variant in variants if variant.name),
    )


def _agent_spec(spec: EvalSpec, path: Path, document: LocatedDocument) -> AgentSpec | None:
    agent_keys = ("tools", "post_process", "limits", "tool_shim_model")
    if spec.kind != "agent":
        written = [key for key in agent_keys if getattr(spec, key)]
        if written:
            line = document.line_of((written[0],))
            raise EvalFileError(path, line, f"{written[0]!r} needs `kind: agent`")
        return None
    if not spec.tools:
        raise EvalFileError(path, document.line_of(("kind",)), "`kind: agent` needs `tools:`")
    return AgentSpec(
        tools=tuple(dict.fromkeys(spec.tools)),
        max_turns=spec.max_turns,
        limit_seconds=spec.limits.seconds if spec.limits else None,
        limit_tokens=spec.limits.tokens if spec.limits else None,
        sandbox=spec.sandbox,
        tool_shim=spec.tool_shim,
        post_process=spec.post_process,
        shim_model=spec.tool_shim_model,
    )


def _check_solver(spec: EvalSpec, path: Path, document: LocatedDocument) -> None:
    """A ``solver:`` that cannot be imported is the file's error, not every item's."""
    if spec.solver is None:
        return
    from .userimport import UserImportError, load_callable

    try:
        load_callable(spec.solver, path.parent)
    except UserImportError as exc:
        raise EvalFileError(path, document.line_of(("solver",)), f"solver: {exc}") from None


def _not_a_mapping(data: Any) -> str:
    if data is None:
        return "the file is empty; an eval file is a mapping with a `cases:` list"
    return f"an eval file must be a mapping with a `cases:` list, not a {type(data).__name__}"


def _first_error(path: Path, document: LocatedDocument, exc: ValidationError) -> EvalFileError:
    error = exc.errors(include_url=False)[0]
    loc = tuple(error["loc"])
    message = error["msg"].removeprefix("Value error, ")
    cause = error.get("ctx", {}).get("error")
    if isinstance(cause, _AssertionItemError):
        loc = (*loc, *cause.loc)
    if error["type"] == "extra_forbidden":
        message = f"unknown key {loc[-1]!r}"
        where = ".".join(str(part) for part in loc[:-1]) or "top level"
    else:
        where = _where(loc, document, error["type"]) or "file"
    return EvalFileError(path, document.line_of(loc), f"{where}: {message}")


def _where(loc: tuple[Any, ...], document: LocatedDocument, error_type: str) -> str:
    """``loc`` as dotted text, without the union members pydantic appends (``expected.str``)."""
    if error_type != "missing":  # a missing key is, rightly, not in the file
        known = next(end for end in range(len(loc), -1, -1) if loc[:end] in document.lines)
        loc = loc[:known]
    return ".".join(str(part) for part in loc)


@dataclass(frozen=True)
class _Place:
    """Where a case comes from in its eval file, so that problems name the right line."""

    path: Path
    document: LocatedDocument
    loc: tuple[Any, ...]  #: ``("cases", n)`` for an inline case, ``("dataset",)`` for a row

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


def _prompt_variants(spec: EvalSpec, path: Path, document: LocatedDocument) -> list[_PromptVariant]:
    """The file's prompt variants; one unnamed variant (the file as written) without any."""
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
            variant = _prompt_variant(entry, index, path.parent)
        except ValueError as exc:
            raise EvalFileError(path, line, f"prompts[{index}]: {exc}") from None
        assert variant.name is not None
        if variant.name in seen:
            message = f"prompts[{index}]: duplicate variant name {variant.name!r}"
            raise EvalFileError(path, line, f"{message} (first at line {seen[variant.name]})")
        seen[variant.name] = line
        variants.append(variant)
    return variants


def _prompt_variant(entry: str | PromptVariantSpec, index: int, folder: Path) -> _PromptVariant:
    """A variant from a template string, ``file://path`` or a mapping; ValueError when bad."""
    if isinstance(entry, str):
        key = "file" if entry.startswith("file://") else "prompt"
        entry = PromptVariantSpec.model_validate({key: entry.removeprefix("file://")})
    if (entry.prompt is None) == (entry.file is None):
        raise ValueError("give either `prompt` or `file`")
    template = entry.prompt
    name = entry.name
    if entry.file is not None:
        file = folder / entry.file
        try:
            template = file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ValueError(f"cannot read prompt file {entry.file!r}: {exc}") from None
        name = name or Path(entry.file).stem
    name = _safe_id(str(name)) if name is not None and str(name).strip() else f"p{index + 1}"
    if not (template or "").strip():
        raise ValueError("the prompt template is empty")
    return _PromptVariant(name, template, entry.system)


def _expand(
    spec: EvalSpec, path: Path, document: LocatedDocument, variants: list[_PromptVariant]
) -> list[EvalCase]:
    cases: list[EvalCase] = []
    for variant in variants:
        # Each variant is the file with its own `prompt` (and `system`) template.
        shaped = spec.model_copy(
            update={"prompt": variant.template, "system": variant.system or spec.system}
        )
        own: list[EvalCase] = []
        if spec.dataset is not None:
            own.extend(_dataset_cases(shaped, _Place(path, document, ("dataset",))))
        for index, case in enumerate(spec.cases):
            place = _Place(path, document, ("cases", index))
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
        cases.extend(replace(case, prompt_variant=variant.name) for case in own)
    return cases


def _inline_case(spec: EvalSpec, case: CaseSpec, place: _Place) -> EvalCase:
    case_id = _inline_id(case, place)
    if case.prompt is not None and case.messages is not None:
        message = f"case {case_id!r}: give either `prompt` or `messages`, not both"
        raise place.error(message, "messages")
    choices = _case_choices(spec, case, place, case_id)
    try:
        template, variables, keys = _template(
            spec, case.system, case.prompt, case.messages, case.vars
        )
        messages = _rendered(template, variables, choices[0], keys)
    except _FieldError as exc:
        raise place.error(f"case {case_id!r}: {exc}", *exc.key) from None
    expected = place.text("expected", case.expected)
    return _resolve(
        spec,
        place,
        case.assertions,
        case_id=case_id,
        messages=messages,
        template=template,
        template_vars=variables,
        expected=_choice_expected(expected, choices),
        threshold=case.threshold,
        model_params=case.model_params,
        tags=case.tags,
        files=case.files,
        vars=case.vars,
        task=case.task.model_dump() if case.task else None,
        expected_output_tokens=case.expected_output_tokens,
        judge_metrics=case.judge_metrics,
        include_dirs=case.include_dirs,
        images=_images(place, case.images, place.path.parent, case_id),
        choices=choices[0],
        answer_index=choices[1],
        choice_labels=None,
    )


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
    from .choices import answer_index

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
    from .vision import ImageError, check_image_ref

    checked = []
    for index, ref in enumerate(refs):
        try:
            checked.append(check_image_ref(ref, base_dir))
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
        rows = load_dataset(spec.dataset, place.path.parent, needs_prompt=spec.prompt is None)
    except DatasetError as exc:
        raise place.error(f"dataset: {exc}") from None
    return [_row_case(spec, row, place) for row in rows]


def _row_case(spec: EvalSpec, row: DatasetRow, place: _Place) -> EvalCase:
    where = f"dataset row {row.id!r} ({row.where})"
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
    return _resolve(
        spec,
        place,
        [],
        case_id=row.id,
        messages=messages,
        template=template,
        template_vars=row_vars,
        expected=_choice_expected(row.expected, choices),
        threshold=row.threshold,
        model_params={},
        tags=list(row.tags),
        files={},
        vars=row.vars,
        task=row.task,
        expected_output_tokens=row.expected_output_tokens,
        judge_metrics=[],
        include_dirs=[],
        images=_images(place, row.images, place.path.parent, row.id),
        choices=choices[0],
        answer_index=choices[1],
        choice_labels=row.choice_labels,
    )


def _resolve(spec: EvalSpec, place: _Place, own: list[RawAssertion], **case: Any) -> EvalCase:
    """Complete a case with the file-level assertions, threshold, params and tags."""
    if case["choices"] is not None and not any(_is_choice(raw) for raw in [*own, *spec.assertions]):
        own = [*own, "choice"]  # a multiple choice case is scored by the option it names
    assertions = _assertions(spec, place, own, case)
    threshold = case.pop("threshold")
    metrics = _judge_metrics(place, [*spec.judge_metrics, *case.pop("judge_metrics")])
    folders = _include_dirs(place, [*spec.include_dirs, *case.pop("include_dirs")])
    return EvalCase(
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


def _include_dirs(place: _Place, names: list[str]) -> tuple[Path, ...]:
    """Folders relative to the eval file; each must exist (a collection error otherwise)."""
    folders = []
    for name in dict.fromkeys(names):
        folder = (place.path.parent / name).resolve()
        if not folder.is_dir():
            raise place.error(f"include_dirs: {name!r} is not a folder next to the eval file")
        folders.append(folder)
    return tuple(folders)


def _judge_metrics(place: _Place, names: list[str]) -> tuple[str, ...]:
    """Jury dimension names as keys (``Brand voice`` -> ``brand_voice``), each once."""
    from .judging.prompts import dimension_key

    try:
        return tuple(dict.fromkeys(dimension_key(name) for name in names))
    except ValueError as exc:
        raise place.error(f"judge_metrics: {exc}", "judge_metrics") from None


def _assertions(
    spec: EvalSpec, place: _Place, own: list[RawAssertion], case: dict[str, Any]
) -> tuple[Assertion, ...]:
    """The case's own assertions, then the file-level ones; each needs a value or expected."""
    assertions = tuple(parse_assertion(item) for item in [*own, *spec.assertions])
    for index, assertion in enumerate(assertions):
        if assertion.agent_check is not None and spec.kind != "agent":
            mine = index < len(own)
            at = ("assert", index) if mine else ()
            message = f"`{assertion.type}` checks an agent's work: it needs `kind: agent`"
            raise place.error(f"case {case['case_id']!r}: {message}", *at)
        if assertion.type == "choice" and case["choices"] is None:
            mine = index < len(own)
            at = ("assert", index) if mine else ()
            message = "`choice` scores multiple choice: the case needs `choices` and `answer`"
            raise place.error(f"case {case['case_id']!r}: {message}", *at)
        if assertion.needs_value and case["expected"] is None:
            mine = index < len(own)
            origin = "" if mine else " (from the file-level `assert:`)"
            message = f"`{assertion.type}`{origin} needs a value or `expected`"
            at = ("assert", index) if mine else ()
            raise place.error(f"case {case['case_id']!r}: {message}", *at)
    return assertions


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
    except _TemplateKeyError as exc:
        raise _FieldError(keys[exc.index], str(exc)) from None


class _TemplateKeyError(ValueError):
    """A placeholder without a value in message ``index`` of a template."""

    def __init__(self, index: int, message: str) -> None:
        super().__init__(message)
        self.index = index


def render_chat(
    template: Sequence[Mapping[str, str]],
    variables: dict[str, Any] | None,
    choices: tuple[str, ...] | None = None,
) -> tuple[dict[str, str], ...]:
    """Render every message of ``template`` with ``variables``.

    Multiple choice options are the ``{{choices}}`` variable (lettered lines); a template that
    does not place them gets them, with an instruction, after the last user message. Raises
    ValueError (a ``_TemplateKeyError``) for an unknown placeholder.
    """
    if choices is not None and variables is not None:
        from .choices import format_choices

        variables = {"choices": format_choices(choices), **variables}
    placed = any("choices" in _placeholders(m["content"]) for m in template)
    rendered: list[dict[str, str]] = []
    for index, message in enumerate(template):
        try:
            content = render_template(message["content"], variables)
        except ValueError as exc:
            raise _TemplateKeyError(index, str(exc)) from None
        rendered.append({"role": message["role"], "content": content})
    if choices is not None and not (placed and variables is not None):
        from .choices import choice_prompt

        last = max(i for i, m in enumerate(rendered) if m["role"] == "user")
        rendered[last] = {
            "role": "user",
            "content": choice_prompt(rendered[last]["content"], choices),
        }
    return tuple(rendered)


def _placeholders(text: str) -> set[str]:
    return {match.group(1) for match in TEMPLATE_VAR.finditer(text)}


def render_template(text: str, variables: dict[str, Any] | None) -> str:
    """Replace ``{{name}}`` placeholders; an unknown name is an error, not an empty string.

    ``{{a.b}}`` and ``{{a.0}}`` reach into mappings and lists; mappings and lists render as
    JSON. ``variables=None`` means the text is not a template and is returned unchanged.
    """
    if variables is None:
        return text

    def replace(match: re.Match[str]) -> str:
        name = match.group(1)
        try:
            value = _lookup(variables, name)
        except KeyError:
            known = ", ".join(sorted(map(str, variables))) or "none"
            raise ValueError(f"unknown template variable {name!r} (known: {known})") from None
        return value if isinstance(value, str) else _as_text(value)

    return TEMPLATE_VAR.sub(replace, text)


def _lookup(variables: dict[str, Any], name: str) -> Any:
    """``variables[name]``, else a walk down the dotted parts of ``name``; KeyError if absent."""
    if name in variables:
        return variables[name]
    value: Any = variables
    for part in name.split("."):
        if isinstance(value, dict) and part in value:
            value = value[part]
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            raise KeyError(name)
    return value


def _as_text(value: Any) -> str:
    if isinstance(value, (dict, list)):
        return json.dumps(value, ensure_ascii=False)
    return str(value)


def _safe_id(case_id: str) -> str:
    return _UNSAFE_ID.sub("-", case_id.strip())


def _check_unique_ids(cases: list[EvalCase], path: Path) -> None:
    seen: dict[str, int] = {}
    for case in cases:
        if case.id in seen:
            message = f"duplicate case id {case.id!r} (first at line {seen[case.id]})"
            raise EvalFileError(path, case.line, message)
        seen[case.id] = case.line
