"""The logging registry, made safe to read while this plugin's threads add loggers to it.

pytest's logging plugin walks ``logging.Logger.manager.loggerDict.values()`` on the main thread
as each item's setup, call and teardown start (to attach its handlers to loggers that do not
propagate), without logging's lock. Meanwhile the engine's thread and the warm-up threads import
modules and create loggers (``logging.getLogger`` adds to that dict), so the walk can fail with
"dictionary changed size during iteration": an item fails for no fault of its own.

:func:`guard_logger_registry` swaps the registry for a dict whose ``keys()``, ``values()`` and
``items()`` are views of a copy taken at once (the copy of a dict runs no Python code, so no
other thread runs during it). Everything else about the registry is unchanged: the same
entries, lookups and insertions, and ``logging``'s own lock around them.
"""

from __future__ import annotations

import logging
from collections.abc import ItemsView, KeysView, ValuesView
from typing import Any

__all__ = ["LoggerRegistry", "guard_logger_registry"]


class LoggerRegistry(dict[str, Any]):
    """``logging``'s registry of loggers, whose views are of a snapshot."""

    def keys(self) -> KeysView[str]:  # type: ignore[override]  # a view, of the snapshot
        return dict.copy(self).keys()

    def values(self) -> ValuesView[Any]:  # type: ignore[override]
        return dict.copy(self).values()

    def items(self) -> ItemsView[str, Any]:  # type: ignore[override]
        return dict.copy(self).items()


def guard_logger_registry() -> None:
    """Make the registry of loggers a :class:`LoggerRegistry`, under logging's lock (once per
    process: later calls find it done)."""
    manager = logging.Logger.manager
    with logging._lock:  # type: ignore[attr-defined]  # the lock getLogger holds to add one
        if not isinstance(manager.loggerDict, LoggerRegistry):
            manager.loggerDict = LoggerRegistry(manager.loggerDict)
