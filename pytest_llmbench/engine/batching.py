"""Calls sent through a provider's batch API (``--batch``): gathered, claimed, sent, polled,
and answered from the batch's results, each paid for once.

:class:`Batches` is the process's batch path, owned by the pacer, and run on the engine's
loop. A batchable call (:attr:`~.request.Request.batchable`) whose target has a batch route
(:func:`batch_backend`) is :meth:`~Batches.submit`-ted with its response-cache key, which is its
``custom_id``. Calls gather in a :class:`BatchQueue` per (backend, model, kind), which sends
them once no call has joined for ``send_delay_s`` (the prefetcher hands every plan at once
under ``--batch``), or at once when a batch is full (the backend's ``max_lines`` or 95% of its
``max_bytes``: the rest start the next batch).

Before a batch is created, its estimated cost must fit in what is left of ``--max-cost`` (the
calls that do not fit fail with :class:`~.pacing.BudgetExceeded`, as live calls do), and its
keys are claimed in the ledger (:mod:`.batch_ledger`): a key that a batch already holds (this
run's, another worker's, a killed run's) is never sent again; the call waits on that batch.
The journal gets ``creating`` before the create call and ``created`` after it.

Each batch is polled with back-off: every ``poll_s`` at first, 1.5 times longer after each
poll that shows no progress, at most 300 s, with ±20% jitter, back to ``poll_s`` on progress.
A poll that fails (an HTTP error, a dropped connection) is tried again at the next tick; ten in
a row fail the batch's calls with a :class:`~..models.BatchError` naming the cause. When the
batch ends, its results are read and every answer is written to the response cache at once
(before any item reads it), its ledger lines marked done, and only then are the calls
answered; a call without an answer gets its ``BatchError``. Past ``timeout_s`` the calls still
waiting fail with a ``BatchError`` saying how far the batch got; the batch is not cancelled,
and a rerun with ``--resume-batch`` (or ``--retry-errors``) collects it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import random
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..models import BatchError, Completion
from .batch_ledger import DONE, PENDING, BatchJournal, BatchLedger, LedgerError

if TYPE_CHECKING:
    from ..models import BatchBackend, BatchLine, BatchState, CallTarget

__all__ = ["BatchQueue", "BatchSettings", "Batches", "batch_backend"]

#: The longest wait between two polls of a batch, seconds.
POLL_CAP_S = 300.0
#: How long polls must have failed (and at least ``max_poll_failures`` of them) before a
#: batch's calls fail: an outage of the provider's API outlives a few polls.
MIN_FAILING_S = 900.0
#: The back-off factor of a poll that showed no progress.
POLL_FACTOR = 1.5
#: Jitter of each wait: ±20%.
POLL_JITTER = 0.2
#: Polls that may fail in a row before the batch's calls fail.
MAX_POLL_FAILURES = 10
#: Share of a backend's ``max_bytes`` a batch fills at most (the file's JSON framing and
#: the line's own fields come on top of the request body that is counted).
BYTES_MARGIN = 0.95
#: What routes a target's calls of one kind to a batch backend, or says why they stay live.
Route = Callable[["CallTarget", str], "BatchBackend | str"]


#: A route that replaces the providers' (:func:`batch_backend`), set by tests only.
ROUTE_FOR_TESTS: Route | None = None


def batch_backend(
    target: CallTarget, kind: str, params: Mapping[str, Any] | None = None
) -> BatchBackend | str:
    """The batch backend of ``target``'s calls of ``kind`` (``chat`` or ``embed``) with the
    call's own ``params``, or the reason they stay live."""
    if ROUTE_FOR_TESTS is not None:
        return ROUTE_FOR_TESTS(target, kind)
    from ..models import batch_route

    return batch_route(target, kind, params)


@dataclass(frozen=True)
class BatchSettings:
    """How the process batches: the waits, the bounds, and where the run's traces go."""

    poll_s: float = 15.0  #: first wait between polls (``--batch-poll``)
    timeout_s: float = 25 * 3600.0  #: the longest wait on a batch (``--batch-timeout``)
    send_delay_s: float = 0.5  #: a queue sends once no call joined it for this long
    run_id: str | None = None
    #: the results folder, as the timeout's error names it for ``--resume-batch``
    results_dir: str | None = None
    poll_cap_s: float = POLL_CAP_S
    max_poll_failures: int = MAX_POLL_FAILURES


