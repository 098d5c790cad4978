"""A user's grader's prompt (``model-graded``): read and checked at collection, rendered when
its judges are asked.

At collection, a grader's ``prompt: file://PATH`` is read from the eval file's folder, inside
the project as every path an eval file names (:func:`.paths.resolve_eval_path`), and its prompt
is checked against the case: every ``{{variable}}`` must be one the grader gives or a var of
the case. After the answer, :func:`grader_prompt` renders it. Both go through
:mod:`.templating`, the one reader of ``{{...}}``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..scoring import (
    CONTEXT_TYPES,
    TRAJECTORY_VAR,
    Assertion,
    JudgeSpec,
    ModelGradedSpec,
    with_prompt_text,
)
from .context import context_text
from .paths import PathRefused, resolve_eval_path
from .templating import placeholders, render_template


class GraderError(ValueError):
    """A grader that cannot be used for a case; ``index`` is its assertion's, ``key`` the
    offending key inside it."""

    def __init__(self, index: int, message: str, key: str = "prompt") -> None:
        super().__init__(message)
        self.index = index
        self.key = key


def resolve_graders(
    assertions: Sequence[Assertion],
    *,
    folder: Path,
    roots: Sequence[Path],
    case_vars: Mapping[str, Any],
    has_expected: bool,
    has_context: bool,
) -> tuple[Assertion, ...]:
    """``assertions`` with each grader's ``file://`` prompt read and every grader's prompt
    checked against the case; raise :class:`GraderError` for the first that fails."""
    resolved = []
    for index, assertion in enumerate(assertions):
        spec = assertion.graded
        if isinstance(spec, ModelGradedSpec):
            try:
                spec = _read(spec, folder, roots)
                check_grader_prompt(
                    spec.prompt,
                    case_vars,
                    has_expected=has_expected,
                    has_context=has_context,
                    trajectory=spec.whole_trajectory,
                )
            except ValueError as exc:
                raise GraderError(index, f"{assertion.type}: {exc}") from None
            assertion = replace(assertion, graded=spec)
        resolved.append(assertion)
    return tuple(resolved)


def _read(spec: ModelGradedSpec, folder: Path, roots: Sequence[Path]) -> ModelGradedSpec:
    """``spec`` with its ``file://`` prompt read (as it is when the prompt is inline)."""
    if spec.prompt_file is None or spec.prompt:
        return spec
    name = spec.prompt_file
    try:
        path = resolve_eval_path(name, folder, roots)
        text = path.read_text(encoding="utf-8")
    except PathRefused as exc:
        raise ValueError(f"prompt: {exc}") from None
    except OSError as exc:
        raise ValueError(f"prompt: cannot read file://{name}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise ValueError(f"prompt: file://{name} is not UTF-8 text") from None
    return with_prompt_text(spec, text)


def check_grader_prompt(
    template: str,
    case_vars: Mapping[str, Any],
    *,
    has_expected: bool,
    has_context: bool,
    trajectory: bool = False,
) -> None:
    """Raise ValueError when ``template`` names a variable the case cannot give: not one of
    ``input``, ``output``, ``expected``, ``context`` nor a var of the case, ``{{expected}}``
    on a case without one, or ``{{context}}`` on a case without context (and no solver to
    retrieve it). ``{{trajectory}}`` is a ``scope: trajectory`` grader's, and such a grader's
    prompt must name it: else its judges would never see the trajectory."""
    names = placeholders(template)
    if TRAJECTORY_VAR in names and not trajectory and TRAJECTORY_VAR not in case_vars:
        raise ValueError("the prompt uses {{trajectory}}: the grader needs `scope: trajectory`")
    if trajectory and TRAJECTORY_VAR not in names:
        raise ValueError(
            "scope: trajectory shows the judges the trajectory as {{trajectory}}: "
            "the prompt does not use it"
        )
    if "expected" in names and not has_expected:
        raise ValueError("the prompt uses {{expected}}: the case needs `expected`")
    if "context" in names and not has_context:
        raise ValueError(
            "the prompt uses {{context}}: the case needs `context` (or the file a `solver` "
            "that returns it; a retrieval that found nothing is `context: []`)"
        )
    # Rendering with stand-ins is the one check of every other name, dotted ones included.
    stand_in = "" if trajectory else None
    render_template(template, grader_variables(None, "", None, (), case_vars, stand_in))


def grader_prompt(
    spec: ModelGradedSpec,
    question: str | None,
    answer: str,
    expected: str | None,
    context: Sequence[str],
    case_vars: Mapping[str, Any],
    trajectory: str | None = None,
) -> str:
    """The grader's prompt as its judges read it, rendered with :func:`grader_variables`
    (``trajectory``: the rendered trajectory, for a ``scope: trajectory`` grader)."""
    variables = grader_variables(question, answer, expected, context, case_vars, trajectory)
    return render_template(spec.prompt, variables)


def grader_variables(
    question: str | None,
    answer: str,
    expected: str | None,
    context: Sequence[str],
    case_vars: Mapping[str, Any],
    trajectory: str | None = None,
) -> dict[str, Any]:
    """What a grader prompt is rendered with: the case's vars (bare and under ``vars``), then
    ``input`` (the last user message sent), ``output`` (the reply), ``expected`` and
    ``context`` (chunks joined by a blank line), and for a ``scope: trajectory`` grader
    ``trajectory``, which win over vars of those names (``{{vars.NAME}}`` still reaches them)."""
    own = {} if trajectory is None else {TRAJECTORY_VAR: trajectory}
    return {
        **case_vars,
        "vars": dict(case_vars),
        "input": question or "",
        "output": answer,
        "expected": expected or "",
        "context": context_text(context),
        **own,
    }


def reads_context(spec: JudgeSpec) -> bool:
    """Whether ``spec`` is a grader whose prompt shows ``{{context}}``."""
    return isinstance(spec, ModelGradedSpec) and "context" in placeholders(spec.prompt)


def needs_context(spec: JudgeSpec) -> bool:
    """Whether a judged assertion reads the retrieved context: a RAG context metric, or a
    grader whose prompt shows ``{{context}}``."""
    return spec.kind in CONTEXT_TYPES or reads_context(spec)
