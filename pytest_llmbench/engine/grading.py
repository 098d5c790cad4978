"""The calls of an answer's helper models: judges, embedding models, the shim's interpreter and
the prompt optimizer, each on its own model's lane. :func:`grade` runs the judges of every
judged assertion of a plan concurrently, each as its judge kind says
(:mod:`pytest_llmbench.judging.judge_kinds`, looked up by the assertion's type), through one
:class:`~pytest_llmbench.judging.answer_view.AnswerView` of the answer. What a judge reads of
the answer (:func:`judged_answer`) and of the history (:func:`said_messages`, which the
simulated user reads too) is written here once: a tool call is text, never an empty answer.
"""

from __future__ import annotations

from collections.abc import Awaitable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..models import Completion, ItemError
from .pacing import BudgetExceeded
from .request import Request, estimate_tokens

if TYPE_CHECKING:
    from ..agent import AgentRun, ToolCall
    from ..judging import AnswerView, GradedAssertion, Trajectory
    from ..models import CallTarget, ModelProfile
    from ..scoring import BaselineAnswer, ModelGradedSpec
    from .contests import Contests
    from .pacing import CallPacer
    from .plan import CallPlan
    from .ratelimit import ProcessSlot

#: Each helper model's target, or why it cannot be called.
HelperTargets = dict[str, "CallTarget | ItemError"]


class HelperCalls:
    """Builds and makes the helper models' calls of answers, through the pacer."""

    def __init__(
        self,
        pacer: CallPacer,
        n_workers: int,
        baseline: Path | None = None,
        contests: Contests | None = None,
    ) -> None:
        from .contests import Contests

        self._pacer = pacer
        #: the select-best contests of this process
        self.contests = contests if contests is not None else Contests({})
        self._n_workers = max(1, n_workers)
        #: ``--baseline``: the saved run whose answers ``pairwise`` assertions judge against
        self._baseline = baseline
        self._baseline_records: list[dict[str, Any]] | None = None

    def baseline_answer(self, plan: CallPlan) -> BaselineAnswer | str:
        """The ``--baseline`` run's answer to ``plan``'s case, or why there is none. The
        baseline's records are read once per process, on first use."""
        from ..scoring import baseline_answer

        if self._baseline is None:
            return "no --baseline run to compare with"
        if self._baseline_records is None:
            from ..results_folder import ResultsError, ResultsFolder

            try:
                records = ResultsFolder(self._baseline).read_records()
            except ResultsError as exc:
                return f"the baseline cannot be read: {exc}"
            self._baseline_records = [_judged_record(record) for record in records]
        case_hash = plan.case.case_hash
        return baseline_answer(self._baseline_records, case_hash, plan.label, plan.repeat)

    def slots(self, plan: CallPlan) -> list[ProcessSlot]:
        """Locks that keep serial files and models to one call across xdist workers.

        A limit of one call cannot be split between workers as the others are; alone, the
        process's own serial lane is enough. Files come before models, in every process, so
        two workers never wait on each other's lock.
        """
        if self._n_workers == 1:
            return []
        names = [] if plan.parallel_safe else [f"file:{plan.path}"]
        slots = [self._pacer.slot(name) for name in names]
        return slots + self.model_slots(plan.model)

    def model_slots(self, model: ModelProfile) -> list[ProcessSlot]:
        """The lock of a serial model, under xdist."""
        if self._n_workers > 1 and not model.parallel_safe:
            return [self._pacer.slot(f"model:{model.name}")]
        return []

    def request(
        self,
        plan: CallPlan,
        judge: ModelProfile,
        targets: HelperTargets,
        messages: Sequence[dict[str, str]],
        params: dict[str, Any],
        embed: bool = False,
        *,
        batchable: bool = False,
        role: str = "judge",
    ) -> Request | ItemError:
        """A judge's (or an embedding model's) call, on that model's own lane; ``batchable``:
        an independent verdict (a judge's, a grader's, a RAG metric's, an embedding), which
        ``--batch`` may send in a batch; ``role``: who asks, for the run's trace (a judge, the
        tool shim's ``interpreter``, the ``optimizer``, a simulated user: ``user_sim``)."""
        target = targets[judge.name]
        if isinstance(target, ItemError):
            return target
        return Request(
            target=target,
            messages=tuple(messages),
            params=params,
            key_params={**judge.params, **params, **({"embedding": True} if embed else {})},
            repeat=plan.repeat,
            stream=False,  # a verdict is read whole; its TTFT means nothing
            lane=self._pacer.lane(judge, file_parallel_safe=True),
            slots=tuple(self.model_slots(judge)),
            estimate=estimate_tokens(messages),  # a verdict's length: the default budget
            model_name=judge.name,
            nodeid=f"{plan.nodeid} (judge {judge.name})",
            embed=embed,
            batchable=batchable,
            role=role,
        )

    async def call(self, request: Request | ItemError) -> Completion:
        """A helper's call; a judge that cannot be called, or the budget running out, is that
        judge's error (it is excluded), not the item's: the answer was paid for already."""
        if isinstance(request, ItemError):
            raise request
        try:
            return await self._pacer.paced(request)
        except BudgetExceeded as exc:
            raise ItemError(f"{request.model_name}: not called: {exc}", "budget") from None


