"""Where a model call waits its turn: per-model lanes, shared locks, the cache and the budget.

:class:`CallPacer` owns this process's pacing state. Each model has a :class:`ModelLane`: at
most its share of the run's concurrency in flight (split between xdist workers), requests and
tokens per minute kept in a window, concurrency halved on HTTP 429 and recovered after. Serial
files and models also take a :class:`~pytest_llmbench.engine.ratelimit.ProcessSlot`, a lock shared by
the workers. A call answered from the response cache waits for none of these; ``--max-cost``
stops new calls once this process's share of the budget is spent. Every call's messages pass
the process's redaction here, the one door to the providers: a secret in a prompt or a tool
result never leaves.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import threading
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..models import Completion, ItemError
from .call_spans import active as active_spans
from .ratelimit import AdaptiveConcurrency, ModelLane, ProcessSlot, RateLimiter
from .sharing import Settled, SingleFlight, Takers, as_hit
from .streaming import digest

if TYPE_CHECKING:
    from ..config import RunConfig
    from ..models import BatchBackend, ModelProfile
    from .batching import Batches, BatchSettings
    from .cache import CacheEntry, ResponseCache
    from .request import Request

__all__ = ["BudgetExceeded", "CallPacer", "ModelLane", "PacerSettings", "lookahead"]

#: The rpm/tpm window, with a 5% margin: a burst stamped at once leaves this loop over a
#: second or so, and the provider counts arrivals, not our stamps.
_RATE_WINDOW_S = 60.0 * 1.05
#: How many items past the current one may have calls started, per unit of concurrency.
_LOOKAHEAD_FACTOR = 2
_MAX_LOOKAHEAD = 1024
#: The cache modes that store answers (and so share identical requests' answers).
_STORING = ("use", "refresh")


@dataclass(frozen=True)
class PacerSettings:
    """What the pacer needs of the run: its limits, the cache and where workers share locks."""

    concurrency: int  #: calls in flight per model, for the whole run
    rpm: float | None
    tpm: float | None
    max_cost: float | None  #: USD, for the whole run
    cache_mode: str  #: off, use, refresh or replay
    rescore: bool  #: replay was asked for by ``--rescore`` (named in a cache miss)
    request_timeout_s: float
    max_retries: int
    cache_dir: Path  #: the response cache's folder
    slot_dir: Path  #: the session folder the xdist workers share, for the serial locks
    connect_timeout_s: float = 10.0  #: seconds to open a connection
    cache_ttl_s: float | None = None  #: an entry older than this is stale (``--cache-ttl``)
    #: names this run in the cache entries it writes, the same in every xdist worker: an entry
    #: the run wrote is its answer to that request from then on (None: entries name no run)
    run_id: str | None = None
    #: how batchable calls go to the providers' batch APIs (``--batch``); None: all live
    batch: BatchSettings | None = None
    #: the batch journal (the run's ``batches.jsonl``); None: none is written
    batch_journal: Path | None = None
    #: a results folder whose journal is read into the ledger first (``--resume-batch``)
    resume_batch: Path | None = None

    @classmethod
    def from_run(
        cls,
        run: RunConfig,
        slot_dir: Path,
        run_id: str | None = None,
        results_dir: Path | None = None,
    ) -> PacerSettings:
        """The settings of ``run``, with the folder of the xdist workers' shared locks, the
        name the run's cache entries carry and its results folder (for the batch journal)."""
        batch = None
        if run.batch:
            from .batching import BatchSettings

            batch = BatchSettings(
                poll_s=run.batch_poll_s,
                timeout_s=run.batch_timeout_s,
                run_id=run_id,
                results_dir=None if results_dir is None else str(results_dir),
            )
        journal = None
        if run.batch and results_dir is not None:
            from ..results_folder import BATCHES_FILE

            journal = results_dir / BATCHES_FILE
        return cls(
            concurrency=run.concurrency,
            rpm=run.rpm,
            tpm=run.tpm,
            max_cost=run.max_cost,
            cache_mode=run.cache_mode,
            rescore=run.rescore,
            request_timeout_s=run.request_timeout_s,
            max_retries=run.max_retries,
            cache_dir=run.cache_dir,
            slot_dir=slot_dir,
            connect_timeout_s=run.connect_timeout_s,
            cache_ttl_s=run.cache_ttl_s,
            run_id=run_id,
            batch=batch,
            batch_journal=journal,
            resume_batch=run.resume_batch,
        )


