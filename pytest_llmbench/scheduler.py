"""Run the model calls of upcoming eval items ahead of pytest, bounded per model.

pytest runs and reports items one at a time, in order. Model calls are slow and I/O-bound, so
before each item runs, :class:`Prefetcher` hands the next items of this process to the
:class:`CallScheduler`, which starts their calls on the engine loop: at most ``concurrency``
calls per model in flight (split between xdist workers), paced by requests and tokens per
minute, halved on HTTP 429 and recovered after. An item's setup then only waits for its own
call. Items are still set up, scored and reported by pytest in order; ``-x``, ``--maxfail``
and Ctrl-C cancel whatever is pending when the session finishes. Items of ``parallel_safe:
false`` files wait for their turn, as do the calls of such models; under xdist those take a
lock shared by the workers, since a limit of one call cannot be split between them.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
import hashlib
import heapq
import math
import sys
import time
from collections.abc import AsyncIterator, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeGuard

import pytest

from .providers.completion import Completion, ProviderError
from .ratelimit import AdaptiveConcurrency, ProcessSlot, RateLimiter

if TYPE_CHECKING:
    from .agent.loop import AgentRun
    from .agent.sandbox import Sandbox
    from .agent.tools import Toolbox
    from .cache import ResponseCache
    from .collect import EvalItem
    from .judging.panel import GradedAssertion
    from .optimize import PromptOptimizer, Rewrite
    from .profiles import ModelProfile
    from .providers.completion import CallTarget
    from .runtime import Runtime

#: Share of calls streamed under ``--stream=sample`` (besides one per model), in percent.
STREAM_SAMPLE_PERCENT = 2
#: Items per model always streamed under ``--stream=sample`` (all of them when fewer).
STREAM_SAMPLE_MIN = 20
#: How many items past the current one may have calls started, per unit of concurrency.
_LOOKAHEAD_FACTOR = 2
_MAX_LOOKAHEAD = 1024
#: The rpm/tpm window, with a 5% margin: a burst stamped at once leaves this loop over a
#: second or so, and the provider counts arrivals, not our stamps.
_RATE_WINDOW_S = 60.0 * 1.05
#: Put first on an agent command's PATH: this Python (with pytest) as ``python``/``python3``.
_PYTHON_BIN = (Path(sys.executable).parent,)
#: Answer tokens assumed for a judge's verdict when pacing tokens per minute.
_JUDGE_ANSWER_TOKENS = 256
#: 429s closer together than this are one burst: concurrency is halved once for them.
_BACKOFF_SPACING_S = 1.0


class BudgetExceeded(Exception):
    """``--max-cost`` was reached: no new calls are started."""


@dataclass(frozen=True)
class Answer:
    """What an item's setup gets: the model's completion and its model-graded verdicts."""

    completion: Completion
    graded: tuple[GradedAssertion, ...] = ()
    agent: AgentRun | None = None  #: an agent item's loop
    sandbox: Sandbox | None = None  #: the agent's sandbox, reused by its ``command`` checks
    #: an optimized variant's rewrite: ``{"status", "reason"}``
    optimization: dict[str, Any] | None = None
    #: the messages sent, when they are not the case's own (a rewritten prompt, images)
    messages: tuple[dict[str, Any], ...] | None = None


@dataclass(frozen=True)
class _Request:
    """One model call as the scheduler paces it (the evaluated model's or a judge's)."""

    target: CallTarget
    messages: Sequence[dict[str, Any]]
    params: dict[str, Any]  #: sent on top of the profile's own
    key_params: dict[str, Any]  #: every parameter that shapes the answer, for the cache key
    repeat: int
    stream: bool
    lane: ModelLane
    slots: tuple[ProcessSlot, ...]
    estimate: int  #: tokens, for tokens-per-minute pacing before the real count is known
    model_name: str
    nodeid: str  #: who asked, for a replay miss
    embed: bool = False  #: embed the messages' texts instead of completing them


@dataclass
class ModelLane:
    """The pacing state of one model in this process."""

    concurrency: AdaptiveConcurrency
    limiter: RateLimiter
    last_backoff: float = -math.inf

    def on_retry(self, status: int | None) -> None:
        """A 429 halves how many calls may be in flight, once per burst (a second apart)."""
        now = time.monotonic()
        if status == 429 and now - self.last_backoff >= _BACKOFF_SPACING_S:
            self.last_backoff = now
            self.concurrency.on_rate_limited()


def _digest(text: str) -> int:
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big")


@dataclass
class StreamSample:
    """Which items stream under ``--stream=sample``: deterministic, the same on every worker."""

    always: set[str] = field(default_factory=set)

    @classmethod
    def for_items(cls, items: Iterable[pytest.Item]) -> StreamSample:
        """Always stream each model's ``STREAM_SAMPLE_MIN`` items of lowest hash, so every model
        gets TTFT percentiles from a real sample however few items it has."""
        by_model: dict[str, list[tuple[int, str]]] = {}
        for item in items:
            model = getattr(item, "model", None)
            if model is not None:
                by_model.setdefault(model.name, []).append((_digest(item.nodeid), item.nodeid))
        chosen: set[str] = set()
        for candidates in by_model.values():
            chosen.update(nodeid for _, nodeid in heapq.nsmallest(STREAM_SAMPLE_MIN, candidates))
        return cls(chosen)

    def streams(self, nodeid: str) -> bool:
        """Whether the item ``nodeid`` is in the sample."""
        return nodeid in self.always or _digest(nodeid) % 100 < STREAM_SAMPLE_PERCENT


class CallScheduler:
    """Starts, paces, caches and budgets the model calls of eval items in this process."""

    def __init__(self, runtime: Runtime, n_workers: int) -> None:
        self._runtime = runtime
        self._run = runtime.run
        self._n_workers = max(1, n_workers)
        self._futures: dict[str, concurrent.futures.Future[Answer]] = {}
        self._lanes: dict[tuple[str, bool], ModelLane] = {}
        self._slots: dict[str, ProcessSlot] = {}
        self._prefetchable: dict[str, bool] = {}
        self._sample = StreamSample()
        self._cache: ResponseCache | None = None
        self._optimizer: PromptOptimizer | None = None
        self._spent = 0.0
        budget = self._run.max_cost
        self._budget = None if budget is None else budget / self._n_workers
        # Enough upcoming items to fill every model's slots twice over (a profile may allow more
        # calls in flight than --concurrency).
        slots = sum(self._limit(model, file_parallel_safe=True) for model in self._run.models)
        self.lookahead = min(_MAX_LOOKAHEAD, slots * _LOOKAHEAD_FACTOR)

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
        """``_prefetchable``, remembered: markers do not change once collected."""
        known = self._prefetchable.get(item.nodeid)
        if known is None:
            known = self._prefetchable[item.nodeid] = _prefetchable(item)
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
        # without blocking the engine loop, and a missing key is the item's setup error.
        request = _Request(
            target=self._runtime.target(item.model),
            messages=_with_images(item, item.case.messages),
            params=item.call_params,
            key_params=item.params,
            repeat=item.repeat,
            stream=self._streams(item.nodeid),
            lane=self._lane(item.model, item.loaded.parallel_safe),
            slots=tuple(self._process_slots(item)),
            estimate=_estimate_tokens(item),
            model_name=item.model.name,
            nodeid=item.nodeid,
        )
        judges = {judge.name: self._judge_target(judge) for judge in item.judge_profiles}
        toolbox = self._toolbox(item) if item.loaded.agent is not None else None
        return self._call(item, request, judges, toolbox)

    def _toolbox(self, item: EvalItem) -> Toolbox:
        """The agent item's tools on its workdir (made in setup); a sandbox that is required
        but unavailable fails here, as the item's setup error."""
        from .agent.sandbox import Sandbox, SandboxLimits, SandboxUnavailable
        from .agent.tools import Toolbox

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

    def _lane(self, model: ModelProfile, file_parallel_safe: bool) -> ModelLane:
        serial = not (model.parallel_safe and file_parallel_safe)
        lane = self._lanes.get((model.name, serial))
        if lane is None:
            rpm, tpm = model.rpm or self._run.rpm, model.tpm or self._run.tpm
            lane = ModelLane(
                AdaptiveConcurrency(self._limit(model, file_parallel_safe)),
                RateLimiter(self._share(rpm), self._share(tpm), window_s=_RATE_WINDOW_S),
            )
            self._lanes[(model.name, serial)] = lane
        return lane

    def _limit(self, model: ModelProfile, file_parallel_safe: bool) -> int:
        """Calls of ``model`` this process may have in flight: its share of the run's."""
        if not (model.parallel_safe and file_parallel_safe):
            return 1
        limit = model.concurrency or self._run.concurrency
        return max(1, math.ceil(limit / self._n_workers))

    def _share(self, per_run: float | None) -> float | None:
        return None if per_run is None else per_run / self._n_workers

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
        return [self._slot(name) for name in names]

    def _slot(self, name: str) -> ProcessSlot:
        slot = self._slots.get(name)
        if slot is None:
            from .runtime import session_state

            folder = session_state(self._runtime.config)[0]  # shared with workers, removed at end
            folder.mkdir(parents=True, exist_ok=True)
            slot = self._slots[name] = ProcessSlot(folder / f"serial-{_digest(name):016x}.lock")
        return slot

    # -- engine loop --------------------------------------------------------------------------
    async def _call(
        self,
        item: EvalItem,
        request: _Request,
        judge_targets: dict[str, CallTarget | ProviderError],
        toolbox: Toolbox | None = None,
    ) -> Answer:
        """The item's answer (an agent's whole loop), then its model-graded verdicts."""
        run: AgentRun | None = None
        optimization: dict[str, Any] | None = None
        if item.variant.optimized:
            rewrite = await self._rewrite(item, judge_targets)
            optimization = rewrite.to_record()
            request = dataclasses.replace(request, messages=_optimized_messages(item, rewrite))
        if toolbox is not None:
            run = await self._agent(item, request, toolbox, judge_targets)
            completion = _agent_completion(run, request.target.model_id)
        elif item.loaded.solver is not None:
            completion = await self._solve(item, request)
        else:
            completion = await self._paced(request)
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
            from .optimize import PromptOptimizer, store_path

            assert self._run.optimizer is not None
            store = store_path(self._runtime.config)
            store.parent.mkdir(parents=True, exist_ok=True)
            timeout = 3 * self._run.request_timeout_s  # a claim older than that was abandoned
            self._optimizer = PromptOptimizer(store, self._run.optimizer, claim_timeout_s=timeout)
        return self._optimizer

    async def _solve(self, item: EvalItem, request: _Request) -> Completion:
        """The file's ``solver`` answers the case, its model calls paced like the item's."""
        from .solver import SolverCase, run_solver, solver_completion
        from .spec import last_user_text

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
            return await self._paced(call)

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
        request: _Request,
        toolbox: Toolbox,
        targets: dict[str, CallTarget | ProviderError],
    ) -> AgentRun:
        """The agent loop: every turn is a paced, cached, budgeted call of the item's model."""
        from .agent.loop import run_agent

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
            return await self._paced(turn)

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

    async def _paced(self, request: _Request) -> Completion:
        """One model call: from the cache, or paced by the model's lane, budgeted and cached."""
        from .providers.litellm_adapter import acomplete, aembed, import_litellm

        key, hit = self._cached(request)
        if hit is not None:
            return hit  # a fully cached run never imports litellm (seconds of start-up)
        # Import before a rate-limit stamp is taken: the first import blocks this loop for
        # seconds, and a stamp taken before it would let the window run ahead of the server's.
        import_litellm()
        lane = request.lane
        async with lane.concurrency, _holding(request.slots):
            self._check_budget()
            waited = await lane.limiter.acquire(request.estimate)
            retrying: dict[str, Any] = {
                "timeout_s": self._run.request_timeout_s,
                "max_retries": self._run.max_retries,
                "on_retry": lane.on_retry,
                # A retry is a request like any other: it waits its turn in the rpm window.
                "before_retry": lane.limiter.acquire,
            }
            if request.embed:
                texts = [message["content"] for message in request.messages]
                completion = await aembed(request.target, texts, **retrying)
            else:
                completion = await acomplete(
                    request.target,
                    request.messages,
                    request.params,
                    stream=request.stream,
                    **retrying,
                )
            lane.concurrency.on_success()
        used = (completion.input_tokens or 0) + (completion.output_tokens or 0)
        lane.limiter.record_tokens(max(0, used - request.estimate))  # counted already
        self._spent += completion.cost_usd or 0.0
        if key is not None and self._run.cache_mode in ("use", "refresh"):
            self._response_cache().put(key, completion)
        wait = completion.rate_limit_wait_s + waited
        return dataclasses.replace(completion, rate_limit_wait_s=wait)

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

        from .judging.panel import grade, grade_embedding, judge_request
        from .judging.spec import EmbeddingSpec

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

    async def _judged_call(self, request: _Request | ProviderError) -> Completion:
        """A judge's call; a judge that cannot be called, or the budget running out, is that
        judge's error (it is excluded), not the item's: the answer was paid for already."""
        if isinstance(request, ProviderError):
            raise request
        try:
            return await self._paced(request)
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
    ) -> _Request | ProviderError:
        """A judge's (or an embedding model's) call, on that model's own lane."""
        target = targets[judge.name]
        if isinstance(target, ProviderError):
            return target
        slots: list[ProcessSlot] = []
        if self._n_workers > 1 and not judge.parallel_safe:
            slots.append(self._slot(f"model:{judge.name}"))
        chars = sum(len(message["content"]) for message in messages)
        return _Request(
            target=target,
            messages=tuple(messages),
            params=params,
            key_params={**judge.params, **params, **({"embedding": True} if embed else {})},
            repeat=item.repeat,
            stream=False,  # a verdict is read whole; its TTFT means nothing
            lane=self._lane(judge, file_parallel_safe=True),
            slots=tuple(slots),
            estimate=chars // 4 + _JUDGE_ANSWER_TOKENS,
            model_name=judge.name,
            nodeid=f"{item.nodeid} (judge {judge.name})",
            embed=embed,
        )

    def _cached(self, request: _Request) -> tuple[str | None, Completion | None]:
        mode = self._run.cache_mode
        if mode == "off":
            return None, None
        from .cache import cache_key

        target = request.target
        key = cache_key(
            target.model_id,
            request.messages,
            request.key_params,
            request.repeat,
            api_base=target.api_base,
        )
        if mode == "refresh":
            return key, None
        hit = self._response_cache().get(key)
        if hit is not None:
            return key, dataclasses.replace(hit, cached=True, retries=0, rate_limit_wait_s=0.0)
        if mode == "replay":
            flag = "--rescore" if self._run.rescore else "--cache=replay"
            message = f"no cached answer for {request.nodeid} ({flag} makes no calls)"
            raise ProviderError(f"{request.model_name}: {message}", "cache_miss")
        return key, None

    def _response_cache(self) -> ResponseCache:
        if self._cache is None:
            from .cache import ResponseCache

            folder = self._run.cache_dir or self._runtime.config.rootpath / ".llmbench-cache"
            self._cache = ResponseCache(folder / "responses.sqlite")
        return self._cache

    def _check_budget(self) -> None:
        if self._budget is not None and self._spent >= self._budget:
            limit = self._run.max_cost
            raise BudgetExceeded(
                f"--max-cost {limit:g} USD reached; no new model calls are started"
            )

    def cancel_pending(self) -> None:
        """Cancel the calls started for items that have not run (the engine stops them)."""
        self._forget_all_but(set())

    def close(self) -> None:
        """Cancel pending calls and close the cache."""
        self.cancel_pending()
        if self._cache is not None:
            self._cache.close()
        if self._optimizer is not None:
            self._optimizer.close()


