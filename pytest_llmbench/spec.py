"""The eval file schema and its expansion into concrete cases.

``load_spec`` reads a ``*.eval.yaml`` file, validates it with pydantic (unknown keys refused)
and turns it into :class:`EvalCase` values: inline cases and dataset rows alike, with prompts
rendered and assertions parsed. Every problem is an :class:`EvalFileError` carrying the file
and line, so collection can report ``path:line: message`` without a traceback.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from .assertions import Assertion, AssertionSpecError, parse_assertion
from .datasets import DatasetError, DatasetRow, DatasetSource, load_dataset
from .yamlsource import LocatedDocument, SourceError, load_located_file

EVAL_SUFFIX = ".eval.yaml"
_TEMPLATE_VAR = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_.-]*)\s*\}\}")
_UNSAFE_ID = re.compile(r"[\[\]\s/]+|::")


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


def _check_assertions(value: list[RawAssertion]) -> list[RawAssertion]:
    for index, raw in enumerate(value):
        try:
            parse_assertion(raw)
        except AssertionSpecError as exc:
            raise ValueError(f"assert[{index}]: {exc}") from None
    return value


class CaseSpec(_Strict):
    """One inline case of an eval file."""

    id: str | None = Field(None, description="Case id; defaults to case-<n> (1-based)")
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
    dataset: DatasetSource | None = Field(None, description="Cases from a CSV/JSONL file")
    cases: list[CaseSpec] = Field(default_factory=list, description="Inline cases")

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

    @property
    def prompt(self) -> str | None:
        """The last user message."""
        users = [m["content"] for m in self.messages if m["role"] == "user"]
        return users[-1] if users else None


@dataclass(frozen=True)
class LoadedEval:
    """An eval file after validation and expansion."""

    path: Path
    suite: str
    description: str | None
    cases: tuple[EvalCase, ...]


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
        raise EvalFileError(path, 1, "an eval file must be a mapping with a `cases:` list")
    try:
        spec = EvalSpec.model_validate(document.data)
    except ValidationError as exc:
        raise _first_error(path, document, exc) from None
    cases = _expand(spec, path, document)
    return LoadedEval(path, suite_name(path), spec.description, tuple(cases))


def _first_error(path: Path, document: LocatedDocument, exc: ValidationError) -> EvalFileError:
    error = exc.errors(include_url=False)[0]
    loc = tuple(error["loc"])
    where = ".".join(str(part) for part in loc) or "file"
    message = error["msg"].removeprefix("Value error, ")
    if error["type"] == "extra_forbidden":
        message = f"unknown key {loc[-1]!r}"
        where = ".".join(str(part) for part in loc[:-1]) or "top level"
    return EvalFileError(path, document.line_of(loc), f"{where}: {message}")


def _expand(spec: EvalSpec, path: Path, document: LocatedDocument) -> list[EvalCase]:
    cases: list[EvalCase] = []
    if spec.dataset is not None:
        cases.extend(_dataset_cases(spec, path, document))
    for index, case in enumerate(spec.cases):
        line = document.line_of(("cases", index)) or 1
        cases.append(_inline_case(spec, case, index, path, line))
    if not cases:
        raise EvalFileError(path, 1, "no cases: give a `cases:` list or a `dataset:`")
    _check_unique_ids(cases, path)
    return cases


def _inline_case(spec: EvalSpec, case: CaseSpec, index: int, path: Path, line: int) -> EvalCase:
    case_id = _safe_id(case.id) if case.id is not None else f"case-{index + 1}"
    try:
        messages = _messages(spec, case.system, case.prompt, case.messages, case.vars)
    except ValueError as exc:
        raise EvalFileError(path, line, f"case {case_id!r}: {exc}") from None
    return _resolve(
        spec,
        path,
        line,
        case_id=case_id,
        messages=messages,
        expected=None if case.expected is None else str(case.expected),
        raw_assertions=case.assertions,
        threshold=case.threshold,
        model_params=case.model_params,
        tags=case.tags,
        files=case.files,
        vars=case.vars,
        task=case.task.model_dump() if case.task else None,
        expected_output_tokens=case.expected_output_tokens,
    )


def _dataset_cases(spec: EvalSpec, path: Path, document: LocatedDocument) -> list[EvalCase]:
    assert spec.dataset is not None
    line = document.line_of(("dataset",)) or 1
    try:
        rows = load_dataset(spec.dataset, path.parent)
    except DatasetError as exc:
        raise EvalFileError(path, line, f"dataset: {exc}") from None
    return [_row_case(spec, row, path, line) for row in rows]


def _row_case(spec: EvalSpec, row: DatasetRow, path: Path, line: int) -> EvalCase:
    # A row's own prompt is sent verbatim; only a file-level template is rendered.
    row_vars = {**row.vars, "prompt": row.prompt} if spec.prompt is not None else None
    template = spec.prompt if spec.prompt is not None else row.prompt
    try:
        messages = _messages(spec, None, template, None, row_vars)
    except ValueError as exc:
        raise EvalFileError(path, line, f"dataset row {row.id!r} (line {row.line}): {exc}") from None
    return _resolve(
        spec,
        path,
        line,
        case_id=row.id,
        messages=messages,
        expected=row.expected,
        raw_assertions=[],
        threshold=row.threshold,
        model_params={},
        tags=list(row.tags),
        files={},
        vars=row.vars,
        task=row.task,
        expected_output_tokens=row.expected_output_tokens,
    )


def _resolve(spec: EvalSpec, path: Path, line: int, **case: Any) -> EvalCase:
    raw = [*case.pop("raw_assertions"), *spec.assertions]
    assertions = tuple(parse_assertion(item) for item in raw)
    expected = case["expected"]
    for assertion in assertions:
        if assertion.needs_value and expected is None:
            message = f"case {case['case_id']!r}: `{assertion.type}` needs a value or `expected`"
            raise EvalFileError(path, line, message)
    threshold = case.pop("threshold")
    return EvalCase(
        id=case.pop("case_id"),
        messages=case.pop("messages"),
        assertions=assertions,
        threshold=spec.threshold if threshold is None else threshold,
        model_params={**spec.model_params, **case.pop("model_params")},
        tags=tuple(dict.fromkeys([*spec.tags, *case.pop("tags")])),
        line=line,
        **case,
    )


def _messages(
    spec: EvalSpec,
    case_system: str | None,
    prompt: str | None,
    messages: list[Message] | None,
    variables: dict[str, Any] | None,
) -> tuple[dict[str, str], ...]:
    if prompt is not None and messages is not None:
        raise ValueError("give either `prompt` or `messages`, not both")
    result: list[dict[str, str]] = []
    system = case_system if case_system is not None else spec.system
    has_system = messages is not None and any(m.role == "system" for m in messages)
    if system is not None and not has_system:
        result.append({"role": "system", "content": render_template(system, variables)})
    if messages is not None:
        result.extend({"role": m.role, "content": render_template(m.content, variables)} for m in messages)
        return tuple(result)
    text = prompt if prompt is not None else spec.prompt
    if text is None:
        raise ValueError("no prompt: give `prompt`, `messages`, or a file-level `prompt` template")
    result.append({"role": "user", "content": render_template(text, variables)})
    return tuple(result)


def render_template(text: str, variables: dict[str, Any] | None) -> str:
    """Replace ``{{name}}`` placeholders; an unknown name is an error, not an empty string.

    ``variables=None`` means the text is not a template and is returned unchanged.
    """
    if variables is None:
        return text

    def replace(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in variables:
            known = ", ".join(sorted(variables)) or "none"
            raise ValueError(f"unknown template variable {name!r} (known: {known})")
        return str(variables[name])

    return _TEMPLATE_VAR.sub(replace, text)


def _safe_id(case_id: str) -> str:
    return _UNSAFE_ID.sub("-", case_id.strip()) or "case"


def _check_unique_ids(cases: list[EvalCase], path: Path) -> None:
    seen: dict[str, int] = {}
    for case in cases:
        if case.id in seen:
            message = f"duplicate case id {case.id!r} (first at line {seen[case.id]})"
            raise EvalFileError(path, case.line, message)
        seen[case.id] = case.line