def process_limit(
    concurrency: int, model: ModelProfile, n_workers: int, file_parallel_safe: bool = True
) -> int:
    """Calls of ``model`` one process may have in flight: its share of the run's
    ``concurrency``."""
    if not (model.parallel_safe and file_parallel_safe):
        return 1
    limit = model.concurrency or concurrency
    return max(1, math.ceil(limit / max(1, n_workers)))


#: The look-ahead under ``--batch``: every plan of the process at once (its calls gather into
#: as few batches as the providers allow, instead of one window's worth each).
BATCH_LOOKAHEAD = 1_000_000_000


def lookahead(run: RunConfig, n_workers: int) -> int:
    """How many items past the current one a process may start calls for: enough to fill every
    model's slots twice over (a profile may allow more calls in flight than --concurrency);
    under ``--batch``, all of them."""
    if run.batch:
        return BATCH_LOOKAHEAD
    return min(_MAX_LOOKAHEAD, _slots(run, n_workers) * _LOOKAHEAD_FACTOR)


def refill(run: RunConfig, n_workers: int) -> int:
    """How many calls to start at once when items run in order: as many as leave the started
    calls no fewer than the slots, so every slot stays busy while the rest wait for room (one
    wake-up of the engine per batch, not per item)."""
    return max(1, lookahead(run, n_workers) - _slots(run, n_workers))


def _slots(run: RunConfig, n_workers: int) -> int:
    """Calls this process may have in flight, over every model."""
    return sum(process_limit(run.concurrency, model, n_workers) for model in run.models)


class BudgetExceeded(Exception):
    """``--max-cost`` was reached: no new calls are started."""


#: Messages about to be sent, with every secret replaced (the same object when none is).
Redact = Callable[[Sequence[dict[str, Any]]], Sequence[dict[str, Any]]]


