"""The report's session-end hooks: :class:`ReportWriter` writes ``report.html`` once the recorder
summarized the run, and :class:`SessionEndWarmUp` imports what the session end needs (pandas, the
report's charts) on a background thread while the process waits for answers.

Kept apart from :mod:`.standalone`, which assembles the page and imports the charts and tables at
its top: the plugin registers these hooks in every pytest run, evals or not, and a run without
records never loads the page's modules.
"""

from __future__ import annotations

import gc
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from ..results_folder import RUN_FILE, ResultsFolder


class ReportWriter:
    """Writes ``report.html`` into the results folder at the end of a run (controller only)."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.path: Path | None = None
        self.error: str | None = None

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        """After the recorder wrote results.jsonl and run.json: write the report from the
        run's summary."""
        from ..results import RECORDER_KEY, SUMMARY_KEY

        recorder = self.config.stash.get(RECORDER_KEY, None)
        if recorder is None or not recorder.records or recorder.out_dir is None:
            return
        try:
            # run.json, or none when it is missing or unreadable (the report goes on without it)
            run_info = ResultsFolder(recorder.out_dir).read_json(RUN_FILE)
            summary = self.config.stash.get(SUMMARY_KEY, None)
            from .standalone import write_report

            self.path = write_report(
                recorder.records,
                recorder.out_dir,
                run_info=run_info,
                summary=summary,
                calibration=recorder.calibration,
            )
        except Exception as exc:  # a broken report must not change the run's exit status
            self.error = f"{type(exc).__name__}: {exc}"

    @pytest.hookimpl(trylast=True)  # the report's path last, after the leaderboard
    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        """Say where the report is, or why it is missing."""
        if self.path is not None:
            terminalreporter.write_line(f"llmbench: report {self.path}")
        elif self.error is not None:
            terminalreporter.write_line(f"llmbench: report not written: {self.error}", red=True)


class SessionEndWarmUp:
    """Imports what the session end needs (pandas, the report's charts) on a background thread
    while this process waits for answers, and joins it before the session end.

    The imports overlap waiting, never work: a process that runs eval items starts them once its
    engine's first calls are under way, their HTTP client imported and their requests sent (a run
    answered wholly from the cache makes none, and the thread would only slow it down by sharing
    the interpreter; started earlier, it delayed the first requests); a process that runs none (the controller
    of xdist workers, which relays reports) starts them at the run's first record. Where they did
    not run by the session end, the session end runs them itself, first.
    """

    def __init__(self) -> None:
        self._thread: threading.Thread | None = None
        #: ``_thread`` is set once started, and never after the session end began: the engine's
        #: thread starts it while the main thread may already be ending the session
        self._lock = threading.Lock()
        self._ended = False
        #: This process runs eval items (its engine's first call starts the imports).
        self._runs_items = False
        #: A record was reported: the session end will need the imports.
        self._records = False

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        """Once this process collected eval items, start the imports with its first calls."""
        if any(item.get_closest_marker("llmbench") for item in session.items):
            from ..engine import get_runtime

            self._runs_items = True
            get_runtime(session.config).engine.when_calling(self._start)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """On the run's first record, in a process that relays records it does not make, start
        the imports."""
        if getattr(report, "llmbench_record", None) is not None:
            self._records = True
            if not self._runs_items:
                self._start()

    def _start(self) -> None:
        with self._lock:
            if self._thread is not None or self._ended:
                return
            thread = threading.Thread(target=_warm_up, name="llmbench-warm-up", daemon=True)
            thread.start()
            self._thread = thread

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self) -> None:
        """Before the recorder summarizes the run: the imports are done (and frozen), and the
        thread never outlives the session (none starts once the session end began)."""
        with self._lock:
            self._ended = True
            thread = self._thread
        if thread is not None:
            thread.join()
        elif self._records:
            _import_session_end()


def _warm_up() -> None:
    # While calls are in flight, the engine's thread must get the interpreter back at once when
    # an answer arrives: hand it over every 0.5 ms instead of 5 (a first call's latency grew by
    # 4 ms on average, up to 13, with the default; 1 ms at this interval).
    interval = sys.getswitchinterval()
    sys.setswitchinterval(_WARM_UP_SWITCH_S)
    try:
        _import_session_end()
    finally:
        sys.setswitchinterval(interval)


#: The interpreter's switch interval while the imports run (seconds).
_WARM_UP_SWITCH_S = 0.0005


def _import_session_end() -> None:
    try:
        import pandas  # noqa: F401

        from ..results import summarize  # noqa: F401  (loads the summary module)
        from . import charts

        charts.chart_template()
        # What was imported lives as long as the process: keep the collector from walking it
        # in every full collection of the session end (about 0.1 s each).
        gc.freeze()
    except Exception:  # pragma: no cover  (the session end imports them again and reports)
        return