def _with_images(item: EvalItem, messages: Sequence[dict[str, Any]]) -> Sequence[dict[str, Any]]:
    """``messages`` with the case's images on the last user message (read on this thread).

    A model known not to take images is this item's error; no call is made.
    """
    if not item.case.images:
        return messages
    from .vision import ImageError, attach_images, unsupported_message, vision_support

    if vision_support(item.model) is False:
        raise ProviderError(unsupported_message(item.model), "unsupported")
    try:
        return attach_images(messages, item.case.images)
    except ImageError as exc:  # the file went away since collection
        raise ProviderError(f"{item.model.name}: {exc}", "config") from None


def _optimized_messages(item: EvalItem, rewrite: Rewrite) -> tuple[dict[str, Any], ...]:
    """The rewritten template rendered with the case's vars (the original when it cannot be)."""
    try:
        messages = item.case.render(rewrite.messages)
    except ValueError:
        messages = item.case.messages
    return tuple(_with_images(item, messages))


def _agent_completion(run: AgentRun, model_id: str) -> Completion:
    """An agent loop as one completion: its final answer, with usage summed over the turns."""
    return Completion(
        text=run.answer,
        model_id=model_id,
        input_tokens=run.input_tokens,
        output_tokens=run.output_tokens,
        tokens_estimated=False,
        ttft_s=None,
        latency_s=run.latency_s,
        cost_usd=run.cost_usd,
        retries=run.retries,
        streamed=False,
        finish_reason=run.stopped,
        cached=run.cached,
    )