class CallPacer:
    """Paces, caches and budgets the model calls of this process."""

    def __init__(
        self,
        settings: PacerSettings,
        n_workers: int,
        *,
        redact: Redact | None = None,
        worker_index: int = 0,
    ) -> None:
        self._run = settings
        self._redact = redact
        self._n_workers = max(1, n_workers)
        self._worker_index = worker_index % self._n_workers
        self._lanes: dict[tuple[str, bool], ModelLane] = {}
        self._slots: dict[str, ProcessSlot] = {}
        self._cache: ResponseCache | None = None
        self._cache_lock = threading.Lock()
        self._flights = SingleFlight()
        self._takers = Takers()
        self._spent = 0.0
        budget = self._run.max_cost
        self._budget = None if budget is None else budget / self._n_workers
        self._batches: Batches | None = None

    def lane(self, model: ModelProfile, file_parallel_safe: bool) -> ModelLane:
        """The lane of ``model``: its own for calls that must run one at a time."""
        serial = not (model.parallel_safe and file_parallel_safe)
        lane = self._lanes.get((model.name, serial))
        if lane is None:
            rpm, tpm = model.rpm or self._run.rpm, model.tpm or self._run.tpm
            lane = ModelLane(
                AdaptiveConcurrency(self.limit(model, file_parallel_safe)),
                RateLimiter(self._share(rpm), self._share(tpm), window_s=_RATE_WINDOW_S),
            )
            self._lanes[(model.name, serial)] = lane
        return lane

    def activity(self) -> tuple[int, int]:
        """Calls of this process in flight now, and how many of them wait on a rate limit."""
        lanes = list(self._lanes.values())  # the engine loop may add one meanwhile
        waiting = sum(lane.limiter.waiting for lane in lanes)
        in_flight = sum(lane.concurrency.in_flight for lane in lanes)
        return max(0, in_flight - waiting), waiting

    def limit(self, model: ModelProfile, file_parallel_safe: bool) -> int:
        """Calls of ``model`` this process may have in flight: its share of the run's."""
        return process_limit(self._run.concurrency, model, self._n_workers, file_parallel_safe)

    def _share(self, per_run: float | None) -> float | None:
        return worker_share(per_run, self._n_workers, self._worker_index)

    def slot(self, name: str) -> ProcessSlot:
        """The lock named ``name``, shared by the xdist workers of this run."""
        slot = self._slots.get(name)
        if slot is None:
            folder = self._run.slot_dir  # shared with workers, removed at end
            folder.mkdir(parents=True, exist_ok=True)
            slot = self._slots[name] = ProcessSlot(folder / f"serial-{digest(name):016x}.lock")
        return slot

    async def paced(self, request: Request) -> Completion:
        """One model call: from the cache, or paced by the model's lane, budgeted and cached.

        A request identical to one in flight (the same cache key, the cache used or
        refreshed) waits for that one and takes its answer as a cache hit, instead of calling
        again: both continue from the one answer the cache keeps. When the run exports a
        trace, the call is timed as a call span (:mod:`.model_spans`).
        """
        request = self._redacted(request)  # once: the span (with content) shows it as sent
        spans = active_spans()
        if spans is None:
            return await self._paced(request)
        from .model_spans import traced

        return await traced(spans, request, self._paced, self._shown)

    async def _paced(self, request: Request) -> Completion:
        """``paced``'s work for a ``request`` already redacted."""
        key, answer = (request.missed_key, None) if request.missed_key else self._lookup(request)
        # A hit never calls: a fully cached run never imports a client (litellm: seconds).
        if key is None or self._run.cache_mode not in _STORING:
            return answer if answer is not None else await self._call(request)
        if answer is None:
            answer = await self._flights.once(key, lambda: self._called_and_stored(request, key))
        if self._run.cache_mode == "refresh":
            self._takers.took(key, request.nodeid)
        return answer

    async def _called_and_stored(self, request: Request, key: str) -> Settled:
        """``request`` called and its answer stored under ``key``, unless the cache keeps an
        answer another item of this run stored meanwhile: then that one, as a hit."""
        completion = await self._call(request, key)
        answer = self._redacted_answer(completion)
        if completion.batched:  # the batch path stored it already, before any item read it
            return Settled(returned=completion, held=answer)
        held = self._response_cache().put(
            key,
            answer,
            model=request.target.model_id,
            run=self._run.run_id,
            keep=lambda entry: self._kept(key, entry, request.nodeid),
        )
        if held is answer:
            return Settled(returned=completion, held=held)
        return Settled(returned=as_hit(held), held=held)

    async def _call(self, request: Request, key: str | None = None) -> Completion:
        """``request`` sent to its model: paced by its lane and slots, within the budget; under
        ``--batch``, a batchable request whose model has a batch API goes in a batch instead
        (no lane, no rate limit: it is not a live request)."""
        from ..models import acomplete, aembed, route

        if request.batchable and self._run.batch is not None:
            batches = self._batch_path()
            kind = "embed" if request.embed else "chat"
            backend = batches.backend(request.target, kind, request.params)
            if backend is not None:
                return await self._batched(batches, backend, request, key, kind)

        if route(request.target).client == "litellm":
            from ..models import warmed_up

            # Import before a rate-limit stamp is taken: the first import blocks this loop for
            # seconds, and a stamp taken before it would let the window run ahead of the
            # server's.
            warmed_up()
        lane = request.lane
        async with lane.concurrency, _holding(request.slots):
            self._check_budget()
            # The request counts in the rpm window until its answer is back (it reaches the
            # provider somewhere in between), then is stamped at that time.
            async with lane.limiter.holding(request.estimate) as held:
                retrying: dict[str, Any] = {
                    "timeout_s": self._run.request_timeout_s,
                    "connect_timeout_s": self._run.connect_timeout_s,
                    "max_retries": self._run.max_retries,
                    "on_retry": lane.on_retry,
                    # A retry is a request like any other: it waits its turn in the rpm window.
                    "before_retry": held.next_attempt,
                }
                if request.embed:
                    texts = [message["content"] for message in request.messages]
                    completion = await aembed(request.target, texts, **retrying)
                elif request.loglikelihood:
                    from ..models import aloglikelihood

                    context, continuation = (message["content"] for message in request.messages)
                    completion = await aloglikelihood(
                        request.target, context, continuation, **retrying
                    )
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
        if not held.waited:
            return completion
        wait = completion.rate_limit_wait_s + held.waited
        return dataclasses.replace(completion, rate_limit_wait_s=wait)

    async def _batched(
        self, batches: Batches, backend: BatchBackend, request: Request, key: str | None, kind: str
    ) -> Completion:
        """``request``'s answer from a batch of ``kind``: its custom_id is its cache key
        (computed here when the cache is off), its estimated cost checked against the budget
        first."""
        from ..models import BatchLine

        self._check_budget()
        custom_id = key or self._key(request)
        line = BatchLine(custom_id, request.target, request.messages, request.params, kind)
        completion = await batches.submit(backend, line, self._batch_estimate(request))
        self._spent += completion.cost_usd or 0.0
        return completion

    def _batch_estimate(self, request: Request) -> float:
        """USD a batched call of ``request`` is expected to cost (0 when its price is not
        known): its estimated tokens, the answer's budget as output, at the batch price."""
        if self._budget is None:
            return 0.0
        from ..models import cost_usd
        from .plan import DEFAULT_OUTPUT_TOKENS

        output = min(DEFAULT_OUTPUT_TOKENS, request.estimate)
        cost = cost_usd(request.target, request.estimate - output, output, batched=True)
        return cost or 0.0

    def _batch_path(self) -> Batches:
        """The process's batch path (made on first use, on the engine's loop)."""
        if self._batches is None:
            from .batch_ledger import BatchJournal, BatchLedger, ledger_path, load_journal
            from .batching import Batches

            settings = self._run.batch
            assert settings is not None
            ledger = BatchLedger(ledger_path(self._run.cache_dir))
            resume = self._run.resume_batch
            if resume is not None:
                from ..results_folder import BATCHES_FILE

                load_journal(resume / BATCHES_FILE, ledger)
            journal = self._run.batch_journal
            self._batches = Batches(
                settings,
                ledger,
                None if journal is None else BatchJournal(journal),
                self._store_batched,
                budget_left=self._budget_left,
                over_budget=self._over_budget,
            )
        return self._batches

    def _over_budget(self) -> BudgetExceeded:
        limit = self._run.max_cost
        return BudgetExceeded(f"--max-cost {limit:g} USD reached; no new model calls are started")

    def _budget_left(self) -> float | None:
        return None if self._budget is None else max(0.0, self._budget - self._spent)

    def _store_batched(self, key: str, completion: Completion) -> None:
        """A batch's answer written to the response cache as soon as it is read, under every
        cache mode (``off`` too): a rerun or resume then pays nothing. An answer this run
        already stored under the key is kept."""
        run_id = self._run.run_id
        self._response_cache().put(
            key,
            self._redacted_answer(completion),
            model=completion.model_id,
            run=run_id,
            keep=lambda entry: entry.run is not None and entry.run == run_id,
        )

    def _key(self, request: Request) -> str:
        """``request``'s response-cache key."""
        from .cache import cache_key

        target = request.target
        return cache_key(
            target.model_id,
            request.messages,
            request.key_params,
            request.repeat,
            api_base=target.cache_base,
        )

    def _redacted_answer(self, completion: Completion) -> Completion:
        """``completion`` as the cache may keep it: a secret the model echoed is replaced (the
        cache is a file on disk, often committed for ``--cache=replay``)."""
        if self._redact is None:
            return completion
        said = {"role": "assistant", "content": completion.text}
        calls = [dict(call) for call in completion.tool_calls]
        answer = [{**said, "tool_calls": calls, "reasoning": completion.reasoning}]
        (shown,) = self._redact(answer)
        if shown is answer[0]:
            return completion
        return dataclasses.replace(
            completion,
            text=shown["content"],
            tool_calls=tuple(shown.get("tool_calls") or ()),
            reasoning=shown["reasoning"],
        )

    def _shown(self, completion: Completion) -> str:
        """The reply's text as a span may carry it (``--otel-content``): redacted."""
        return self._redacted_answer(completion).text

    def _redacted(self, request: Request) -> Request:
        if self._redact is None:
            return request
        messages = self._redact(request.messages)
        if messages is request.messages:
            return request
        return dataclasses.replace(request, messages=messages)

    def cached(self, request: Request) -> Completion | Request:
        """``request``'s answer from the response cache, read on the calling thread; else the
        request to pass to :meth:`paced`, carrying the key that missed so that it is not looked
        up twice (the cache off, or a replay that misses: the request as it is, and
        :meth:`paced` says so)."""
        if self._run.cache_mode not in ("use", "replay"):
            return request
        try:
            key, hit = self._lookup(self._redacted(request))
        except ItemError:
            return request  # a replay that misses: the engine's call raises it, as ever
        if hit is not None:
            spans = active_spans()
            if spans is not None:
                from .model_spans import note_cached

                note_cached(spans, request, hit, self._shown)
            return hit
        return dataclasses.replace(request, missed_key=key) if key else request

    def _lookup(self, request: Request) -> tuple[str | None, Completion | None]:
        mode = self._run.cache_mode
        if mode == "off":
            return None, None
        key = self._key(request)
        entry = self._response_cache().entry(key)
        if entry is not None and self._kept(key, entry, request.nodeid):
            return key, as_hit(entry.completion)
        if mode == "replay":
            stale = None if entry is None else self._stale(entry)
            flag = "--rescore" if self._run.rescore else "--cache=replay"
            found = f"the cached answer for {request.nodeid} {stale}"
            if stale is None:
                found = f"no cached answer for {request.nodeid}"
            message = f"{found} ({flag} makes no calls)"
            raise ItemError(f"{request.model_name}: {message}", "cache_miss")
        return key, None  # a miss, or stale: called again and stored anew

    def _kept(self, key: str, entry: CacheEntry, asker: str) -> bool:
        """Whether item ``asker`` answers from ``entry``, stored under ``key``: one this run
        wrote (every item of a run continues from the same answer, whatever its age), except
        for a rerun under refresh that alone took it (it samples anew); or, unless refreshing,
        one still fresh."""
        refresh = self._run.cache_mode == "refresh"
        if entry.run is not None and entry.run == self._run.run_id:
            return not (refresh and self._takers.asks_again(key, asker))
        return not refresh and self._stale(entry) is None

    def _stale(self, entry: CacheEntry) -> str | None:
        """How ``entry`` is past ``--cache-ttl`` (its age and the TTL), or None when fresh."""
        ttl = self._run.cache_ttl_s
        if ttl is None:
            return None
        from .cache import format_age

        if entry.created_at is None:
            return f"has no write time, so --cache-ttl {format_age(ttl)} counts it stale"
        age = time.time() - entry.created_at
        if age <= ttl:
            return None
        return f"is {format_age(age)} old, older than --cache-ttl {format_age(ttl)}"

    def _response_cache(self) -> ResponseCache:
        with self._cache_lock:  # read on the main thread (:meth:`cached`) and the engine's
            if self._cache is None:
                from .cache import ResponseCache, cache_path

                self._cache = ResponseCache(cache_path(self._run.cache_dir))
            return self._cache

    def _check_budget(self) -> None:
        if self._budget is not None and self._spent >= self._budget:
            raise self._over_budget()

    def close(self) -> None:
        """Close the response cache (and the batch ledger)."""
        if self._cache is not None:
            self._cache.close()
        if self._batches is not None:
            self._batches.close()