async def grade(
    helpers: HelperCalls,
    plan: CallPlan,
    completion: Completion,
    targets: HelperTargets,
    judge_metrics: Sequence[str],
    retrieved: tuple[str, ...] | None = None,
    run: AgentRun | None = None,
    *,
    path: AgentRun | None = None,
) -> tuple[GradedAssertion, ...]:
    """Run the judges of every model-graded assertion of ``plan`` concurrently, each as its
    judge kind says (:data:`~pytest_llmbench.judging.judge_kinds.JUDGE_KINDS`, looked up by the
    assertion's type). RAG metrics read ``retrieved`` (a solver's context) in place of the
    case's ``context``. Every judge is shown the answer as :func:`judged_answer` says (an
    agent's ``run`` with its tool calls) and the history as :func:`said_messages` does; a
    ``scope: trajectory`` judge, the steps of ``path`` when given (a reply of an agent's
    conversation, judged as a reply: the agent's run up to it), else ``run``'s."""
    if not plan.graded:
        return ()
    import asyncio

    from ..judging import judge_kind

    view = _answer_view(helpers, plan, completion, targets, judge_metrics, retrieved, run, path)
    jobs = [judge_kind(entry.assertion.type).verdict(entry, view) for entry in plan.graded]
    return tuple(await asyncio.gather(*jobs))


def _answer_view(
    helpers: HelperCalls,
    plan: CallPlan,
    completion: Completion,
    targets: HelperTargets,
    judge_metrics: Sequence[str],
    retrieved: tuple[str, ...] | None,
    run: AgentRun | None,
    path: AgentRun | None = None,
) -> AnswerView:
    """What the judges of this answer read, and their calls through ``helpers``."""
    from ..judging import AnswerView, JudgedEntry
    from ..spec import grader_prompt, last_user_text, needs_context

    case = plan.case
    context = case.context if retrieved is None else retrieved
    answer = judged_answer(completion, run)
    question = last_user_text(case.messages)
    trajectory = _trajectory(plan, completion, path or run)

    async def complete(
        judge: ModelProfile, messages: list[dict[str, str]], params: dict[str, Any]
    ) -> Completion:
        from ..models import merged_rule, read_reply

        # A reasoning judge's thinking never reaches the verdict's parser: its profile's rule.
        asked = helpers.request(plan, judge, targets, messages, params, batchable=True)
        said = await helpers.call(asked)
        return read_reply(said, merged_rule(judge.thinking, None))

    def embed(embedder: ModelProfile, texts: Sequence[str]) -> Awaitable[Completion]:
        said = [{"role": "user", "content": text} for text in texts]
        asked = helpers.request(plan, embedder, targets, said, {}, embed=True, batchable=True)
        return helpers.call(asked)

    def render(spec: ModelGradedSpec) -> str:
        shown = trajectory.text if spec.whole_trajectory else None
        return grader_prompt(spec, question, answer, case.expected, context or (), case.vars, shown)

    def contest(entry: JudgedEntry) -> Awaitable[GradedAssertion]:
        return helpers.contests.verdict(plan, entry, answer, question or None, complete)

    return AnswerView(
        answer=answer,
        reply=completion.text,
        agent=run is not None,
        messages=tuple(said_messages(case.messages)),
        question=question or None,
        expected=case.expected,
        task=case.task,
        context=context,
        extra_dimensions=(*judge_metrics, *case.judge_metrics),
        conversation=bool(case.turns) or case.simulated_user is not None,
        complete=complete,
        embed=embed,
        reads_context=needs_context,
        grader_prompt=render,
        baseline=lambda: helpers.baseline_answer(plan),
        contest=contest,
        reasoning=completion.reasoning,
        trajectory=trajectory,
    )