async def _ungradable(index: int, assertion: Any, why: str) -> GradedAssertion:
    """A failed verdict for an assertion its judges cannot be asked about (as a local check
    without a value fails)."""
    from .assertions import Verdict
    from .judging.panel import GradedAssertion

    verdict = Verdict(assertion.type, False, 0.0, assertion.weight, f"cannot be judged: {why}")
    return GradedAssertion(index, verdict)


@contextlib.asynccontextmanager
async def _holding(slots: Sequence[ProcessSlot]) -> AsyncIterator[None]:
    async with contextlib.AsyncExitStack() as stack:
        for slot in slots:
            await stack.enter_async_context(slot)
        yield


def _prefetchable(item: pytest.Item) -> TypeGuard[EvalItem]:
    """An eval item whose call may start before it runs: not serial, not about to be skipped."""
    from .collect import EvalItem

    if not isinstance(item, EvalItem) or not item.prefetchable:
        return False
    if item.get_closest_marker("skip") is not None:
        return False
    return not any(_may_skip(mark) for mark in item.iter_markers("skipif"))


def _may_skip(mark: pytest.Mark) -> bool:
    """Whether a ``skipif`` mark may skip: a false condition does not, a string may."""
    conditions = mark.args or ((mark.kwargs["condition"],) if "condition" in mark.kwargs else ())
    return not conditions or any(isinstance(c, str) or bool(c) for c in conditions)


