"""Before each item runs, hand the plans this process runs next to the call scheduler.

:class:`Prefetcher` is a plugin: it reads the plans the shell stashed at collection finish
(:class:`~pytest_llmbench.engine.plan.CollectedPlans`: this process's items in run order, and
which of them may have their call started early) and, before each item, asks the
:class:`~pytest_llmbench.engine.scheduler.CallScheduler` to start the calls of that item and the
next ones (under xdist, the worker's queue of items to run).

The plugin registers it in every run: the plans' module, and the runtime's, load only in a run
that collected eval items.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import pytest

from .lifetime import eval_files_collected

if TYPE_CHECKING:
    from .plan import CallPlan
    from .scheduler import CallScheduler
    from .stop_early import StopEarly


class Prefetcher:
    """Before each item runs, start the calls of the items this process will run next."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self._positions: dict[str, int] = {}
        #: this process's items in run order, and the plans whose call may start early
        self._order: tuple[str, ...] = ()
        self._prefetchable: Mapping[str, CallPlan] = {}
        self._active = False
        self._contests = False  #: the run holds select-best contests
        self._interactor: Any = _UNKNOWN
        self._session: pytest.Session | None = None
        #: without xdist: the next position whose call may be started, and the window's end
        self._next = 0
        self._last = -1
        #: ``--stop-early``: it says which repeats may start ahead (:mod:`.stop_early`)
        self._gate: StopEarly | None = None
        #: without xdist: positions in the window whose repeat waited on earlier ones
        self._held: dict[int, None] = {}
        #: without xdist: positions passed over for that (held, or settled to be skipped):
        #: the window reaches that many items further
        self._idle: set[int] = set()

    @pytest.hookimpl(trylast=True)
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        """Read this process's plans, in run order."""
        self._session = session
        if not eval_files_collected(self.config):
            return  # no plans were stashed under the plans' key
        from .plan import PLANS_KEY, CollectedPlans

        collected = self.config.stash.get(PLANS_KEY, CollectedPlans())
        self._order, self._prefetchable = collected.order, collected.prefetchable
        self._positions = {nodeid: index for index, nodeid in enumerate(self._order)}
        self._active = bool(collected.plans)
        self._contests = bool(collected.contests)
        from .stop_early import STOP_EARLY_KEY

        self._gate = self.config.stash.get(STOP_EARLY_KEY, None)

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: pytest.Item | None) -> None:
        """Top up the calls in flight with this and the upcoming items."""
        if not self._active:
            return
        from .lifetime import get_runtime

        scheduler = get_runtime(self.config).scheduler()
        ahead = stop_bounded_lookahead(scheduler.lookahead, self.config, item.session)
        if self._interactor is _UNKNOWN:
            self._interactor = _xdist_interactor(self.config)
        queued = _xdist_queue(self._interactor)
        if queued is None:
            self._in_order(scheduler, item.nodeid, ahead)
            return
        upcoming = [item.nodeid] + [
            self._order[i] for i in queued[:ahead] if 0 <= i < len(self._order)
        ]
        keep = set(upcoming)
        scheduler.forget([nodeid for nodeid in scheduler.started() if nodeid not in keep])
        plans = _prefetchable(self._prefetchable, upcoming)
        gate = self._gate
        scheduler.prefetch(plans if gate is None else [p for p in plans if gate.may_start(p)])

    def _in_order(self, scheduler: CallScheduler, nodeid: str, ahead: int) -> None:
        """Without xdist the items run in collection order: the window of items whose calls may
        run is ``[current, current + ahead]``, and moves one item on at a time. Calls started
        before the window (items skipped before their setup) or after it (``--maxfail`` allows
        fewer now) are cancelled; the items newly in the window are started a batch at a time
        (:attr:`~.scheduler.CallScheduler.refill`), so the engine's thread wakes once per batch
        while every slot stays busy. Under ``--stop-early`` the repeats that may not start yet
        (:meth:`.stop_early.StopEarly.may_start`) do not count in the window, so that other
        cases' calls keep it full (unless ``-x``/``--maxfail`` narrow it)."""
        position = self._positions.get(nodeid, 0)
        stretch = self._gate is not None and ahead == scheduler.lookahead
        if self._idle:
            self._idle = {index for index in self._idle if index >= position}
        last = position + ahead + (len(self._idle) if stretch else 0)
        positions = self._positions
        started = scheduler.started()
        past = []  # before the current item: skipped, they will not run
        for started_id in started:  # in start order: run order, but select-best contestants
            if positions.get(started_id, position) < position:  # start with their contest's
                past.append(started_id)  # first
            elif not self._contests:
                break
        scheduler.forget(past, past=True)
        if last < self._last:
            scheduler.forget([n for n in started if positions.get(n, position) > last])
            self._next = min(self._next, last + 1)
        self._last = last
        self._next = max(self._next, position)
        room = scheduler.room()
        batch = scheduler.refill if ahead == scheduler.lookahead else 1
        if room < batch and self._next > position:
            return  # the current item's call is started (or not prefetchable): wait for more room
        order, prefetchable, gate = self._order, self._prefetchable, self._gate
        plans = [] if gate is None else self._released(gate, position, last, room)
        while self._next <= last and self._next < len(order) and len(plans) < room:
            plan = prefetchable.get(order[self._next])
            if plan is not None:
                if gate is None or gate.may_start(plan):
                    plans.append(plan)
                else:
                    if gate.held(plan):
                        self._held[self._next] = None
                    if stretch and self._next not in self._idle:
                        self._idle.add(self._next)  # no call of its own now: one more item
                        last += 1
            self._next += 1
        self._last = last
        scheduler.prefetch(plans)

    def _released(self, gate: StopEarly, position: int, last: int, room: int) -> list[CallPlan]:
        """``--stop-early``: the held repeats in the window whose earlier repeats are now
        scored; those settled (they will be skipped) or passed are dropped."""
        released: list[CallPlan] = []
        held: dict[int, None] = {}
        for index in self._held:
            if index < position:
                continue  # its item ran (its call taken then) or was skipped
            plan = self._prefetchable[self._order[index]]
            if index <= last and len(released) < room and gate.may_start(plan):
                released.append(plan)
            elif gate.held(plan):
                held[index] = None
        self._held = held
        return released

    @pytest.hookimpl(trylast=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """The moment pytest decides to stop (``-x``, ``--maxfail``, ``--sw``), cancel the calls
        started for items that will not run."""
        session = self._session
        if self._active and session is not None and (session.shouldstop or session.shouldfail):
            self.pytest_sessionfinish(session)

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        """After ``-x``, ``--maxfail`` or Ctrl-C, stop the calls of items that will not run now,
        before the reports at session end, not at unconfigure."""
        from .lifetime import RUNTIME_KEY

        runtime = self.config.stash.get(RUNTIME_KEY, None)
        if self._active and runtime is not None:
            runtime.scheduler().cancel_pending()


def stop_bounded_lookahead(lookahead: int, config: pytest.Config, session: pytest.Session) -> int:
    """How many items past the current one may have their call started: under ``-x`` or
    ``--maxfail N``, no more than the failures still allowed after the current item, so that
    every call started belongs to an item that runs even if all of them fail (``-x``: one call
    at a time)."""
    maxfail = int(getattr(config.option, "maxfail", 0) or 0)
    if maxfail <= 0:
        return lookahead
    still_allowed = maxfail - session.testsfailed
    return max(0, min(lookahead, still_allowed - 1))


def _prefetchable(prefetchable: Mapping[str, CallPlan], nodeids: list[str]) -> list[CallPlan]:
    """The prefetchable plans among ``nodeids``, in their order."""
    return [prefetchable[n] for n in nodeids if n in prefetchable]


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
