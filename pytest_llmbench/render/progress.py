"""The run's progress on the terminal while it goes on (controller only).

Every ``llmbench_progress_every_s`` seconds (default 10 in a terminal, 30 in a CI log; 0: never)
a line of its own says how far the run is::

    llmbench: 120/400 items (30%), pass 71.7%, 3 errors, 0.0123 USD, 8 calls in flight,
    2 waiting on a rate limit, ETA 1m 40s

Items done, pass rate and errors come from the records as they arrive (``-n 0`` and ``-n 2``
alike), spend from their cost and judge cost, calls in flight from the ``llmbench_activity``
each process puts on its reports. The line is written from the main thread when a report
arrives, between pytest's own writes, so ``-q``'s dots, ``-v``'s lines and the summaries stay
whole; a run shorter than the interval shows none.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from ..results_folder import ResultsFolder

#: Seconds between two progress lines: in a terminal, and in a log (CI).
TTY_EVERY_S = 10.0
LOG_EVERY_S = 30.0


@dataclass
class Tally:
    """What the records so far say."""

    total: int | None = None
    done: int = 0
    passed: int = 0
    failed: int = 0
    errors: int = 0
    spent: float = 0.0
    #: calls in flight and waiting on a rate limit, per process (its last report)
    activity: dict[str, tuple[int, int]] = field(default_factory=dict)
    #: the run's provider batches (``--batch``): progress.json's ``batches`` block
    batches: dict[str, Any] | None = None

    def add(self, record: dict[str, Any], *, item: bool = True) -> None:
        """Count one record: an eval item's (``item``), or a plain test's (its spend only)."""
        if item:
            self.done += 1
            outcome = record.get("outcome")
            self.passed += outcome == "passed"
            self.failed += outcome == "failed"
            self.errors += outcome == "error"
        for name in ("cost_usd", "judge_cost_usd"):
            value = record.get(name)
            if isinstance(value, (int, float)):
                self.spent += value

    def line(self, elapsed_s: float) -> str:
        """The progress line, ``elapsed_s`` seconds into the run."""
        parts = [self._items()]
        scored = self.passed + self.failed
        if scored:
            parts.append(f"pass {100 * self.passed / scored:.1f}%")
        parts.append(f"{self.errors} error{'' if self.errors == 1 else 's'}")
        parts.append(f"{self.spent:.4f} USD")
        in_flight, waiting = self.calls()
        parts.append(f"{in_flight} call{'' if in_flight == 1 else 's'} in flight")
        if waiting:
            parts.append(f"{waiting} waiting on a rate limit")
        if self.batches:
            from ..engine import progress_words

            parts.append(progress_words(self.batches))
        eta = self.eta_s(elapsed_s)
        if eta is not None:
            parts.append(f"ETA {duration(eta)}")
        return "llmbench: " + ", ".join(parts)

    def calls(self) -> tuple[int, int]:
        """Calls in flight, and those waiting on a rate limit, over every process."""
        return (
            sum(active for active, _ in self.activity.values()),
            sum(held for _, held in self.activity.values()),
        )

    def _items(self) -> str:
        if not self.total:
            return f"{self.done} items"
        return f"{self.done}/{self.total} items ({100 * self.done / self.total:.0f}%)"

    def eta_s(self, elapsed_s: float) -> float | None:
        """Seconds left at the pace so far; None until an item is done or without a total."""
        if not self.total or not self.done or elapsed_s <= 0:
            return None
        return max(0.0, (self.total - self.done) * elapsed_s / self.done)


def duration(seconds: float) -> str:
    """``95`` -> ``1m 35s``; ``3700`` -> ``1h 1m``."""
    whole = round(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h {minutes}m"
    return f"{minutes}m {secs:02d}s" if minutes else f"{secs}s"


class RunProgress:
    """Counts the records as they arrive and writes the progress line every interval."""

    def __init__(self, config: pytest.Config, every_s: float) -> None:
        self.config = config
        self.every_s = every_s
        self.tally = Tally()
        self._started: float | None = None
        self._last: float | None = None
        self._saved: float | None = None
        self._lock = threading.RLock()
        self._ticker: threading.Thread | None = None
        self._over = threading.Event()
        from ..config import eval_nodeid_matcher

        self._is_eval = eval_nodeid_matcher(config)

    # -- how many items --------------------------------------------------------------------------
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        if not hasattr(self.config, "workerinput") and session.items:
            # Eval items carry the `llmbench` marker (collect.py); plain tests do not.
            marked = (item.get_closest_marker("llmbench") for item in session.items)
            self.tally.total = sum(marker is not None for marker in marked)

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:
        if self.tally.total is None:
            self.tally.total = sum(self._is_eval(nodeid) for nodeid in ids)

    # -- as items finish -------------------------------------------------------------------------
    def pytest_runtest_logstart(self) -> None:
        if self._started is None:
            self._started = self._last = time.monotonic()
            self._start_ticker()

    def _start_ticker(self) -> None:
        """Under ``--batch``, items wait hours with no report arriving: a thread writes the
        progress (with the batches' counts) every interval meanwhile."""
        if hasattr(self.config, "workerinput") or not _batching(self.config):
            return
        every = min(self.every_s, 5.0) if self.every_s > 0 else 5.0

        def tick() -> None:
            while not self._over.wait(every):
                self._maybe_write()

        self._ticker = threading.Thread(target=tick, name="llmbench-progress", daemon=True)
        self._ticker.start()

    @pytest.hookimpl(trylast=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        activity = getattr(report, "llmbench_activity", None)
        if isinstance(activity, list) and len(activity) == 2:
            worker = str(getattr(getattr(report, "node", None), "gateway", None) or "main")
            self.tally.activity[worker] = (int(activity[0]), int(activity[1]))
        record = getattr(report, "llmbench_record", None)
        if isinstance(record, dict):
            self.tally.add(record, item=self._is_eval(str(record.get("nodeid") or "")))
        self._maybe_write()

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self) -> None:
        """The run is over (run.json says how): its progress file has said its last."""
        self._over.set()
        if self._ticker is not None:
            self._ticker.join()
        folder = self._folder()
        if folder is not None:
            ResultsFolder(folder).remove_progress()

    def _save(self) -> None:
        """``progress.json`` in the results folder, at most once a second: what `llmbench view`
        shows of a run in progress (and the pid that says whether it still runs)."""
        now = time.monotonic()
        if self._started is None or (self._saved is not None and now - self._saved < 1.0):
            return
        folder = self._folder()
        if folder is None:
            return
        self._saved = now
        tally = self.tally
        if _batching(self.config):
            from ..engine import batch_progress

            tally.batches = batch_progress(self.config)
        state: dict[str, Any] = {
            "pid": os.getpid(),
            "updated_at": time.time(),
            "total": tally.total,
            "done": tally.done,
            "passed": tally.passed,
            "failed": tally.failed,
            "errors": tally.errors,
            "spent_usd": round(tally.spent, 6),
            "in_flight": tally.calls()[0],
            "waiting": tally.calls()[1],
            "eta_s": tally.eta_s(now - self._started),
            "line": tally.line(now - self._started),
        }
        if tally.batches:
            state["batches"] = tally.batches
        try:
            ResultsFolder(folder).write_progress(state)
        except OSError:  # a progress file is a courtesy, never a reason to fail a run
            pass

    def _folder(self) -> Path | None:
        """The run's results folder, once the recorder opened it (at the first record); under
        ``--batch`` from the start (its batch journal is there)."""
        if _batching(self.config):
            from ..engine import results_dir

            chosen = results_dir(self.config)
            return chosen if chosen.is_dir() else None
        recorder = self.config.pluginmanager.get_plugin("llmbench-recorder")
        folder = getattr(recorder, "out_dir", None)
        return folder if isinstance(folder, Path) else None

    def _maybe_write(self) -> None:
        with self._lock:  # the main thread's reports and the batch ticker
            self._write_now()

    def _write_now(self) -> None:
        self._save()
        now = time.monotonic()
        if self.every_s <= 0 or self._started is None or self._last is None:
            return
        if not self.tally.total and not self.tally.done:
            return  # no eval item in this run: pytest's own progress says it all
        if now - self._last < self.every_s:
            return
        self._last = now
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is None:
            return
        writer = getattr(reporter, "_tw", None)
        if writer is not None and writer.width_of_current_line:
            writer.line()  # after -q's dots: a line of its own (ensure_newline misses them)
        reporter.write_line(self.tally.line(now - self._started), cyan=True)


def _batching(config: pytest.Config) -> bool:
    """Whether the run sends batches (asked of the options: the xdist controller collects no
    eval file)."""
    from ..engine import batch_asked

    return batch_asked(config)


def progress_every_s(config: pytest.Config) -> float:
    """The ``llmbench_progress_every_s`` ini value; by default 10 s in a terminal, 30 s else."""
    raw = config.getini("llmbench_progress_every_s")
    if raw in (None, ""):
        return TTY_EVERY_S if _in_a_terminal() else LOG_EVERY_S
    try:
        value = float(raw)
    except ValueError:
        raise pytest.UsageError(f"llmbench_progress_every_s: not a number: {raw!r}") from None
    if not 0 <= value < float("inf"):
        raise pytest.UsageError(f"llmbench_progress_every_s must be >= 0, got {raw!r}")
    return value


def _in_a_terminal() -> bool:
    return sys.stdout.isatty() and os.environ.get("CI") is None