def _estimate_tokens(item: EvalItem) -> int:
    """Tokens a call will use, for tokens-per-minute pacing before the real count is known."""
    from .estimate import answer_token_budget
    from .spec import message_text

    prompt_chars = sum(len(message_text(message)) for message in item.case.messages)
    return prompt_chars // 4 + answer_token_budget(item)


class Prefetcher:
    """Before each item runs, start the calls of the items this process will run next."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self._positions: dict[str, int] = {}
        self._items: list[pytest.Item] = []
        self._active = False
        self._interactor: Any = _UNKNOWN

    @pytest.hookimpl(trylast=True)
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        """Remember this process's items, in run order."""
        self._items = list(session.items)
        self._positions = {item.nodeid: index for index, item in enumerate(self._items)}
        self._active = any(hasattr(item, "prefetchable") for item in self._items)
        from .runtime import ITEMS_KEY

        self.config.stash[ITEMS_KEY] = self._items

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: pytest.Item | None) -> None:
        """Top up the calls in flight with this and the upcoming items."""
        if not self._active:
            return
        from .runtime import get_runtime

        scheduler = get_runtime(self.config).scheduler()
        scheduler.prefetch(self._upcoming(item, scheduler.lookahead))

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        """After ``-x``, ``--maxfail`` or Ctrl-C, stop the calls of items that will not run now,
        before the reports at session end, not at unconfigure."""
        from .runtime import RUNTIME_KEY

        runtime = self.config.stash.get(RUNTIME_KEY, None)
        if self._active and runtime is not None:
            runtime.scheduler().cancel_pending()

    def _upcoming(self, item: pytest.Item, count: int) -> list[pytest.Item]:
        if self._interactor is _UNKNOWN:
            self._interactor = _xdist_interactor(self.config)
        queued = _xdist_queue(self._interactor)
        if queued is not None:
            return [item] + [self._items[i] for i in queued[:count] if 0 <= i < len(self._items)]
        start = self._positions.get(item.nodeid, 0)
        return self._items[start : start + count + 1]


_UNKNOWN = object()


def _xdist_interactor(config: pytest.Config) -> Any:
    """The xdist worker's interactor plugin (it holds the queue of items to run), or None."""
    if not hasattr(config, "workerinput"):
        return None
    for plugin in config.pluginmanager.get_plugins():
        torun = getattr(plugin, "torun", None)
        if torun is not None and hasattr(torun, "lock"):
            return plugin
    return None


def _xdist_queue(interactor: Any) -> list[int] | None:
    """Indices of the items an xdist worker will run next, or None outside a worker."""
    if interactor is None:
        return None
    upcoming = [getattr(interactor, "nextitem_index", None)]
    with interactor.torun.lock() as queue:
        upcoming.extend(queue)
    return [index for index in upcoming if isinstance(index, int)]
