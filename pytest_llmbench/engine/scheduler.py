"""Run the model calls of upcoming eval items ahead of pytest, bounded per model.

pytest runs and reports items one at a time, in order. Model calls are slow and I/O-bound, so
before each item runs, :class:`~pytest_llmbench.engine.prefetch.Prefetcher` hands the plans of
the next items of this process to the :class:`CallScheduler`, which starts their answers
(:mod:`.answer`) on the engine loop: at most ``concurrency`` calls per model in flight (split
between xdist workers), paced by requests and tokens per minute, halved on HTTP 429 and
recovered after. An item's setup then only waits for its own answer. Items are still set up,
scored and reported by pytest in order; ``-x``, ``--maxfail`` and Ctrl-C cancel whatever is
pending when the session finishes. Items of ``parallel_safe: false`` files wait for their
turn, as do the calls of such models; under xdist those take a lock shared by the workers,
since a limit of one call cannot be split between them. The pacing, the response cache and the
budget are in :mod:`.pacing`.
"""

from __future__ import annotations

import concurrent.futures
import time
from collections.abc import Callable, Iterable, KeysView, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from ..models import ItemError, SandboxError
from .pacing import lookahead, refill
from .request import Answer
from .streaming import StreamSample

T = TypeVar("T")

#: Say which model has calls waiting every this many seconds while an item waits on its call.
NOTICE_EVERY_S = 30.0

if TYPE_CHECKING:
    from ..config import RunConfig
    from ..models import Completion, ModelProfile
    from .answer import Answerer
    from .event_loop import Engine
    from .plan import CallPlan
    from .request import ConversationRun


