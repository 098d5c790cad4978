"""The eval file schema, and loading one file into concrete cases.

``load_spec`` reads a ``*.eval.yaml`` file, validates it with pydantic (unknown keys refused)
and turns it into :class:`EvalCase` values (the expansion of cases, prompt variants and dataset
rows is in :mod:`pytest_llmbench.expand`). Every problem is an :class:`EvalFileError` carrying
the file and line, so collection can report ``path:line: message`` without a traceback.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from .assertions import Assertion, AssertionSpecError, parse_assertion
from .datasets import DatasetSource
from .templating import last_user_text, render_chat
from .yamlsource import LocatedDocument, SourceError, load_located_file

EVAL_SUFFIX = ".eval.yaml"


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
    from .expand import expand_cases, prompt_variants

    variants = prompt_variants(spec, path, document)
    cases = expand_cases(spec, path, document, variants)
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