def _trajectory(plan: CallPlan, completion: Completion, run: AgentRun | None) -> Trajectory:
    """The answer's trajectory, rendered for judges, when a judged assertion of ``plan`` has
    ``scope: trajectory`` (else empty): an agent's ``run``, or the case's messages as sent (a
    conversation's history up to the reply) and the reply."""
    from ..judging import Trajectory, render_trajectory

    if not any(getattr(entry.spec, "whole_trajectory", False) for entry in plan.graded):
        return Trajectory()
    from .trajectories import trajectory_steps

    return render_trajectory(trajectory_steps(plan.case.messages, completion, run))


def said_messages(history: Sequence[Mapping[str, Any]]) -> list[dict[str, str]]:
    """A chat history as text messages, as a judge's transcript and a simulated user's view
    show it: each system, user and assistant message with its text (image parts left out);
    an assistant's tool calls as lines after its text, and each tool's result (a ``tool``
    message: "not run" in a conversation, an agent tool's output or error) as a line of the
    assistant message that made the call (:mod:`~pytest_llmbench.scoring.conversation`'s
    ``reply_text`` and ``result_line``). Only the roles system, user and assistant remain."""
    from ..scoring import call_name, reply_text, result_line
    from ..spec import message_text

    said: list[dict[str, str]] = []
    names: dict[str, str] = {}  # a call's id -> its tool's name, for its result
    for message in history:
        role = str(message.get("role"))
        if role != "tool":
            calls = message.get("tool_calls") or ()
            names.update((str(call.get("id")), call_name(call)) for call in calls)
            said.append({"role": role, "content": reply_text(message_text(message), calls)})
            continue
        name = names.get(str(message.get("tool_call_id")), str(message.get("name") or "tool"))
        line = result_line(name, message_text(message))
        if said and said[-1]["role"] == "assistant":
            said[-1] = {"role": "assistant", "content": f"{said[-1]['content']}\n{line}"}
        else:
            said.append({"role": "assistant", "content": line})
    return said


def judged_answer(completion: Completion, run: AgentRun | None = None) -> str:
    """The model's answer as its judges see it: its text, then a line per tool call it asked
    for (a reply of calls alone is its calls); an agent's ``run``: each tool call it made with
    the result it was shown, then its final answer."""
    from ..scoring import reply_text

    if run is None:
        return reply_text(completion.text, completion.tool_calls)
    return run_text(run.tool_calls, run.answer)


def run_text(tool_calls: Sequence[ToolCall], answer: str) -> str:
    """An agent's calls as its judges read them: a line per tool call and the result it was
    shown, then its answer (when not blank)."""
    from ..scoring import call_line, result_line

    lines: list[str] = []
    for call in tool_calls:
        lines.append(call_line({"name": call.name, "arguments": call.arguments}))
        lines.append(result_line(call.name, call.result))
    return "\n".join([*lines, answer] if answer.strip() else lines)


def _judged_record(record: dict[str, Any]) -> dict[str, Any]:
    """A baseline record whose ``response`` is its answer as judges see it (with its calls)."""
    from ..scoring import reply_text

    response, calls = record.get("response"), record.get("tool_calls")
    if not isinstance(response, str) or not calls:
        return record
    return {**record, "response": reply_text(response, calls)}