def _holding(slots: Sequence[ProcessSlot]) -> contextlib.AbstractAsyncContextManager[Any]:
    """Every slot of ``slots`` held (nothing to hold, most often: no exit stack then)."""
    return _held(slots) if slots else contextlib.nullcontext()


@contextlib.asynccontextmanager
async def _held(slots: Sequence[ProcessSlot]) -> AsyncIterator[None]:
    async with contextlib.AsyncExitStack() as stack:
        for slot in slots:
            await stack.enter_async_context(slot)
        yield


def worker_share(per_run: float | None, n_workers: int, index: int) -> float | None:
    """Worker ``index``'s share of a run-wide rate (requests or tokens per minute).

    A window counts whole requests, so an even split that leaves each worker a fraction (3 rpm
    over 2 workers: 1.5 each, 1 admitted) would waste the rest: the whole part is dealt out
    instead, one more to the first workers (2 and 1), so the run uses all of it and never more.
    A rate below one per worker stays a fraction (one start per longer window): a share of 0
    would stop that worker for good.
    """
    if per_run is None or n_workers <= 1:
        return per_run
    whole = math.floor(per_run)
    if whole < n_workers:
        return per_run / n_workers
    base, extra = divmod(whole, n_workers)
    return float(base + (1 if index < extra else 0))
