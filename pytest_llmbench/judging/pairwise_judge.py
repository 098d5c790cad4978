"""Judge a pairwise assertion: the model's answer against the baseline's, in both orders.

Each order is one panel (:func:`.panel.grade`) of the assertion's judges choosing A or B on
:func:`~pytest_llmbench.scoring.pairwise.pair_prompt`, read strictly as a user's grader is (a
reply outside A and B is asked again, then that judge's error, never a choice). The two orders
run at once; their preferences give the outcome (:func:`~pytest_llmbench.scoring.pairwise.outcome`).
Every judge call is recorded, with ``details`` naming its order, what it picked and the opponent.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import TYPE_CHECKING

from ..scoring import (
    ORDERS,
    OUTCOME_SCORES,
    PAIRWISE_SCORE_KEY,
    BaselineAnswer,
    model_label,
    order_grader,
    outcome,
    pair_prompt,
    preference,
)
from .panel import GradedAssertion, JudgeCall
from .panel import grade as grade_panel
from .prompts import GRADER_KIND, JudgeRequest

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ..models import ModelProfile
    from ..scoring import Assertion, JudgeSpec
    from .answer_view import AnswerView, JudgedEntry
    from .panel import CompleteFn, PanelForm


async def grade_pairwise(entry: JudgedEntry, view: AnswerView, form: PanelForm) -> GradedAssertion:
    """The kind's grading: judged against the baseline's answer, or unchecked saying why there
    is none (no ``--baseline``, the baseline lacks the case, a conversation). ``form`` is
    unused: each order's panel picks as a user's grader does."""
    from .panel_kinds import judge_spec, nothing_to_judge

    if view.conversation:
        why = "pairwise compares one reply: a conversation's replies have no baseline to match"
        return nothing_to_judge(entry, why)
    opponent = view.baseline()
    if isinstance(opponent, str):
        return nothing_to_judge(entry, opponent)
    # A saved agent record keeps its final answer, not each call's arguments: both sides of
    # an agent's pair are final answers.
    answer = view.reply if view.agent else view.answer
    spec, judges = judge_spec(entry), entry.judges
    question = view.question
    return await grade_pair(
        entry.index, entry.assertion, spec, question, answer, opponent, judges, view.complete
    )


async def grade_pair(
    index: int,
    assertion: Assertion,
    spec: JudgeSpec,
    question: str | None,
    answer: str,
    opponent: BaselineAnswer,
    judges: Sequence[ModelProfile],
    complete: CompleteFn,
) -> GradedAssertion:
    """Both orders judged at once; a win, a tie or a loss against ``opponent``."""
    grader = order_grader(spec)
    criterion = assertion.value if isinstance(assertion.value, str) else None
    jobs = []
    for order in ORDERS:
        first, second = (answer, opponent.text) if order == ORDERS[0] else (opponent.text, answer)
        prompt = pair_prompt(question, first, second, criterion)
        request = JudgeRequest(
            kind=GRADER_KIND,
            question=question,
            answer=answer,
            expected=None,
            rubric=prompt,
            grader=grader,
        )
        jobs.append(grade_panel(index, assertion, grader, request, judges, complete))
    graded = await asyncio.gather(*jobs)
    calls = tuple(
        _tagged(call, order, opponent)
        for order, each in zip(ORDERS, graded, strict=True)
        for call in each.calls
    )
    return _verdict(index, assertion, spec, calls, opponent)


def _tagged(call: JudgeCall, order: str, opponent: BaselineAnswer) -> JudgeCall:
    """A judge call with what it was asked and answered, for the record; its score is its own
    vote (1: it picked the model's answer, 0: the baseline's), as agreement reads it."""
    picked = None
    if call.choice is not None:
        picked = "model" if call.choice == model_label(order) else "baseline"
    detail = {"order": order, "picked": picked, "opponent": opponent.model}
    scores = {} if picked is None else {PAIRWISE_SCORE_KEY: float(picked == "model")}
    return replace(call, details=(detail,), scores=scores)


def _verdict(
    index: int,
    assertion: Assertion,
    spec: JudgeSpec,
    calls: tuple[JudgeCall, ...],
    opponent: BaselineAnswer,
) -> GradedAssertion:
    from ..scoring import Verdict

    prefers = [preference([str(c.details[0]["picked"]) for c in _valid(calls, o)]) for o in ORDERS]
    if None in prefers:  # every judge of an order failed: no verdict, the item errors
        return GradedAssertion(index, None, calls)
    first, second = (str(p) for p in prefers)
    result = outcome(first, second)
    score = OUTCOME_SCORES[result]
    passed = score >= spec.threshold
    reason = (
        f"pairwise {result} against the baseline's {opponent.model} (repeat {opponent.repeat}): "
        f"model shown first: {_said(first)}; baseline shown first: {_said(second)} "
        f"(score {score:g}, pass >= {spec.threshold:g})"
    )
    excluded = [call for call in calls if call.error is not None]
    if excluded:
        reason += "; excluded: " + "; ".join(f"{c.judge}: {c.error}" for c in excluded)
    verdict = Verdict(assertion.type, passed, score, assertion.weight, reason)
    return GradedAssertion(index, verdict, calls, {PAIRWISE_SCORE_KEY: score})


def _valid(calls: Sequence[JudgeCall], order: str) -> list[JudgeCall]:
    """The calls of ``order`` that picked an answer."""
    return [c for c in calls if c.details[0]["order"] == order and c.details[0]["picked"]]


def _said(preferred: str) -> str:
    return {"model": "prefers the model", "baseline": "prefers the baseline"}.get(
        preferred, "no preference"
    )
