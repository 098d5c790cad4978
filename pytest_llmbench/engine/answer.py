"""How a plan is answered: the one call path of every model call this process makes.

:meth:`Answerer.answer` turns a :class:`~pytest_llmbench.engine.plan.CallPlan` into the
coroutine of its :class:`~pytest_llmbench.engine.request.Answer`: the optimizer's rewrite of an
optimized variant's prompt, then the plan's case kind answers (:mod:`.kinds`: a plain call, the
agent loop, the file's solver, a conversation's calls, option scoring), its model-graded
assertions judged (:mod:`.grading`). :meth:`Answerer.complete` is a plain test's call (the
``llm`` fixture). Every call goes through the :class:`~pytest_llmbench.engine.pacing.CallPacer`:
paced, cached, budgeted, rate-limited. The Answerer is the :class:`.kinds.Engine` the kinds use.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Coroutine, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from ..models import Completion, ItemError, ProviderError
from .call_spans import CURRENT_NODEID
from .call_spans import active as active_spans
from .conversation_calls import Progress, grade_turns
from .grading import HelperCalls, HelperTargets, grade
from .kinds import CaseKind, KindCall, kind_of
from .kinds.case_kind import sent_messages
from .kinds.tool_shim import shim_request
from .request import (
    Answer,
    ConversationRun,
    Request,
    estimate_tokens,
    optimized_messages,
    with_images,
)

if TYPE_CHECKING:
    from ..agent import AgentRun, McpPool
    from ..judging import GradedAssertion
    from ..models import CallTarget, ModelProfile
    from .contests import Contests
    from .optimizer import PromptOptimizer, Rewrite
    from .pacing import CallPacer
    from .plan import CallPlan

T = TypeVar("T")


class Answerer:
    """Answers the plans (and plain tests' calls) of this process through one pacer."""

    def __init__(
        self,
        pacer: CallPacer,
        resolve: Callable[..., CallTarget],
        n_workers: int,
        *,
        judge_metrics: Sequence[str] = (),
        optimizer_store: Path | None = None,
        claim_timeout_s: float = 360.0,
        mcp_scratch: Callable[[str], Path] | None = None,
        baseline: Path | None = None,
        contests: Contests | None = None,
    ) -> None:
        self._pacer = pacer
        self._resolve = resolve
        self._helpers = HelperCalls(pacer, n_workers, baseline, contests)
        self._judge_metrics = tuple(judge_metrics)
        self._store = optimizer_store
        self._claim_timeout_s = claim_timeout_s
        self._optimizer: PromptOptimizer | None = None
        #: what each case kind keeps for this answerer, by kind name (:meth:`kind_state`)
        self._kind_state: dict[str, Any] = {}
        #: the conversations running now, by node id (read when pytest-timeout ends one)
        self._talks: dict[str, Progress] = {}
        #: where a shared MCP stdio server runs (a folder made per server); the pool, once used
        self._mcp_scratch = mcp_scratch
        self._mcp_pool: McpPool | None = None

    # -- main thread --------------------------------------------------------------------------
    def answer(
        self, plan: CallPlan, workdir: Path | None, *, stream: bool
    ) -> Answer | Coroutine[Any, Any, Answer]:
        """``plan``'s answer when the response cache has it (one plain call, no judge), else
        the coroutine answering it (run it on the engine loop).

        Targets are resolved here, on the calling (main) thread: an embedded server starts
        (seconds) without blocking the engine loop, and a missing key is the item's setup error.
        Images come first: a model known not to take them fails before any server starts.
        A cached answer is read here too: a fully cached run never wakes the engine's thread.
        When the run exports a trace, every call made for the answer (here, or on the engine
        loop, ahead of the item or not) is kept as one of the item's call spans.
        """
        keyed = active_spans() is not None
        token = CURRENT_NODEID.set(plan.nodeid) if keyed else None
        try:
            found = self._answering(plan, workdir, stream)
        finally:
            if token is not None:
                CURRENT_NODEID.reset(token)
        if isinstance(found, Answer):
            return found
        answering = _keyed(plan.nodeid, found) if keyed else found
        if self._helpers.contests.members(plan.nodeid):
            return self._contesting(plan, answering)
        return answering()

    def _answering(
        self, plan: CallPlan, workdir: Path | None, stream: bool
    ) -> Answer | Callable[[], Coroutine[Any, Any, Answer]]:
        """``plan``'s cached answer, else what makes the coroutine answering it."""
        kind = kind_of(plan)
        request = self._request(kind, plan, stream)
        if kind.one_call and not (plan.variant.optimized or plan.graded):
            found = self._pacer.cached(request)
            if isinstance(found, Completion):
                return _answered(kind, plan, request, found)
            request = found
        targets = {judge.name: self._helper_target(judge) for judge in plan.judge_profiles}
        made = kind.prepare(self, plan, workdir)

        def answering() -> Coroutine[Any, Any, Answer]:
            return self._answer(kind, plan, request, targets, made)

        return answering

    def claim(self, plan: CallPlan, answer: Answer) -> Answer:
        """``answer`` as ``plan``'s item reports it: a select-best contest's judge calls on one
        contestant's record only (:meth:`.contests.Contests.claim`)."""
        graded = self._helpers.contests.claim(plan, answer.graded)
        return answer if graded is answer.graded else dataclasses.replace(answer, graded=graded)

    def contestants(self, nodeid: str) -> tuple[str, ...]:
        """The contestants of item ``nodeid``'s select-best contest (itself included), or ()."""
        return self._helpers.contests.members(nodeid)

    async def withdraw(self, nodeid: str, why: str) -> None:
        """Item ``nodeid`` has no answer for its contest (its setup failed)."""
        await self._helpers.contests.withdraw(nodeid, why)

    async def _contesting(
        self, plan: CallPlan, answering: Callable[[], Coroutine[Any, Any, Answer]]
    ) -> Answer:
        """A contestant's answer: when it fails (or is cancelled) before its contest is judged,
        the contest goes on without it instead of waiting for it. (``answering`` makes the
        coroutine here, so that none is left unawaited when this one is cancelled unstarted.)"""
        try:
            return await answering()
        except BaseException as exc:
            why = exc.message if isinstance(exc, ItemError) else type(exc).__name__
            await self._helpers.contests.withdraw(plan.nodeid, why)
            raise

    def _request(self, kind: CaseKind, plan: CallPlan, stream: bool) -> Request:
        """The request of ``plan``'s own call."""
        messages = with_images(plan, plan.case.messages)
        tools = plan.tool_params
        if kind.shimmed(plan):
            messages, tools = shim_request(plan, messages)
        return Request(
            target=self._resolve(plan.model, scoring=kind.scores_options),
            messages=messages,
            params={**plan.call_params, **tools},
            key_params={**plan.params, **tools},
            repeat=plan.repeat,
            stream=stream,
            lane=self._pacer.lane(plan.model, plan.parallel_safe),
            slots=tuple(self._helpers.slots(plan)),
            estimate=estimate_tokens(plan.case.messages, plan.answer_token_budget),
            model_name=plan.model.name,
            nodeid=plan.nodeid,
            # one independent call (a plain item's): --batch may send it in a batch; the
            # other kinds' calls depend on each other (turns, an agent's loop) and stay live
            batchable=kind.one_call,
        )

    def complete(
        self,
        model: ModelProfile,
        messages: Sequence[dict[str, Any]],
        params: dict[str, Any],
        *,
        repeat: int,
        call: int,
        nodeid: str,
    ) -> Coroutine[Any, Any, Completion]:
        """The coroutine of a plain test's ``call``-th call of ``model`` (the ``llm`` fixture):
        streamed, on the model's lane, its cache entry its own."""
        request = Request(
            target=self._resolve(model),
            messages=tuple(messages),
            params=params,
            key_params={**model.params, **params, "llmbench_call": call},
            repeat=repeat,
            stream=True,
            lane=self._pacer.lane(model, file_parallel_safe=True),
            slots=tuple(self._helpers.model_slots(model)),
            estimate=estimate_tokens(messages),
            model_name=model.name,
            nodeid=nodeid,
        )
        if active_spans() is None:
            return self._pacer.paced(request)
        return _keyed(nodeid, lambda: self._pacer.paced(request))()

    def _helper_target(self, judge: ModelProfile) -> CallTarget | ItemError:
        """A judge's target, or why it cannot be called: that judge alone is then excluded."""
        try:
            return self._resolve(judge)
        except ItemError as exc:
            return exc
        except Exception as exc:  # an embedded server that will not start, say
            return ProviderError(f"{judge.name}: {type(exc).__name__}: {exc}", "provider")

    # -- engine loop --------------------------------------------------------------------------
    async def _answer(
        self, kind: CaseKind, plan: CallPlan, request: Request, targets: HelperTargets, made: Any
    ) -> Answer:
        """The plan's answer by its kind (an agent's whole loop, a conversation, ...), with its
        model-graded verdicts; an optimized variant's prompt rewritten first."""
        optimization: dict[str, Any] | None = None
        if plan.variant.optimized:
            rewrite = await self._rewrite(plan, targets)
            optimization = rewrite.to_record()
            request = dataclasses.replace(request, messages=optimized_messages(plan, rewrite))
        answer = await kind.answer(self, KindCall(plan, request, targets, made))
        if optimization is None:
            return answer
        return dataclasses.replace(answer, optimization=optimization)

    # -- what kinds use (:class:`.kinds.Engine`) -----------------------------------------------
    @property
    def pacer(self) -> CallPacer:
        """The pacer every call of this process goes through."""
        return self._pacer

    @property
    def helpers(self) -> HelperCalls:
        """Judges' and helper models' calls."""
        return self._helpers

    def kind_state(self, name: str, make: Callable[[], T]) -> T:
        """The state case kind ``name`` keeps for this answerer, made on first use."""
        if name not in self._kind_state:
            self._kind_state[name] = make()
        found: T = self._kind_state[name]
        return found

    @contextlib.contextmanager
    def talking(self, nodeid: str) -> Iterator[Progress]:
        """Follow item ``nodeid``'s conversation while it runs (:meth:`said_so_far`)."""
        progress = self._talks[nodeid] = Progress()
        try:
            yield progress
        finally:
            if self._talks.get(nodeid) is progress:
                del self._talks[nodeid]

    async def grade(
        self,
        plan: CallPlan,
        completion: Completion,
        targets: HelperTargets,
        retrieved: tuple[str, ...] | None = None,
        run: AgentRun | None = None,
    ) -> tuple[GradedAssertion, ...]:
        """The judges of ``plan``'s model-graded assertions on ``completion``."""
        metrics = self._judge_metrics
        return await grade(self._helpers, plan, completion, targets, metrics, retrieved, run)

    async def grade_turns(
        self,
        plan: CallPlan,
        run: ConversationRun,
        targets: HelperTargets,
        paths: Mapping[int, AgentRun] | None = None,
    ) -> tuple[GradedAssertion, ...]:
        """The judges of each turn's model-graded assertions on that turn's reply (``paths``:
        an agent's conversation, each reply's turn -> the agent's run up to it)."""
        metrics = self._judge_metrics
        return await grade_turns(self._helpers, plan, run, targets, metrics, paths)

    def said_so_far(self, nodeid: str) -> ConversationRun | None:
        """What the conversation of item ``nodeid`` said so far, while it runs (else None)."""
        progress = self._talks.get(nodeid)
        return progress.so_far() if progress is not None else None

    async def _rewrite(self, plan: CallPlan, targets: HelperTargets) -> Rewrite:
        """The plan's prompt rewritten for its model by the optimizer (once per run)."""
        optimizer = plan.optimizer
        assert optimizer is not None

        async def complete(messages: list[dict[str, str]], params: dict[str, Any]) -> Completion:
            request = self._helpers.request(
                plan, optimizer, targets, messages, params, role="optimizer"
            )
            if not isinstance(request, ItemError):
                # One rewrite per prompt and model, whichever repeat asks first.
                nodeid = f"{plan.nodeid} (optimizer {optimizer.name})"
                request = dataclasses.replace(request, repeat=0, nodeid=nodeid)
            return await self._helpers.call(request)

        rewriter = self._prompt_optimizer(optimizer)
        return await rewriter.rewrite(plan.case.template, plan.model, complete)

    def _prompt_optimizer(self, profile: ModelProfile) -> PromptOptimizer:
        if self._optimizer is None:
            from .optimizer import PromptOptimizer

            assert self._store is not None
            self._store.parent.mkdir(parents=True, exist_ok=True)
            self._optimizer = PromptOptimizer(
                self._store, profile, claim_timeout_s=self._claim_timeout_s
            )
        return self._optimizer

    def mcp_pool(self) -> McpPool:
        """This process's MCP pool (shared servers, the bound on running ones), made once."""
        if self._mcp_pool is None:
            import tempfile

            from ..agent import McpPool

            def mkdtemp(name: str) -> Path:
                return Path(tempfile.mkdtemp(prefix=f"llmbench-{name}-"))

            self._mcp_pool = McpPool(self._mcp_scratch or mkdtemp)
        return self._mcp_pool

    def activity(self) -> tuple[int, int]:
        """This process's calls in flight, and those waiting on a rate limit."""
        return self._pacer.activity()

    def close(self) -> None:
        """Close the optimizer's store and the response cache, and stop the shared MCP
        servers."""
        if self._optimizer is not None:
            self._optimizer.close()
        self._pacer.close()
        if self._mcp_pool is not None:
            self._mcp_pool.close()


def _keyed(
    nodeid: str, make: Callable[[], Coroutine[Any, Any, T]]
) -> Callable[[], Coroutine[Any, Any, T]]:
    """What makes ``make``'s coroutine run as item ``nodeid``'s work: the call spans of its
    calls (and of the tasks it starts) are that item's. (The work's coroutine is made when it
    starts: none is left unawaited when it is cancelled unstarted.)"""

    async def keyed() -> T:
        CURRENT_NODEID.set(nodeid)  # the task's own context: nothing to reset
        return await make()

    return keyed


def _answered(kind: CaseKind, plan: CallPlan, request: Request, completion: Completion) -> Answer:
    """The answer of a one-call plan that the cache answers with ``completion``."""
    return Answer(kind.read(plan, completion), messages=sent_messages(plan, request))


def shimmed(plan: CallPlan) -> bool:
    """Whether ``plan`` offers its function definitions through the tool shim: a plain
    (one-reply) call, or every turn of a scripted conversation, whose file says so for its
    model; a simulated user's conversation offers them natively."""
    return kind_of(plan).shimmed(plan)