class CallScheduler:
    """Starts the answers of eval items in this process ahead of them, and hands them over."""

    def __init__(
        self,
        engine: Engine,
        answerer: Answerer,
        run: RunConfig,
        n_workers: int,
        plans: Sequence[CallPlan] = (),
        *,
        notice: Callable[[str], None] | None = None,
        notice_every_s: float = NOTICE_EVERY_S,
        prepare_workdir: Callable[[CallPlan], Path] | None = None,
    ) -> None:
        self._engine = engine
        self._prepare_workdir = prepare_workdir
        self._notice = notice
        self._notice_every_s = notice_every_s
        self._model_of: dict[str, str] = {}
        self._answerer = answerer
        self._stream_mode = run.stream
        self._futures: dict[str, concurrent.futures.Future[Answer]] = {}
        self._sample = StreamSample.for_plans(plans)
        self._plain_calls: dict[str, int] = {}
        #: every plan by node id: a contestant's answer starts its contest's others (below)
        self._plans = {plan.nodeid: plan for plan in plans}
        #: contestants whose answers were started once: never started again by another's
        self._contest_started: set[str] = set()
        self.lookahead = lookahead(run, max(1, n_workers))
        #: calls started at once when items run in order (:func:`.pacing.refill`)
        self.refill = refill(run, max(1, n_workers))

    # -- main thread --------------------------------------------------------------------------
    def prefetch(self, plans: Iterable[CallPlan]) -> None:
        """Start the answers of ``plans``, in order, skipping those already started, until the
        lookahead is full; all of them reach the engine loop in one step of it."""
        batch: list[CallPlan] = []
        room = self.room()
        for plan in plans:
            if len(batch) >= room:
                break
            if plan.nodeid not in self._futures:
                batch.append(plan)
        if not batch:
            return
        started = self._submit_many(batch, [self._workdir(plan) for plan in batch])
        for plan, future in zip(batch, started, strict=True):
            self._futures[plan.nodeid] = future
            self._model_of[plan.nodeid] = plan.model.name

    def room(self) -> int:
        """How many more calls may start ahead of their items."""
        return self.lookahead - len(self._futures)

    def started(self) -> KeysView[str]:
        """The node ids whose calls were started ahead and not yet taken, in the order started."""
        return self._futures.keys()

    def forget(self, nodeids: Iterable[str], *, past: bool = False) -> None:
        """Cancel the calls started for ``nodeids``: those items were skipped before their
        setup, handed to another xdist worker, or are past what ``-x``/``--maxfail`` lets run,
        and would otherwise hold the lookahead for good. A select-best contestant's call is
        kept, since another contestant's verdict waits for its answer (the run's end cancels
        it), unless its item is ``past`` (it will not run) and its answer is done: then it is
        dropped, and its room in the look-ahead freed."""
        contestants = self._answerer.contestants
        doomed = []
        for nodeid in nodeids:
            future = self._futures.get(nodeid)
            if future is None:
                continue
            if not contestants(nodeid):
                doomed.append(nodeid)
            elif past and future.done():
                del self._futures[nodeid]
                self._model_of.pop(nodeid, None)
        self._cancel(doomed)

    def _cancel(self, nodeids: Iterable[str]) -> None:
        doomed = [nodeid for nodeid in nodeids if nodeid in self._futures]
        for nodeid in doomed:
            self._model_of.pop(nodeid, None)
        self._engine.cancel([self._futures.pop(nodeid) for nodeid in doomed])

    def _workdir(self, plan: CallPlan) -> Path | Exception | None:
        """An agent's workdir, made now so that its loop can start ahead of its item; what
        making it raised (a full disk), to be the item's error, not the run's."""
        if plan.agent is None or self._prepare_workdir is None:
            return None
        try:
            return self._prepare_workdir(plan)
        except OSError as exc:
            return SandboxError(f"{plan.model.name}: its workdir cannot be made: {exc}")

    def take(self, plan: CallPlan, workdir: Path | None = None) -> Answer:
        """Wait for ``plan``'s answer (starting it now, in ``workdir``, if it was not
        prefetched)."""
        future = self._futures.pop(plan.nodeid, None) or self._submit_many([plan], [workdir])[0]
        self._model_of.pop(plan.nodeid, None)
        return self._answerer.claim(plan, self._wait(future, plan.model.name))

    def _wait(self, future: concurrent.futures.Future[T], model: str) -> T:
        """The result of ``future``; a notice every ``notice_every_s`` while it is not there;
        Ctrl-C cancels it."""
        started = time.monotonic()
        try:
            while True:
                try:
                    return future.result(timeout=self._notice_every_s)
                except concurrent.futures.TimeoutError:
                    self._say_waiting(model, time.monotonic() - started)
        except BaseException as exc:
            if isinstance(exc, KeyboardInterrupt):
                # Queued calls first: the slot this call frees must not start one of them.
                self.cancel_pending()
            future.cancel()
            raise

    def _say_waiting(self, model: str, waited_s: float) -> None:
        if self._notice is None:
            return
        pending = 1 + sum(
            1
            for nodeid, future in self._futures.items()
            if self._model_of.get(nodeid) == model and not future.done()
        )
        calls = "call" if pending == 1 else "calls"
        self._notice(
            f"llmbench: waiting {waited_s:.0f} s on {model}: "
            f"{pending} {calls} pending (in flight or queued)"
        )

    def complete(
        self,
        model: ModelProfile,
        messages: Sequence[dict[str, Any]],
        params: dict[str, Any],
        *,
        repeat: int,
        nodeid: str,
    ) -> Completion:
        """A plain test's call (the ``llm`` fixture), made now through the same pacer."""
        call = self._plain_calls[nodeid] = self._plain_calls.get(nodeid, 0) + 1
        coroutine = self._answerer.complete(
            model, messages, params, repeat=repeat, call=call, nodeid=nodeid
        )
        return self._wait(self._engine.submit(coroutine), model.name)

    def _submit_many(
        self, plans: Sequence[CallPlan], workdirs: Sequence[Path | Exception | None]
    ) -> list[concurrent.futures.Future[Answer]]:
        """Start the answers of ``plans`` on the engine loop, in one step of it. A select-best
        contestant's answer starts those of the other contestants of its contest with it
        (kept as started ahead, for their items to take): its verdict waits for theirs."""
        given = len(plans)
        plans = list(plans)
        folders: list[Path | Exception | None] = list(workdirs)
        starting = {plan.nodeid for plan in plans}
        for plan in plans[:given]:
            for other in self._contest_others(plan):
                if other.nodeid in starting:
                    continue
                starting.add(other.nodeid)
                plans.append(other)
                folders.append(self._workdir(other))  # failing: that contestant errors, and
                # leaves the contest (below)
        futures: list[concurrent.futures.Future[Answer] | None] = []
        coroutines = []
        for plan, workdir in zip(plans, folders, strict=True):
            try:
                if isinstance(workdir, Exception):
                    raise workdir
                answer = self._answerer.answer(plan, workdir, stream=self._streams(plan.nodeid))
            except Exception as exc:  # a missing key, a server that will not start: setup says
                futures.append(_settled(exception=exc))
                if self._answerer.contestants(plan.nodeid):
                    why = exc.message if isinstance(exc, ItemError) else type(exc).__name__
                    self._engine.submit(self._answerer.withdraw(plan.nodeid, why))
                continue
            if isinstance(answer, Answer):  # from the response cache, on this thread
                futures.append(_settled(answer))
            else:
                coroutines.append(answer)
                futures.append(None)
        running = iter(self._engine.submit_many(coroutines))
        started = [future if future is not None else next(running) for future in futures]
        for plan, future in zip(plans[given:], started[given:], strict=True):
            self._futures[plan.nodeid] = future
            self._model_of[plan.nodeid] = plan.model.name
        return started[:given]

    def _contest_others(self, plan: CallPlan) -> list[CallPlan]:
        """The other contestants of ``plan``'s contest whose answers were never started (each
        contestant's answer is started once: a rerun of one does not start the others again)."""
        members = self._answerer.contestants(plan.nodeid)
        if not members or plan.nodeid in self._contest_started:
            self._contest_started.add(plan.nodeid)
            return []
        self._contest_started.update(members)
        return [
            self._plans[nodeid]
            for nodeid in members
            if nodeid != plan.nodeid and nodeid not in self._futures and nodeid in self._plans
        ]

    def _streams(self, nodeid: str) -> bool:
        mode = self._stream_mode
        return mode == "all" or (mode == "sample" and self._sample.streams(nodeid))

    def activity(self) -> tuple[int, int]:
        """This process's calls in flight, and those waiting on a rate limit."""
        return self._answerer.activity()

    def said_so_far(self, nodeid: str) -> ConversationRun | None:
        """What the conversation of item ``nodeid`` said so far, while it runs."""
        return self._answerer.said_so_far(nodeid)

    def cancel_pending(self) -> None:
        """Cancel the calls started for items that have not run (the engine stops them)."""
        self._cancel(list(self.started()))

    def close(self) -> None:
        """Cancel pending calls and close the answerer."""
        self.cancel_pending()
        self._answerer.close()


def _settled(
    answer: Answer | None = None, exception: Exception | None = None
) -> concurrent.futures.Future[Answer]:
    """A future that is already done: with ``exception`` if given, else ``answer``."""
    future: concurrent.futures.Future[Answer] = concurrent.futures.Future()
    if exception is not None:
        future.set_exception(exception)
    else:
        assert answer is not None
        future.set_result(answer)
    return future