@dataclass
class _Waiting:
    """The calls of this process that wait on one custom_id."""

    backend: BatchBackend
    line: BatchLine
    estimate_usd: float
    futures: list[asyncio.Future[Completion]] = field(default_factory=list)


class BatchQueue:
    """The calls of one (backend, model, kind) gathering for their next batch."""

    def __init__(self, batches: Batches, backend: BatchBackend) -> None:
        self._batches = batches
        self._backend = backend
        self._keys: list[str] = []
        self._bytes = 0
        self._timer: asyncio.TimerHandle | None = None

    def add(self, key: str, line: BatchLine) -> None:
        """Queue ``key``: sent with the others once the queue is idle, or full."""
        size = _line_bytes(line)
        full = len(self._keys) >= self._backend.max_lines
        if full or self._bytes + size > self._backend.max_bytes * BYTES_MARGIN:
            self.flush()
        self._keys.append(key)
        self._bytes += size
        if self._timer is not None:
            self._timer.cancel()
        loop = asyncio.get_running_loop()
        self._timer = loop.call_later(self._batches.settings.send_delay_s, self.flush)

    def flush(self) -> None:
        """Send the queued calls as one batch now."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        keys, self._keys, self._bytes = self._keys, [], 0
        if keys:
            self._batches.spawn(self._batches.send(self._backend, keys))


def _line_bytes(line: BatchLine) -> int:
    """About the bytes ``line`` takes in a batch's input."""
    body = {"messages": list(line.messages), "params": line.params, "id": line.custom_id}
    return len(json.dumps(body, ensure_ascii=False, default=str).encode("utf-8")) + 200


@dataclass
class _Watch:
    """A batch this process waits on: its keys, and its state as last polled."""

    backend: BatchBackend
    batch_id: str
    keys: set[str]
    state: BatchState | None = None
    #: this process created the batch (its calls' errors are theirs); else it follows one
    #: that an earlier run (or another worker) sent
    sent_here: bool = False


