"""Sending span values to an OpenTelemetry collector over OTLP/HTTP (the ``otel`` extra).

The SDK is imported when a :class:`SpanSender` is made, never at import. Each
:class:`~.spans.SpanSpec` becomes the SDK's ``ReadableSpan`` with its own ids and times and is
handed to a ``BatchSpanProcessor``, which sends batches from its thread through the
``OTLPSpanExporter``. The exporter is guarded (:class:`_Guard`): an export that fails or raises
marks the sender failed, and from then on every batch is dropped at once, so a dead collector
costs the run one timeout at most; the SDK's own log lines about it are silenced, and the
sender's owner says it once (:attr:`SpanSender.failure`). Nothing here raises into the run.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, cast

from .spans import SpanSpec

if TYPE_CHECKING:
    from ..config import OtelSettings

__all__ = ["SpanSender", "import_exporter", "open_sender"]

#: The SDK's loggers that report a failed export; the sender says it once instead.
_QUIET_LOGGERS = (
    "opentelemetry.exporter.otlp.proto.http.trace_exporter",
    "opentelemetry.exporter.otlp.proto.http._common",
    "opentelemetry.exporter.otlp.common.http",
    "opentelemetry.sdk._shared_internal",
    "opentelemetry.sdk.trace.export",
)


#: Spans a run may have waiting for the collector before the processor drops new ones (the
#: SDK's default, 2048, is a few hundred items: a slow collector lost spans of a large run).
MAX_QUEUED_SPANS = 65_536


class _Silence(logging.Filter):
    """Drops every record of the loggers it is added to; one that says the processor's queue is
    full marks the guard failed (those spans are lost, and the SDK says so only there)."""

    def __init__(self, guard: _Guard) -> None:
        super().__init__()
        self._guard = guard

    def filter(self, record: logging.LogRecord) -> bool:
        if str(record.msg).startswith("Queue full"):
            self._guard.fail(
                f"the collector at {self._guard.endpoint} took spans slower than the run made "
                f"them: more than {MAX_QUEUED_SPANS} waited, and later ones were dropped"
            )
        return False


class SpanSender:
    """Spans into a batch processor; :meth:`close` sends what is left within a bounded wait."""

    def __init__(self, processor: Any, guard: _Guard, resource: Any, scope: Any) -> None:
        self._processor = processor
        self._guard = guard
        self._resource = resource
        self._scope = scope
        self._silence = _Silence(guard)
        for name in _QUIET_LOGGERS:
            logging.getLogger(name).addFilter(self._silence)

    @property
    def failure(self) -> str | None:
        """Why spans were lost (the first failed export, or the sender's own error), else None."""
        return self._guard.failure

    def send(self, specs: Iterable[SpanSpec]) -> None:
        """Queue ``specs`` for export (dropped once an export failed)."""
        if self._guard.failure is not None:
            return
        try:
            for spec in specs:
                self._processor.on_end(_readable(spec, self._resource, self._scope))
        except Exception as exc:  # a span we cannot build must not fail the run
            self._guard.fail(f"a span could not be built ({type(exc).__name__}: {exc})")

    def close(self, wait_s: float) -> None:
        """Send what is queued, waiting at most ``wait_s`` seconds (and a second for the
        exporter to stop), then leave: an export still hanging on the collector is given up."""
        # The processor's shutdown waits for its thread as long as an export takes (up to the
        # OTLP timeout, retries included): it runs on a thread of its own, and past ``wait_s``
        # the guard gives up, which stops the exporter's retries and drops the rest.
        timer = threading.Timer(wait_s, self._guard.give_up)
        timer.daemon = True
        timer.start()
        closing = threading.Thread(target=self._shutdown, name="llmbench-otel-close", daemon=True)
        closing.start()
        closing.join(wait_s + 1.0)
        timer.cancel()
        if closing.is_alive():
            self._guard.fail(
                f"the collector at {self._guard.endpoint} did not answer before the run ended"
            )
        for name in _QUIET_LOGGERS:
            logging.getLogger(name).removeFilter(self._silence)

    def _shutdown(self) -> None:
        try:
            self._processor.shutdown()
            self._guard.settle(wait_s=1.0)
        except Exception as exc:  # never raise into the run's end
            self._guard.fail(f"the exporter did not shut down ({type(exc).__name__})")


def open_sender(
    settings: OtelSettings, service_version: str, exporter: Any | None = None
) -> SpanSender:
    """A sender to ``settings.endpoint`` (or to ``exporter``, an SDK ``SpanExporter``: tests
    pass an in-memory one)."""
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace.export import BatchSpanProcessor
    from opentelemetry.sdk.util.instrumentation import InstrumentationScope

    if exporter is None:
        exporter = _otlp_exporter(settings)
    guard = _Guard(exporter, settings.shown_endpoint)
    resource = Resource.create(
        {
            "service.name": settings.service_name,
            "service.version": service_version,
            "deployment.environment": "eval",
            "deployment.environment.name": "eval",
        }
    )
    scope = InstrumentationScope("pytest_llmbench", service_version)
    # The guard is an exporter by its methods (a subclass would import the SDK at import).
    queued = MAX_QUEUED_SPANS
    processor = BatchSpanProcessor(
        cast("Any", guard), max_queue_size=queued, max_export_batch_size=min(512, queued)
    )
    return SpanSender(processor, guard, resource, scope)


def import_exporter() -> None:
    """Import what :func:`open_sender` needs (the SDK, the exporter and its HTTP client),
    ahead of it; an import that fails is left for :func:`open_sender` to report."""
    try:
        import opentelemetry.exporter.otlp.proto.http.trace_exporter
        import opentelemetry.sdk.resources
        import opentelemetry.sdk.trace.export  # noqa: F401
        import requests  # noqa: F401 - the exporter's transport imports it when made
    except Exception:  # the extra is missing: open_sender says so
        return


def _otlp_exporter(settings: OtelSettings) -> Any:
    from opentelemetry.exporter.otlp.proto.http import Compression
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    compression = {
        "gzip": Compression.Gzip,
        "deflate": Compression.Deflate,
    }.get(settings.compression, Compression.NoCompression)
    return OTLPSpanExporter(
        endpoint=settings.endpoint,
        headers=dict(settings.headers),
        timeout=settings.timeout_s,
        compression=compression,
    )


class _Guard:
    """Wraps the real exporter: the first failed export is remembered (naming the endpoint,
    never a header) and every later batch is dropped without a call."""

    def __init__(self, exporter: Any, endpoint: str) -> None:
        self._exporter = exporter
        self.endpoint = endpoint  #: as messages show it (no user, password or query)
        self._lock = threading.Lock()
        self._idle = threading.Event()
        self._idle.set()
        self.failure: str | None = None
        self._closed = False

    def fail(self, why: str) -> None:
        """Remember the first reason spans were lost."""
        with self._lock:
            if self.failure is None:
                self.failure = why

    def export(self, spans: Sequence[Any]) -> Any:
        from opentelemetry.sdk.trace.export import SpanExportResult

        if self.failure is not None:
            return SpanExportResult.FAILURE
        self._idle.clear()
        try:
            result = self._exporter.export(spans)
        except Exception as exc:  # the SDK must not see it either
            result, detail = SpanExportResult.FAILURE, f" ({type(exc).__name__})"
        else:
            detail = ""
        finally:
            self._idle.set()
        if result is not SpanExportResult.SUCCESS:
            self.fail(f"the collector at {self.endpoint} did not take the spans{detail}")
        return result

    def give_up(self) -> None:
        """The run's end waited long enough: spans not sent yet are lost."""
        if not self._idle.is_set():
            self.fail(f"the collector at {self.endpoint} did not answer before the run ended")
        else:
            self.fail(f"the spans for {self.endpoint} were not sent before the run ended")
        self.shutdown()

    def settle(self, wait_s: float) -> None:
        """After shutdown: an export still running lost its spans."""
        if not self._idle.wait(wait_s):
            self.fail(f"the collector at {self.endpoint} did not answer before the run ended")

    def shutdown(self) -> None:
        """Stop the exporter (once: it also ends an export's retries)."""
        with self._lock:
            done, self._closed = self._closed, True
        if not done:
            self._exporter.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return bool(self._exporter.force_flush(timeout_millis))


def _readable(spec: SpanSpec, resource: Any, scope: Any) -> Any:
    """The SDK's finished span for ``spec``."""
    from opentelemetry.sdk.trace import Event, ReadableSpan
    from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags

    trace_id = int(spec.trace_id, 16)
    flags = TraceFlags(TraceFlags.SAMPLED)
    context = SpanContext(trace_id, int(spec.span_id, 16), is_remote=False, trace_flags=flags)
    parent = None
    if spec.parent_id:
        parent = SpanContext(trace_id, int(spec.parent_id, 16), is_remote=False, trace_flags=flags)
    codes = {"ok": StatusCode.OK, "error": StatusCode.ERROR}
    code = codes.get(spec.status, StatusCode.UNSET)
    status = Status(code, spec.description if code is StatusCode.ERROR else None)
    events = [Event(event.name, dict(event.attributes), event.time_ns) for event in spec.events]
    return ReadableSpan(
        name=spec.name,
        context=context,
        parent=parent,
        resource=resource,
        attributes=dict(spec.attributes),
        events=events,
        kind=SpanKind.CLIENT if spec.kind == "client" else SpanKind.INTERNAL,
        status=status,
        start_time=spec.start_ns,
        end_time=spec.end_ns,
        instrumentation_scope=scope,
    )
