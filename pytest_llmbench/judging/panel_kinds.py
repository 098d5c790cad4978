"""The judge kinds graded by one panel on one prompt: ``llm-rubric``, ``jury``, ``factuality``,
``closed-qa``, the RAG metrics and a user's grader (``model-graded``). What the judges are
shown is built here from the answer's view (:func:`judged_request`); the panel asks and
aggregates as the kind's form says (:func:`.panel.grade`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..scoring import JudgeSpec, ModelGradedSpec
from .panel import GradedAssertion, unchecked
from .panel import grade as grade_panel

if TYPE_CHECKING:
    from .answer_view import AnswerView, JudgedEntry
    from .panel import PanelForm
    from .prompts import JudgeRequest


async def grade_by_panel(entry: JudgedEntry, view: AnswerView, form: PanelForm) -> GradedAssertion:
    """The panel's verdict on the answer; unchecked when there is nothing to judge against (an
    empty retrieved context, no expected answer for factuality)."""
    request = judged_request(entry, view)
    if isinstance(request, GradedAssertion):
        return request
    spec = judge_spec(entry)
    return await grade_panel(
        entry.index, entry.assertion, spec, request, entry.judges, view.complete, form
    )


async def grade_grader(entry: JudgedEntry, view: AnswerView, form: PanelForm) -> GradedAssertion:
    """A user's grader: :func:`grade_by_panel` on its prompt, rendered for the answer."""
    spec = entry.spec
    assert isinstance(spec, ModelGradedSpec)  # model-graded assertions carry a grader
    request = judged_request(entry, view, spec)
    if isinstance(request, GradedAssertion):
        return request
    return await grade_panel(
        entry.index, entry.assertion, spec, request, entry.judges, view.complete, form
    )


def judged_request(
    entry: JudgedEntry, view: AnswerView, grader: ModelGradedSpec | None = None
) -> JudgeRequest | GradedAssertion:
    """What the judges of ``entry`` are shown (``grader``: a user's grader's rendered prompt),
    or the unchecked verdict saying why nothing can be judged."""
    from .panel import judge_request
    from .trajectory_judge import nothing_to_recover

    spec = judge_spec(entry)
    context = view.context
    if view.reads_context(spec) and not context:  # a solver's empty list
        return nothing_to_judge(entry, "the context is empty")
    trajectory, assertion = view.trajectory, entry.assertion
    if spec.whole_trajectory and nothing_to_recover(
        assertion.base_type, assertion.value, trajectory.tool_errors
    ):
        return recovered_from_nothing(entry)
    try:
        return judge_request(
            entry.assertion,
            spec,
            messages=view.messages,
            answer=view.answer,
            expected=view.expected,
            task=view.task,
            extra_dimensions=view.extra_dimensions,
            context=context or (),
            grader_prompt=None if grader is None else view.grader_prompt(grader),
            reasoning=view.reasoning if spec.show_reasoning and view.reasoning else None,
            trajectory=trajectory.text,
        )
    except ValueError as exc:  # nothing to judge against (collection refuses the known cases)
        return nothing_to_judge(entry, str(exc))


def recovered_from_nothing(entry: JudgedEntry) -> GradedAssertion:
    """The built-in ``recovered`` on a trajectory where no tool call failed: passed, without
    a judge (:mod:`.trajectory_judge`)."""
    from ..scoring import Verdict
    from .trajectory_judge import NOTHING_TO_RECOVER

    assertion = entry.assertion
    verdict = Verdict(assertion.type, True, 1.0, assertion.weight, NOTHING_TO_RECOVER)
    return GradedAssertion(entry.index, verdict)


def judge_spec(entry: JudgedEntry) -> JudgeSpec:
    """``entry``'s judge settings: every judged kind but embedding similarity has them."""
    spec = entry.spec
    assert isinstance(spec, JudgeSpec), f"{entry.assertion.type} has no judge settings"
    return spec


def nothing_to_judge(entry: JudgedEntry, why: str) -> GradedAssertion:
    """An unchecked verdict for an assertion with nothing to judge against (an empty context,
    no baseline answer, no expected answer for factuality): the file's gap, not the model's
    failure."""
    return unchecked(entry.index, entry.assertion, f"{why}: nothing to judge against")
