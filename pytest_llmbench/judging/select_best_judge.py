"""Judge a select-best contest: every contestant's answer shown at once, each judge picks one.

The answers are shown shuffled with the contest's seed
(:func:`~pytest_llmbench.scoring.select_best.shuffled`), and in each rotation of that order
(:func:`~pytest_llmbench.scoring.select_best.rotations`), all at once. The panel is asked as a
user's grader is (:func:`.panel.grade` on a choice among the labels, read strictly: a reply
outside them is asked again, then that judge's error, never a pick). The contest's pick is the
contestant picked most often over judges and orders. Every judge call is returned with
``details`` naming the seed, the rotation, the order shown and the contestant it picked, for
the record of the contestant that carries the calls.
"""

from __future__ import annotations

from collections.abc import Awaitable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from ..scoring import (
    LABELS,
    SELECT_BEST_SCORE_KEY,
    Contestant,
    chooser,
    contest_prompt,
    plurality,
    rotations,
    shuffled,
    votes,
)
from .panel import JudgeCall
from .panel import grade as grade_panel
from .prompts import GRADER_KIND, JudgeRequest

if TYPE_CHECKING:
    from ..models import ModelProfile
    from ..scoring import Assertion, SelectBestSpec
    from .answer_view import AnswerView, JudgedEntry
    from .panel import CompleteFn, GradedAssertion, PanelForm


def grade_select_best(
    entry: JudgedEntry, view: AnswerView, form: PanelForm
) -> Awaitable[GradedAssertion]:
    """The kind's grading: the answer enters its case's contest (the engine's, which gathers
    every contestant's answer and judges them once with :func:`judge_contest`) and gets its
    verdict when the contest is judged. ``form`` is unused: the judges pick as a user's grader
    does."""
    return view.contest(entry)


@dataclass(frozen=True)
class ContestResult:
    """A judged contest: the order shown, the pick (None: not decided) and why."""

    seed: int
    shown: tuple[str, ...]  #: the contestants' labels, in the order shown (A, B, ...)
    picked: str | None  #: the picked contestant's label
    reason: str  #: the judges' votes, or why there is no pick
    calls: tuple[JudgeCall, ...] = ()
    failed: bool = False  #: every judge failed: the contest has no verdict (an error)


async def judge_contest(
    index: int,
    assertion: Assertion,
    spec: SelectBestSpec,
    question: str | None,
    contestants: Sequence[Contestant],
    seed: int,
    judges: Sequence[ModelProfile],
    complete: CompleteFn,
) -> ContestResult:
    """Show the shuffled answers, and each rotation of them, to the panel at once; the
    contestant picked most often."""
    import asyncio

    shown = shuffled(contestants, seed)
    orders = rotations(shown, spec.rotate)
    criterion = assertion.value if isinstance(assertion.value, str) else None
    grader = chooser(spec, len(shown))
    jobs = []
    for order in orders:
        request = JudgeRequest(
            kind=GRADER_KIND,
            question=question,
            answer="",
            expected=None,
            rubric=contest_prompt(question, order, criterion),
            grader=grader,
        )
        jobs.append(grade_panel(index, assertion, grader, request, judges, complete))
    graded = await asyncio.gather(*jobs)
    calls = tuple(
        _tagged(call, seed, start, tuple(c.label for c in order))
        for start, (order, each) in enumerate(zip(orders, graded, strict=True))
        for call in each.calls
    )
    labels = tuple(c.label for c in shown)
    picks = [str(call.details[0]["picked"]) for call in calls if call.details[0]["picked"]]
    if not picks:
        return ContestResult(seed, labels, None, "every judge failed", calls, failed=True)
    said = f"votes {votes(picks)}"
    if len(orders) > 1:
        said += f" over {len(orders)} orders x {len(judges)} judge(s)"
    excluded = [call for call in calls if call.error is not None]
    if excluded:
        said += "; excluded: " + "; ".join(f"{c.judge}: {c.error}" for c in excluded)
    return ContestResult(seed, labels, plurality(picks), said, calls)


def _tagged(call: JudgeCall, seed: int, rotation: int, labels: tuple[str, ...]) -> JudgeCall:
    """A judge call with the contest it judged (the seed, the rotation of the shuffled order
    and that order) and the contestant it picked; its score is 1 for that pick."""
    picked = None
    if call.choice is not None and call.choice in LABELS[: len(labels)]:
        picked = labels[LABELS.index(call.choice)]
    detail = {"seed": seed, "order": rotation, "shown": list(labels), "picked": picked}
    scores = {} if picked is None else {SELECT_BEST_SCORE_KEY: 1.0}
    return replace(call, details=(detail,), scores=scores)
