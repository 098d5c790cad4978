"""Run the model calls of upcoming eval items ahead of pytest, bounded per model.

pytest runs and reports items one at a time, in order. Model calls are slow and I/O-bound, so
before each item runs, :class:`~pytest_llmbench.engine.prefetch.Prefetcher` hands the next items of
this process to the :class:`CallScheduler`, which starts their calls on the engine loop: at
most ``concurrency`` calls per model in flight (split between xdist workers), paced by
requests and tokens per minute, halved on HTTP 429 and recovered after. An item's setup then
only waits for its own call. Items are still set up, scored and reported by pytest in order;
``-x``, ``--maxfail`` and Ctrl-C cancel whatever is pending when the session finishes. Items
of ``parallel_safe: false`` files wait for their turn, as do the calls of such models; under
xdist those take a lock shared by the workers, since a limit of one call cannot be split
between them. The pacing, the response cache and the budget are in :mod:`.pacing`.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeGuard

import pytest

from ..models.providers.completion import Completion, ProviderError
from .pacing import BudgetExceeded, CallPacer, lookahead
from .prefetch import prefetchable
from .request import (
    Answer,
    Request,
    agent_completion,
    estimate_tokens,
    optimized_messages,
    with_images,
)
from .streaming import StreamSample

if TYPE_CHECKING:
    from ..agent.loop import AgentRun
    from ..agent.tools import Toolbox
    from ..item import EvalItem
    from ..judging.panel import GradedAssertion
    from ..models.profiles import ModelProfile
    from ..models.providers.completion import CallTarget
    from .optimizer import PromptOptimizer, Rewrite
    from .ratelimit import ProcessSlot
    from .runtime import Runtime

#: Put first on an agent command's PATH: this Python (with pytest) as ``python``/``python3``.
_PYTHON_BIN = (Path(sys.executable).parent,)
#: Answer tokens assumed for a judge's verdict when pacing tokens per minute.
_JUDGE_ANSWER_TOKENS = 256


class CallScheduler:
    """Starts, paces, caches and budgets the model calls of eval items in this process."""

    def __init__(self, runtime: Runtime, n_workers: int) -> None:
        self._runtime = runtime
        self._run = runtime.run
        self._n_workers = max(1, n_workers)
        self._futures: dict[str, concurrent.futures.Future[Answer]] = {}
        self._pacer = CallPacer(runtime, n_workers)
        self._prefetchable: dict[str, bool] = {}
        self._sample = StreamSample()
        self._optimizer: PromptOptimizer | None = None
        self.lookahead = lookahead(self._run, self._n_workers)

    # -- main thread --------------------------------------------------------------------------
    def set_items(self, items: Sequence[pytest.Item]) -> None:
        """Learn the collected items (for the deterministic stream sample)."""
        self._sample = StreamSample.for_items(items)

    def prefetch(self, items: Iterable[pytest.Item]) -> None:
        """Start the calls of ``items`` (the current item, then the next ones), up to the lookahead.

        Calls started for items no longer among them are cancelled: those items were skipped
        before their setup, or handed to another xdist worker, and would otherwise hold the
        lookahead for good.
        """
        upcoming = list(items)
        self._forget_all_but({item.nodeid for item in upcoming})
        for item in upcoming:
            if len(self._futures) >= self.lookahead:
                return
            if self._eligible(item) and item.nodeid not in self._futures:
                self._futures[item.nodeid] = self._submit(item)

    def _eligible(self, item: pytest.Item) -> TypeGuard[EvalItem]:
        """``prefetchable``, remembered: markers do not change once collected."""
        known = self._prefetchable.get(item.nodeid)
        if known is None:
            known = self._prefetchable[item.nodeid] = prefetchable(item)
        return known

    def _forget_all_but(self, nodeids: set[str]) -> None:
        for nodeid in [nodeid for nodeid in self._futures if nodeid not in nodeids]:
            self._futures.pop(nodeid).cancel()

    def take(self, item: EvalItem) -> Answer:
        """Wait for ``item``'s answer (starting its call now if it was not prefetched)."""
        future = self._futures.pop(item.nodeid, None) or self._submit(item)
        try:
            return future.result()
        except BaseException:
            future.cancel()
            raise

    def _submit(self, item: EvalItem) -> concurrent.futures.Future[Answer]:
        try:
            call = self._prepare(item)
        except Exception as exc:  # a missing key, a server that will not start: setup reports it
            failed: concurrent.futures.Future[Answer] = concurrent.futures.Future()
            failed.set_exception(exc)
            return failed
        return self._runtime.engine.submit(call)

    def _prepare(self, item: EvalItem) -> Any:
        # Targets are resolved here, on the main thread: an embedded server starts (seconds)
        # without blocking the engine loop, and a missing key is the item's setup error. Images
        # come first: a model known not to take them fails before any server starts.
        messages = with_images(item, item.case.messages)
        request = Request(
            target=self._runtime.target(item.model),
            messages=messages,
            params=item.call_params,
            key_params=item.params,
            repeat=item.repeat,
            stream=self._streams(item.nodeid),
            lane=self._pacer.lane(item.model, item.loaded.parallel_safe),
            slots=tuple(self._process_slots(item)),
            estimate=estimate_tokens(item),
            model_name=item.model.name,
            nodeid=item.nodeid,
        )
        judges = {judge.name: self._judge_target(judge) for judge in item.judge_profiles}
        toolbox = self._toolbox(item) if item.loaded.agent is not None else None
        return self._call(item, request, judges, toolbox)

    def _toolbox(self, item: EvalItem) -> Toolbox:
        """The agent item's tools on its workdir (made in setup); a sandbox that is required
        but unavailable fails here, as the item's setup error."""
        from ..agent.sandbox import Sandbox, SandboxLimits, SandboxUnavailable
        from ..agent.tools import Toolbox

        agent = item.loaded.agent
        assert agent is not None and item.workdir_path is not None
        try:
            sandbox = Sandbox(
                item.workdir_path, SandboxLimits(), mode=agent.sandbox, path_prefix=_PYTHON_BIN
            )
            toolbox = Toolbox(item.workdir_path, agent.tools, sandbox, base_dir=item.path.parent)
        except (SandboxUnavailable, ValueError) as exc:  # sandbox: required; a bad custom tool
            raise ProviderError(f"{item.model.name}: {exc}", "config") from None
        return toolbox

    def _judge_target(self, judge: ModelProfile) -> CallTarget | ProviderError:
        """A judge's target, or why it cannot be called: that judge alone is then excluded."""
        try:
            return self._runtime.target(judge)
        except ProviderError as exc:
            return exc
        except Exception as exc:  # an embedded server that will not start, say
            return ProviderError(f"{judge.name}: {type(exc).__name__}: {exc}", "provider")

    def _streams(self, nodeid: str) -> bool:
        mode = self._run.stream
        return mode == "all" or (mode == "sample" and self._sample.streams(nodeid))

    def _process_slots(self, item: EvalItem) -> list[ProcessSlot]:
        """Locks that keep serial files and models to one call across xdist workers.

        A limit of one call cannot be split between workers as the others are; alone, the
        process's own serial lane is enough. Files come before models, in every process, so
        two workers never wait on each other's lock.
        """
        if self._n_workers == 1:
            return []
        names = [] if item.loaded.parallel_safe else [f"file:{item.path}"]
        if not item.model.parallel_safe:
            names.append(f"model:{item.model.name}")
        return [self._pacer.slot(name) for name in names]

    # -- engine loop --------------------------------------------------------------------------
    async def _call(
        self,
        item: EvalItem,
        request: Request,
        judge_targets: dict[str, CallTarget | ProviderError],
        toolbox: Toolbox | None = None,
    ) -> Answer:
        """The item's answer (an agent's whole loop), then its model-graded verdicts."""
        run: AgentRun | None = None
        optimization: dict[str, Any] | None = None
        if item.variant.optimized:
            rewrite = await self._rewrite(item, judge_targets)
            optimization = rewrite.to_record()
            request = dataclasses.replace(request, messages=optimized_messages(item, rewrite))
        if toolbox is not None:
            run = await self._agent(item, request, toolbox, judge_targets)
            completion = agent_completion(run, request.target.model_id)
        elif item.loaded.solver is not None:
            completion = await self._solve(item, request)
        else:
            completion = await self._pacer.paced(request)
        graded = await self._grade(item, completion, judge_targets)
        sandbox = toolbox.sandbox if toolbox is not None else None
        sent = None if request.messages is item.case.messages else tuple(request.messages)
        return Answer(completion, graded, run, sandbox, optimization, sent)

    async def _rewrite(
        self, item: EvalItem, targets: dict[str, CallTarget | ProviderError]
    ) -> Rewrite:
        """The item's prompt rewritten for its model by the optimizer (once per run)."""
        optimizer = self._run.optimizer
        assert optimizer is not None

        async def complete(messages: list[dict[str, str]], params: dict[str, Any]) -> Completion:
            request = self._judge_request(item, optimizer, targets, messages, params)
            if not isinstance(request, ProviderError):
                # One rewrite per prompt and model, whichever repeat asks first.
                nodeid = f"{item.nodeid} (optimizer {optimizer.name})"
                request = dataclasses.replace(request, repeat=0, nodeid=nodeid)
            return await self._judged_call(request)

        return await self._prompt_optimizer().rewrite(item.case.template, item.model, complete)

    def _prompt_optimizer(self) -> PromptOptimizer:
        if self._optimizer is None:
            from .optimizer import PromptOptimizer, store_path

            assert self._run.optimizer is not None
            store = store_path(self._runtime.config)
            store.parent.mkdir(parents=True, exist_ok=True)
            timeout = 3 * self._run.request_timeout_s  # a claim older than that was abandoned
            self._optimizer = PromptOptimizer(store, self._run.optimizer, claim_timeout_s=timeout)
        return self._optimizer

    async def _solve(self, item: EvalItem, request: Request) -> Completion:
        """The file's ``solver`` answers the case, its model calls paced like the item's."""
        from ..spec.templating import last_user_text
        from .solver import SolverCase, run_solver, solver_completion

        calls = 0

        async def complete(messages: list[dict[str, Any]], params: dict[str, Any]) -> Completion:
            nonlocal calls
            calls += 1
            # Each call of the solver is its own answer: the n-th call has its own cache entry.
            key_params = {**request.key_params, **params, "llmbench_solver_call": calls}
            call = dataclasses.replace(
                request,
                messages=tuple(messages),
                params={**request.params, **params},
                key_params=key_params,
                stream=request.stream and calls == 1,
            )
            return await self._pacer.paced(call)

        assert item.loaded.solver is not None
        case = SolverCase(
            id=item.case.id,
            prompt=last_user_text(request.messages),
            messages=tuple(request.messages),
            vars=dict(item.case.vars),
            expected=item.case.expected,
            choices=item.case.choices,
            model=item.model.name,
        )
        run = await run_solver(item.loaded.solver, item.path.parent, case, complete)
        return solver_completion(run, request.target.model_id)

    async def _agent(
        self,
        item: EvalItem,
        request: Request,
        toolbox: Toolbox,
        targets: dict[str, CallTarget | ProviderError],
    ) -> AgentRun:
        """The agent loop: every turn is a paced, cached, budgeted call of the item's model."""
        from ..agent.loop import run_agent

        agent = item.loaded.agent
        assert agent is not None

        async def complete(messages: list[dict[str, Any]], params: dict[str, Any]) -> Completion:
            turn = dataclasses.replace(
                request,
                messages=tuple(messages),
                params={**request.params, **params},
                key_params={**request.key_params, **params},
                stream=False,  # tool calls are read whole
            )
            return await self._pacer.paced(turn)

        interpret = None
        interpreter = item.shim_interpreter
        if interpreter is not None:

            async def interpret(
                messages: list[dict[str, Any]], params: dict[str, Any]
            ) -> Completion:
                asked = self._judge_request(item, interpreter, targets, messages, params)
                return await self._judged_call(asked)

        shim = agent.tool_shim == "always" or (agent.tool_shim == "auto" and item.model.embedded)
        return await run_agent(
            complete,
            toolbox,
            request.messages,
            max_turns=agent.max_turns,
            limit_seconds=agent.limit_seconds,
            limit_tokens=agent.limit_tokens,
            shim=shim,
            tool_names=agent.tools,
            interpret=interpret,
        )

    async def _grade(
        self,
        item: EvalItem,
        completion: Completion,
        targets: dict[str, CallTarget | ProviderError],
    ) -> tuple[GradedAssertion, ...]:
        """Run the judges of every model-graded assertion of ``item`` concurrently."""
        graded = item.graded_assertions
        if not graded:
            return ()
        import asyncio

        from ..judging.panel import grade, grade_embedding, judge_request
        from ..scoring.judged import EmbeddingSpec

        async def complete(
            judge: ModelProfile, messages: list[dict[str, str]], params: dict[str, Any]
        ) -> Completion:
            request = self._judge_request(item, judge, targets, messages, params)
            return await self._judged_call(request)

        jobs = []
        for entry in graded:
            if isinstance(entry.spec, EmbeddingSpec):
                (embedder,) = entry.judges
                reference = entry.assertion.value or item.case.expected or ""
                texts = [completion.text, str(reference)]
                pair = [{"role": "user", "content": text} for text in texts]
                embedding = self._judged_call(
                    self._judge_request(item, embedder, targets, pair, {}, embed=True)
                )
                jobs.append(grade_embedding(entry.index, entry.assertion, embedding, embedder))
                continue
            try:
                request = judge_request(
                    entry.assertion,
                    entry.spec,
                    messages=item.case.messages,
                    answer=completion.text,
                    expected=item.case.expected,
                    task=item.case.task,
                    extra_dimensions=(*self._run.judge_metrics, *item.case.judge_metrics),
                )
            except ValueError as exc:  # nothing to judge against (factuality, no expected)
                jobs.append(_ungradable(entry.index, entry.assertion, str(exc)))
                continue
            jobs.append(
                grade(entry.index, entry.assertion, entry.spec, request, entry.judges, complete)
            )
        return tuple(await asyncio.gather(*jobs))

    async def _judged_call(self, request: Request | ProviderError) -> Completion:
        """A judge's call; a judge that cannot be called, or the budget running out, is that
        judge's error (it is excluded), not the item's: the answer was paid for already."""
        if isinstance(request, ProviderError):
            raise request
        try:
            return await self._pacer.paced(request)
        except BudgetExceeded as exc:
            raise ProviderError(f"{request.model_name}: not called: {exc}", "budget") from None

    def _judge_request(
        self,
        item: EvalItem,
        judge: ModelProfile,
        targets: dict[str, CallTarget | ProviderError],
        messages: Sequence[dict[str, str]],
        params: dict[str, Any],
        embed: bool = False,
    ) -> Request | ProviderError:
        """A judge's (or an embedding model's) call, on that model's own lane."""
        target = targets[judge.name]
        if isinstance(target, ProviderError):
            return target
        slots: list[ProcessSlot] = []
        if self._n_workers > 1 and not judge.parallel_safe:
            slots.append(self._pacer.slot(f"model:{judge.name}"))
        chars = sum(len(message["content"]) for message in messages)
        return Request(
            target=target,
            messages=tuple(messages),
            params=params,
            key_params={**judge.params, **params, **({"embedding": True} if embed else {})},
            repeat=item.repeat,
            stream=False,  # a verdict is read whole; its TTFT means nothing
            lane=self._pacer.lane(judge, file_parallel_safe=True),
            slots=tuple(slots),
            estimate=chars // 4 + _JUDGE_ANSWER_TOKENS,
            model_name=judge.name,
            nodeid=f"{item.nodeid} (judge {judge.name})",
            embed=embed,
        )

    def cancel_pending(self) -> None:
        """Cancel the calls started for items that have not run (the engine stops them)."""
        self._forget_all_but(set())

    def close(self) -> None:
        """Cancel pending calls and close the cache."""
        self.cancel_pending()
        self._pacer.close()
        if self._optimizer is not None:
            self._optimizer.close()


async def _ungradable(index: int, assertion: Any, why: str) -> GradedAssertion:
    """A failed verdict for an assertion its judges cannot be asked about (as a local check
    without a value fails)."""
    from ..judging.panel import GradedAssertion
    from ..scoring.assertions import Verdict

    verdict = Verdict(assertion.type, False, 0.0, assertion.weight, f"cannot be judged: {why}")
    return GradedAssertion(index, verdict)
