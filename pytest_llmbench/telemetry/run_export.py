"""The controller's trace export: each record's spans as its report arrives, the run's span at
the end.

Registered by the plugin on the controller (or the sole process without xdist) only when the
run exports a trace. The sender (and with it the OpenTelemetry SDK) is opened by the first
record that carries a ``trace``; the run's span takes the trace's ids from the records (every
process derives the same, :mod:`pytest_llmbench.engine.call_spans`), so a run that traced no
item sends nothing. An export that fails is said once, as a pytest warning naming the endpoint,
at the session's end; the run's end waits at most :data:`CLOSE_WAIT_S` seconds for the
collector.
"""

from __future__ import annotations

import threading
import time
import warnings
from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pytest

from .spans import item_spans, run_span

if TYPE_CHECKING:
    from ..config import OtelSettings
    from ..redact import Redactor
    from .export import SpanSender

__all__ = ["CLOSE_WAIT_S", "MISSING_EXTRA", "TraceExport", "TraceExportWarning", "missing_extra"]

#: The longest the run's end waits for the collector to take the last spans (seconds).
CLOSE_WAIT_S = 5.0


#: What a run exporting its trace without the SDK is told.
MISSING_EXTRA = "exporting a trace needs the otel extra: pip install 'pytest-llmbench[otel]'"


def missing_extra(find_spec: Callable[[str], object] | None = None) -> str | None:
    """Why this environment cannot export (the ``otel`` extra is not installed), or None;
    looked up without importing it."""
    from importlib.util import find_spec as importlib_find_spec

    find = find_spec or importlib_find_spec
    for name in ("opentelemetry.sdk", "opentelemetry.exporter.otlp.proto.http"):
        try:
            found = find(name)
        except ModuleNotFoundError:  # a parent package is missing
            found = None
        if found is None:
            return f"llmbench: {MISSING_EXTRA} ({name} is not installed)"
    return None


class TraceExportWarning(UserWarning):
    """The run's spans did not all reach the collector (the run itself is not affected)."""


class TraceExport:
    """Sends the run's spans (see the module's docstring)."""

    def __init__(self, config: pytest.Config, settings: OtelSettings | None) -> None:
        self.config = config
        #: None until the first traced record when the run's config was not built at configure
        #: (export turned on by an ``OTEL_*`` variable alone): then it is read from it.
        self.settings = settings
        self.start_ns = time.time_ns()
        self.outcomes: Counter[str] = Counter()
        #: The trace's id and the run span's, from the first traced record.
        self.ids: tuple[str, str] | None = None
        self._sender: SpanSender | None = None
        self._redactor: Redactor | None = None
        self._broken: str | None = None
        self._off = False  #: the run's config says export is off
        self._warming: threading.Thread | None = None
        self._lock = threading.Lock()
        self._ended = False  #: the session end began: no import thread starts

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        """The run's span starts with the session."""
        self.start_ns = time.time_ns()

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        """In a process that runs eval items, import the exporter (half a second) on a thread
        once the first calls wait on the network, instead of at the first record."""
        if self.settings is None or not any(
            item.get_closest_marker("llmbench") for item in session.items
        ):
            return
        from ..engine import get_runtime

        get_runtime(session.config).engine.when_calling(self._warm_up)

    def _warm_up(self) -> None:
        """On the engine's thread: start the imports, unless the session end began."""
        from .export import import_exporter

        with self._lock:
            if self._warming is None and not self._ended:
                self._warming = threading.Thread(
                    target=import_exporter, name="llmbench-otel-warm-up", daemon=True
                )
                self._warming.start()

    @pytest.hookimpl(trylast=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Send the spans of the report's record (an earlier attempt's are not sent)."""
        record = getattr(report, "llmbench_record", None)
        if not isinstance(record, dict) or not isinstance(record.get("trace"), dict):
            return
        if str(report.outcome) == "rerun":
            return
        self.outcomes[str(record.get("outcome"))] += 1
        try:
            trace = record["trace"]
            if self.ids is None:
                self.ids = (str(trace["trace_id"]), str(trace["parent_id"]))
            sender = self._open()
            if sender is not None and self.settings is not None:
                sender.send(item_spans(record, self.settings.content, self._redactor))
        except Exception as exc:  # the export never fails the run
            self._broken = self._broken or f"a record's spans could not be made ({exc!r})"

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        """Send the run's span, wait (bounded) for the collector, say once if spans were lost."""
        with self._lock:
            self._ended, warming = True, self._warming
        if warming is not None:
            warming.join(timeout=CLOSE_WAIT_S)  # never outlives the session
        sender, ids = self._sender, self.ids
        if sender is None or ids is None:
            self._warn(self._broken)
            return
        try:
            sender.send([self._run_span(ids, int(session.exitstatus))])
        except Exception as exc:
            self._broken = self._broken or f"the run's span could not be made ({exc!r})"
        sender.close(CLOSE_WAIT_S)
        self._warn(sender.failure or self._broken)

    def _open(self) -> SpanSender | None:
        if self._sender is None and self._broken is None and not self._off:
            with self._lock:
                warming = self._warming
            if warming is not None:  # one import at a time: the warm-up's, then ours
                warming.join(timeout=CLOSE_WAIT_S)
            try:
                self._sender = self._new_sender()
                self._off = self._sender is None
            except ImportError as exc:
                self._broken = f"{MISSING_EXTRA} ({exc})"
            except Exception as exc:  # a bad endpoint
                self._broken = f"the exporter could not start ({type(exc).__name__}: {exc})"
        return self._sender

    def _new_sender(self) -> SpanSender | None:
        import os

        from ..config import get_run_config
        from ..redact import Redactor
        from .export import open_sender

        run = get_run_config(self.config)
        settings = self.settings = self.settings or run.otel
        if settings is None:
            return None
        key_vars = [profile.api_key_env for profile in run.profiles.models.values()]
        self._redactor = Redactor.from_environ(os.environ, [var for var in key_vars if var])
        return open_sender(settings, _version())

    def _run_span(self, ids: tuple[str, str], exit_status: int) -> Any:
        from ..engine import session_state
        from ..provenance import git_info

        return run_span(
            trace_id=ids[0],
            span_id=ids[1],
            run_id=session_state(self.config)[0].name,
            start_ns=self.start_ns,
            end_ns=time.time_ns(),
            git=git_info(self.config.rootpath),
            outcomes=self.outcomes,
            exit_status=exit_status,
        )

    def _warn(self, why: str | None) -> None:
        if why is None:
            return
        message = f"llmbench: the run's trace was not fully exported: {why}; the run is unaffected"
        try:
            warnings.warn(TraceExportWarning(message), stacklevel=1)
        except TraceExportWarning:  # warnings are errors here (-W error): say it, do not fail
            reporter = self.config.pluginmanager.get_plugin("terminalreporter")
            if reporter is not None:
                reporter.write_line(message, yellow=True)


def _version() -> str:
    from importlib import metadata

    try:
        return metadata.version("pytest-llmbench")
    except metadata.PackageNotFoundError:
        return "unknown"