class Batches:
    """The batch path of this process."""

    def __init__(
        self,
        settings: BatchSettings,
        ledger: BatchLedger,
        journal: BatchJournal | None,
        store: Callable[[str, Completion], None],
        *,
        budget_left: Callable[[], float | None] = lambda: None,
        over_budget: Callable[[], BaseException] = lambda: BatchError("--max-cost reached"),
        route: Callable[..., BatchBackend | str] = batch_backend,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
        rng: random.Random | None = None,
    ) -> None:
        self.settings = settings
        self._ledger = ledger
        self._journal = journal
        self._store = store
        self._budget_left = budget_left
        self._over_budget = over_budget
        self._route = route
        self._clock = clock
        self._sleep = sleep
        self._rng = rng or random.Random()
        self._routes: dict[tuple[str, str], BatchBackend | str] = {}
        self._queues: dict[tuple[str, str, str], BatchQueue] = {}
        self._waiting: dict[str, _Waiting] = {}
        self._watches: dict[str, _Watch] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._reserved = 0.0

    # -- routing -----------------------------------------------------------------------------
    def backend(
        self, target: CallTarget, kind: str, params: Mapping[str, Any] | None = None
    ) -> BatchBackend | None:
        """The batch backend of ``target``'s calls of ``kind``, or None: they stay live. A
        call whose own ``params`` send headers is routed on its own (no batch line carries
        them); the others' route is the model's, asked once."""
        if params and params.get("extra_headers"):
            chosen = self._route(target, kind, params)
            return None if isinstance(chosen, str) else chosen
        known = self._routes.get((target.name, kind))
        if known is None:
            known = self._routes[(target.name, kind)] = self._route(target, kind)
        return None if isinstance(known, str) else known

    # -- submitting --------------------------------------------------------------------------
    async def submit(
        self, backend: BatchBackend, line: BatchLine, estimate_usd: float = 0.0
    ) -> Completion:
        """``line``'s answer from a batch: the batch that already holds its key, else the
        next one its queue sends."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Completion] = loop.create_future()
        key = line.custom_id
        waiting = self._waiting.get(key)
        if waiting is not None:  # the same call asked twice (no cache to share it): one line
            waiting.futures.append(future)
        else:
            self._waiting[key] = _Waiting(backend, line, estimate_usd, [future])
            self._queue(backend, line).add(key, line)
        return await future

    def _queue(self, backend: BatchBackend, line: BatchLine) -> BatchQueue:
        name = (backend.name, line.target.name, line.kind)
        queue = self._queues.get(name)
        if queue is None:
            queue = self._queues[name] = BatchQueue(self, backend)
        return queue

    def spawn(self, work: Awaitable[None]) -> None:
        """Run ``work`` on the loop, kept until it ends (each one fails its own calls on an
        error it does not expect: none waits on a task that died)."""
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def send(self, backend: BatchBackend, keys: Sequence[str]) -> None:
        """Send ``keys`` as one batch: those within the budget, claimed in the ledger; a key a
        batch already holds waits on that batch instead."""
        try:
            await self._send(backend, keys)
        except Exception as exc:  # never leave a call waiting on a task that died
            error = BatchError(f"{backend.name}: a batch of {len(keys)} calls failed: {exc}")
            self._fail([key for key in keys if key in self._waiting], error)

    async def _send(self, backend: BatchBackend, keys: Sequence[str]) -> None:
        keys = self._within_budget(keys)
        if not keys:
            return
        first = self._waiting[keys[0]].line
        claim = self._ledger.claim(
            keys,
            backend=backend.name,
            endpoint=_endpoint(first.target),
            kind=first.kind,
            run_id=self.settings.run_id,
        )
        held: dict[str, list[str]] = {}
        for key, holder in claim.held.items():
            held.setdefault(holder, []).append(key)
        for holder, its_keys in held.items():
            self._follow(backend, holder, its_keys)
        if claim.pending_id is None:
            return
        await self._create(backend, claim.pending_id, list(claim.claimed))

    def _within_budget(self, keys: Sequence[str]) -> list[str]:
        """The keys whose estimated batch cost fits in what is left of ``--max-cost``; the
        others fail as a live call over budget does."""
        left = self._budget_left()
        if left is None:
            return list(keys)
        kept, over = [], []
        for key in keys:
            cost = self._waiting[key].estimate_usd
            if self._reserved + cost > left:
                over.append(key)
            else:
                self._reserved += cost
                kept.append(key)
        if over:
            self._fail(over, self._over_budget())
        return kept

    async def _create(self, backend: BatchBackend, pending_id: str, keys: list[str]) -> None:
        lines = [self._waiting[key].line for key in keys]
        row = self._ledger.batch(pending_id)
        sha = row.input_sha256 if row is not None else ""
        target = lines[0].target
        self._write(
            "creating",
            pending_id=pending_id,
            input_sha256=sha,
            backend=backend.name,
            endpoint=_endpoint(target),
            model=target.model_id,
            kind=lines[0].kind,
            custom_ids=keys,
        )
        metadata = {"llmbench_input_sha256": sha}
        if self.settings.run_id:
            metadata["llmbench_run"] = self.settings.run_id[:512]
        try:
            batch_id = await backend.create(lines, metadata)
        except Exception as exc:
            self._ledger.release(pending_id)
            self._write("create_failed", pending_id=pending_id, error=str(exc))
            message = f"{backend.name}: the batch of {len(keys)} calls was not created: {exc}"
            self._fail(keys, BatchError(message))
            return
        self._ledger.created(pending_id, batch_id)
        self._write("created", pending_id=pending_id, batch_id=batch_id)
        self._watch(backend, batch_id, keys, sent_here=True)

    # -- following batches -------------------------------------------------------------------
    def _follow(self, backend: BatchBackend, holder: str, keys: list[str]) -> None:
        """Wait on the batch ``holder`` for ``keys`` (a pending one until it has an id)."""
        if holder.startswith(PENDING):
            self.spawn(self._guarded(self._follow_pending(backend, holder, keys), holder, keys))
        else:
            self._ledger.touch(holder, self.settings.run_id)
            self._watch(backend, holder, keys)

    async def _follow_pending(
        self, backend: BatchBackend, pending_id: str, keys: list[str]
    ) -> None:
        """Wait until a pending batch has its id (another worker is creating it), or adopt it
        when its run is gone: the provider is asked for it by its input hash; when it does not
        know it, its calls are sent anew."""
        deadline = self._clock() + self.settings.timeout_s
        while True:
            row = self._ledger.batch(pending_id)
            if row is not None and self._clock() >= deadline:
                message = (
                    f"batch {pending_id}: another process of this run claimed these calls and "
                    "never created its batch (it may have been killed): rerun with "
                    f"--resume-batch {self.settings.results_dir or '<results folder>'}"
                )
                self._fail(keys, BatchError(message))
                return
            if row is None:  # created (renamed) or released meanwhile
                self._requeue_or_follow(backend, keys)
                return
            if row.run_id != self.settings.run_id:
                adopted = self._ledger.adopt(pending_id, self.settings.run_id)
                if adopted is not None:
                    try:
                        await self._recover(backend, pending_id, adopted.input_sha256, keys)
                    except BaseException:
                        # Let another follower adopt it and ask again (a 503 on resume), not
                        # wait on this run's adoption until --batch-timeout.
                        self._ledger.disown(pending_id, self.settings.run_id)
                        raise
                    return
            await self._sleep(min(1.0, self.settings.poll_s))

    async def _recover(
        self, backend: BatchBackend, pending_id: str, sha: str, keys: list[str]
    ) -> None:
        found = await backend.find(sha)
        if found is not None:
            self._ledger.created(pending_id, found)
            self._write("recovered", pending_id=pending_id, batch_id=found, input_sha256=sha)
            self._watch(backend, found, keys)
            return
        released = self._ledger.release(pending_id)
        self._write(
            "resent",
            pending_id=pending_id,
            input_sha256=sha,
            custom_ids=released,
            reason=f"{backend.name} holds no batch with this input: it was never created",
        )
        self._requeue_or_follow(backend, keys)

    def _requeue_or_follow(self, backend: BatchBackend, keys: list[str]) -> None:
        """Each key: to the batch that holds it now, or queued to be sent again."""
        for key in keys:
            if key not in self._waiting:  # answered or failed meanwhile
                continue
            holder = self._ledger.holder(key)
            if holder is None:
                waiting = self._waiting[key]
                self._queue(backend, waiting.line).add(key, waiting.line)
            else:
                self._follow(backend, holder, [key])

    def _watch(
        self,
        backend: BatchBackend,
        batch_id: str,
        keys: Sequence[str],
        *,
        sent_here: bool = False,
    ) -> None:
        watch = self._watches.get(batch_id)
        if watch is not None:
            watch.keys.update(keys)
            return
        watch = _Watch(backend, batch_id, set(keys), sent_here=sent_here)
        self._watches[batch_id] = watch
        self.spawn(self._polled(watch))

    async def _polled(self, watch: _Watch) -> None:
        """Poll ``watch``'s batch until it ends (then answer its calls), outwaits the timeout
        or fails to answer ten polls in a row."""
        try:
            await self._poll_until_done(watch)
        except Exception as exc:  # the ledger, the cache: the calls fail, naming the cause
            error = BatchError(f"batch {watch.batch_id}: {type(exc).__name__}: {exc}")
            self._fail(sorted(watch.keys), error)
        finally:
            self._watches.pop(watch.batch_id, None)

    async def _guarded(self, work: Awaitable[None], batch_id: str, keys: Sequence[str]) -> None:
        """``work``, whose unexpected error fails ``keys`` naming the batch and the cause."""
        try:
            await work
        except Exception as exc:
            self._fail(keys, BatchError(f"batch {batch_id}: {type(exc).__name__}: {exc}"))

    async def _poll_until_done(self, watch: _Watch) -> None:
        settings = self.settings
        deadline = self._clock() + settings.timeout_s
        delay, failures, seen = settings.poll_s, 0, None
        failing_since: float | None = None
        while True:
            try:
                state = await watch.backend.poll(watch.batch_id)
                if state.terminal:
                    # An earlier run's batch found ended: what it left unanswered is sent anew.
                    await self._finish(watch, state, resend=seen is None and not watch.sent_here)
                    return
            except Exception as exc:
                if self._refused(watch, exc):
                    return
                failures += 1
                failing_since = self._clock() if failing_since is None else failing_since
                failing_for = self._clock() - failing_since
                if failures >= settings.max_poll_failures and failing_for >= MIN_FAILING_S:
                    message = (
                        f"batch {watch.batch_id}: polling or reading it failed {failures} times "
                        f"in a row, the last: {exc}; the batch keeps running: rerun with "
                        "--resume-batch "
                        f"{settings.results_dir or '<results folder>'} to collect it"
                    )
                    self._fail(sorted(watch.keys), BatchError(message))
                    return
                delay *= POLL_FACTOR  # an outage: wait longer each time, up to the cap
            else:
                failing_since = None
                failures = 0
                watch.state = state
                self._ledger.polled(watch.batch_id, state.status, state.done)
                progress = (state.status, state.done, state.failed)
                delay = settings.poll_s if progress != seen else delay * POLL_FACTOR
                seen = progress
            now = self._clock()
            if now >= deadline:
                self._timed_out(watch)
                return
            wait = min(delay, settings.poll_cap_s)
            wait *= 1 + self._rng.uniform(-POLL_JITTER, POLL_JITTER)
            await self._sleep(max(0.0, min(wait, deadline - now)))

    def _refused(self, watch: _Watch, exc: Exception) -> bool:
        """Fail ``watch``'s calls at once when the provider refuses the batch for good: HTTP
        404 (not this key's, or gone: its calls are freed, the next run sends them anew) or
        401/403 (the key: a rerun with the right one collects it). Whether it did."""
        status = _http_status(exc)
        if status not in (401, 403, 404):
            return False
        keys = sorted(watch.keys)
        if status == 404:
            self._ledger.forget_lines(watch.batch_id, keys)
            then = "its calls are freed: the next run sends them anew"
        else:
            then = "a rerun with a key that may read it collects it"
        message = f"batch {watch.batch_id}: the provider refuses it (HTTP {status}): {exc}; {then}"
        self._fail(keys, BatchError(message))
        return True

    def _timed_out(self, watch: _Watch) -> None:
        from ..config import format_age

        state = watch.state
        where = "not polled yet"
        if state is not None:
            where = f"{state.provider_status}, {state.done} of {state.total} answered"
        folder = self.settings.results_dir or "<results folder>"
        message = (
            f"batch {watch.batch_id}: not finished after --batch-timeout "
            f"{format_age(self.settings.timeout_s)} ({where}); the batch keeps running: "
            f"rerun with --resume-batch {folder} (or --retry-errors)"
        )
        self._write("timed_out", batch_id=watch.batch_id, status=where)
        self._fail(sorted(watch.keys), BatchError(message))

    async def _finish(self, watch: _Watch, state: BatchState, *, resend: bool = False) -> None:
        """Read the ended batch's results; write every answer to the cache, then answer the
        calls (an error for each call without an answer; ``resend``: a batch of an earlier run
        that had ended before this one looked: such a call is sent again instead, as it was
        never answered, so never paid)."""
        keys = sorted(key for key in watch.keys if key in self._waiting)
        sent = {key: self._waiting[key].line for key in keys}
        results = await watch.backend.results(state, sent)
        now = self._clock()
        answered: dict[str, Completion] = {}
        errors: dict[str, BatchError] = {}
        for key in keys:
            got = results.get(key)
            if isinstance(got, Completion):
                wait = None if state.created_at is None else max(0.0, now - state.created_at)
                answered[key] = dataclasses.replace(
                    got, batched=True, batch_id=watch.batch_id, batch_wait_s=wait
                )
            elif isinstance(got, BatchError):
                errors[key] = got
            else:
                errors[key] = BatchError(
                    f"batch {watch.batch_id}: no output line for call {key} "
                    f"(the batch ended {state.provider_status})"
                )
        for key, completion in answered.items():
            self._store(key, completion)  # before any item reads it: a kill loses nothing
        self._ledger.mark(answered, DONE)
        self._ledger.forget_lines(
            watch.batch_id, errors
        )  # never answered: a later run sends them anew
        self._ledger.ended(watch.batch_id, state.status, state.done)
        self._write(
            "ended",
            batch_id=watch.batch_id,
            status=state.status,
            provider_status=state.provider_status,
            total=state.total,
            done=state.done,
            failed=state.failed,
            errors=list(state.errors),
            # lines of its files that belong to no call sent (not JSON, unknown custom_id)
            problems=list(getattr(results, "problems", ())),
        )
        for key, completion in answered.items():
            self._resolve(key, completion)
        if resend and errors:
            self._write(
                "resent",
                batch_id=watch.batch_id,
                custom_ids=sorted(errors),
                reason=f"batch {watch.batch_id} ended {state.provider_status} without "
                "answering them",
            )
            self._requeue_or_follow(watch.backend, sorted(errors))
            await self._finish_late(watch, state, keys, resend=resend)
            return
        for key, error in errors.items():
            self._fail([key], error)
        await self._finish_late(watch, state, keys, resend=resend)

    async def _finish_late(
        self, watch: _Watch, state: BatchState, read: Sequence[str], *, resend: bool
    ) -> None:
        """Answer the calls that began to follow the batch while its results were read (a
        resumed call finding it held): read again for them, or they would wait for good."""
        if any(key in self._waiting and key not in read for key in watch.keys):
            await self._finish(watch, state, resend=resend)

    # -- answering ---------------------------------------------------------------------------
    def _resolve(self, key: str, completion: Completion) -> None:
        waiting = self._waiting.pop(key, None)
        if waiting is None:
            return
        self._reserved = max(0.0, self._reserved - waiting.estimate_usd)
        for future in waiting.futures:
            if not future.done():
                future.set_result(completion)

    def _fail(self, keys: Sequence[str], error: BaseException) -> None:
        for key in keys:
            waiting = self._waiting.pop(key, None)
            if waiting is None:
                continue
            self._reserved = max(0.0, self._reserved - waiting.estimate_usd)
            for future in waiting.futures:
                if not future.done():
                    future.set_exception(error)

    def _write(self, event: str, **fields: Any) -> None:
        if self._journal is not None:
            self._journal.write(event, **fields)

    def close(self) -> None:
        """Close the ledger (the batches followed keep running at the provider; the engine's
        loop, closed with the process, ends their polling)."""
        self._ledger.close()


def batch_counts(ledger: BatchLedger, run_id: str | None) -> dict[str, Any] | None:
    """progress.json's ``batches`` block of the run ``run_id`` from the ledger (shared by the
    xdist workers), or None when the run sent no batch."""
    try:
        rows = [row for row in ledger.batches(run_id) if not row.pending]
        written = ledger.lines_done([row.batch_id for row in rows])
    except LedgerError:
        return None
    if not rows:
        return None
    running = [row for row in rows if row.status not in _ENDED]
    return {
        "submitted": len(rows),
        "in_progress": len(running),
        "done": sum(row.status == "completed" for row in rows),
        "failed": sum(row.status in _ENDED and row.status != "completed" for row in rows),
        "items_written": written,
        "lines": sum(row.lines for row in rows),
        "oldest_created_at": min((row.created_at for row in running), default=None),
    }


_ENDED = frozenset({"completed", "failed", "expired", "cancelled"})


def progress_words(counts: Mapping[str, Any]) -> str:
    """The progress line's batch part: ``batches: 1 in progress, 2 done · 340/500 calls
    answered``."""
    parts = [f"{counts['in_progress']} in progress", f"{counts['done']} done"]
    if counts.get("failed"):
        parts.append(f"{counts['failed']} failed")
    answered = f"{counts['items_written']}/{counts['lines']} calls answered"
    return f"batches: {', '.join(parts)} · {answered}"


def batch_progress(config: Any) -> dict[str, Any] | None:
    """The run's ``batches`` block (:func:`batch_counts`) read from its ledger, or None: the
    run does not batch, or sent no batch yet."""
    from ..config import get_run_config
    from .batch_ledger import ledger_path
    from .session import run_id

    run = get_run_config(config)
    if not run.batch:
        return None
    path = ledger_path(run.cache_dir)
    if not path.exists():
        return None
    ledger = BatchLedger(path)
    try:
        return batch_counts(ledger, run_id(config))
    finally:
        ledger.close()


def _endpoint(target: CallTarget) -> str:
    """The endpoint the ledger and the journal keep for a batch: its address without the user
    and password a URL may carry."""
    from ..models import without_userinfo

    return without_userinfo(target.api_base or "")


def _http_status(exc: BaseException) -> int | None:
    """The HTTP status an error carries, or the error it was raised from."""
    seen: BaseException | None = exc
    for _ in range(5):
        if seen is None:
            return None
        status = getattr(seen, "status_code", None)
        if isinstance(status, int):
            return status
        seen = seen.__cause__ or seen.__context__
    return None
