"""The logging registry that pytest walks while the engine's threads add loggers to it."""

from __future__ import annotations

import logging
import threading

import pytest

from pytest_llmbench.engine import guard_logger_registry
from pytest_llmbench.engine.logger_registry import LoggerRegistry


def test_a_logger_made_during_a_walk_of_the_registry_does_not_break_the_walk() -> None:
    guard_logger_registry()
    registry = logging.Logger.manager.loggerDict
    logging.getLogger("llmbench-test.walked")
    walked = []
    for logger in registry.values():  # pytest's logging plugin walks it so, as an item starts
        walked.append(logger)
        logging.getLogger(f"llmbench-test.made-during-walk.{len(walked)}")
    assert walked  # it walked the registry as it was when the walk began
    assert "llmbench-test.made-during-walk.1" in registry  # the loggers made meanwhile are kept
    for view in (registry.keys(), registry.items()):
        for _ in view:
            logging.getLogger(f"llmbench-test.made-during-walk.{len(walked)}.{len(registry)}")


def test_the_guard_keeps_every_logger_and_is_set_once() -> None:
    before = logging.getLogger("llmbench-test.kept")
    guard_logger_registry()
    registry = logging.Logger.manager.loggerDict
    guard_logger_registry()
    assert logging.Logger.manager.loggerDict is registry  # a second call changes nothing
    assert isinstance(registry, LoggerRegistry)
    assert logging.getLogger("llmbench-test.kept") is before  # the same logger, found again
    assert registry["llmbench-test.kept"] is before
    # The hierarchy still works: a child made now propagates to the parent made before.
    child = logging.getLogger("llmbench-test.kept.child")
    assert child.parent is before


def test_loggers_made_by_a_thread_while_items_start(pytester: pytest.Pytester) -> None:
    """A session with the plugin: items start (pytest walks the registry at each phase) while a
    thread makes loggers, switching threads as often as it can; no item fails for it. Without
    the plugin (``-p no:llmbench``) this session fails with "dictionary changed size"."""
    pytester.makepyfile(
        test_walk="""
        import logging, sys, threading
        import pytest
        sys.setswitchinterval(1e-6)
        for n in range(2000):
            logging.getLogger(f"seeded.{n}")
        stop = threading.Event()
        def make():
            n = 0
            while not stop.is_set() and n < 20000:
                n += 1
                logging.getLogger(f"made.by.thread.{n}")
        thread = threading.Thread(target=make, daemon=True)
        thread.start()
        @pytest.mark.parametrize("i", range(50))
        def test_item(i):
            pass
        def test_zz_stop():
            stop.set()
            thread.join()
        """
    )
    result = pytester.runpytest_subprocess("-q", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=51)


def test_the_threads_see_one_registry() -> None:
    guard_logger_registry()
    made: list[logging.Logger] = []
    thread = threading.Thread(target=lambda: made.append(logging.getLogger("llmbench-test.t")))
    thread.start()
    thread.join()
    assert logging.getLogger("llmbench-test.t") is made[0]
