"""The solver kind (a file's ``solver: module:function``): application code answers the case,
its model calls paced like the item's (:mod:`..solver`); a self-judging solver's verdict is
one more of the item's, the context it retrieved is what the RAG judges read."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from ...models import Completion, SolverError
from .case_kind import CaseKind, Checking, Engine, KindCall, sent_messages

if TYPE_CHECKING:
    from ...scoring import Verdict
    from ..plan import CallPlan
    from ..request import Answer
    from ..solver import SolverRun


class SolverKind(CaseKind):
    """A file's Python function answering each case."""

    name = "solver"

    async def answer(self, engine: Engine, call: KindCall) -> Answer:
        from ..request import Answer
        from ..solver import solver_completion

        plan, request = call.plan, call.request
        run = await _solve(engine, call)
        _check_context(plan, run.context)
        completion = solver_completion(run, request.target.model_id)
        graded = await engine.grade(plan, completion, call.targets, run.context)
        return Answer(
            completion,
            graded,
            messages=sent_messages(plan, request),
            solver_verdict=run.verdict,
            retrieved_context=run.context,
        )

    def verdicts(self, checking: Checking) -> list[Verdict]:
        """The assertions' verdicts, then the solver's own when it judged itself."""
        verdicts = super().verdicts(checking)
        passed = checking.result.solver_verdict
        if passed is not None:
            verdicts.append(_solver_verdict(passed))
        return verdicts


async def _solve(engine: Engine, call: KindCall) -> SolverRun:
    """The file's ``solver`` answers the case, its model calls paced like the item's."""
    from ...agent import timed
    from ...spec import last_user_text
    from ..call_spans import item_traceparent
    from ..solver import SolverCase, run_solver

    plan, request = call.plan, call.request
    calls = 0

    async def complete(messages: list[dict[str, Any]], params: dict[str, Any]) -> Completion:
        nonlocal calls
        calls += 1
        # Each call of the solver is its own answer: the n-th call has its own cache entry.
        key_params = {**request.key_params, **params, "llmbench_solver_call": calls}
        sent = dataclasses.replace(
            request,
            messages=tuple(messages),
            params={**request.params, **params},
            key_params=key_params,
            stream=request.stream and calls == 1,
        )
        return await engine.pacer.paced(sent)

    assert plan.solver is not None
    case = SolverCase(
        id=plan.case.id,
        prompt=last_user_text(request.messages),
        messages=tuple(request.messages),
        vars=dict(plan.case.vars),
        expected=plan.case.expected,
        choices=plan.case.choices,
        model=plan.model.name,
        context=plan.case.context,
        traceparent=item_traceparent(plan.nodeid),
    )
    # The solver's own run is a span of the item too (beside its model calls), when exported.
    with timed("solver", plan.solver, {"solver": plan.solver}):
        return await run_solver(plan.solver, plan.base_dir, case, complete)


def _check_context(plan: CallPlan, retrieved: tuple[str, ...] | None) -> None:
    """A solver that returned no ``context`` for a case without one, where a RAG metric or a
    grader's ``{{context}}`` reads it: an error of the item naming the field, never a judge's
    guess nor an unchecked verdict."""
    from ...scoring import EmbeddingSpec
    from ...spec import needs_context

    if retrieved is not None or plan.case.context is not None:
        return
    needs = sorted(
        {
            entry.assertion.type
            for entry in plan.graded
            if not isinstance(entry.spec, EmbeddingSpec) and needs_context(entry.spec)
        }
    )
    if needs:
        raise SolverError(
            f"solver {plan.solver}: returned no `context` (a dict with 'answer' and 'context') "
            f"and the case has none; {', '.join(needs)} need one"
        )


def _solver_verdict(passed: bool) -> Verdict:
    """The verdict a self-judging solver gave its own answer, as one more assertion's."""
    from ...scoring import Verdict

    reason = "the solver judged its answer " + ("right" if passed else "wrong")
    return Verdict("solver", passed, 1.0 if passed else 0.0, 1.0, reason)
