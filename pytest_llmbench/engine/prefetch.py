"""Before each item runs, hand the items this process runs next to the call scheduler.

:class:`Prefetcher` is a plugin: it learns this process's items in run order (under xdist, the
worker's queue of items to run) and, before each item, asks the
:class:`~pytest_llmbench.engine.scheduler.CallScheduler` to start the calls of that item and the next
ones. :func:`prefetchable` says which items may have their call started early.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeGuard

import pytest

if TYPE_CHECKING:
    from ..item import EvalItem


def prefetchable(item: pytest.Item) -> TypeGuard[EvalItem]:
    """An eval item whose call may start before it runs: not serial, not about to be skipped."""
    from ..item import EvalItem

    if not isinstance(item, EvalItem) or not item.prefetchable:
        return False
    if item.get_closest_marker("skip") is not None:
        return False
    return not any(_may_skip(mark) for mark in item.iter_markers("skipif"))


def _may_skip(mark: pytest.Mark) -> bool:
    """Whether a ``skipif`` mark may skip: a false condition does not, a string may."""
    conditions = mark.args or ((mark.kwargs["condition"],) if "condition" in mark.kwargs else ())
    return not conditions or any(isinstance(c, str) or bool(c) for c in conditions)


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
