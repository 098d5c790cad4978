"""A local OTLP/HTTP trace receiver for tests: what a collector would get from a run.

A real HTTP server on 127.0.0.1 (a free port, a thread per request) takes ``POST /v1/traces``,
decodes the protobuf ``ExportTraceServiceRequest`` (gzip and deflate aware) with
``opentelemetry-proto`` and keeps every span as a :class:`ReceivedSpan`: ids as hex, attribute
values as Python values, events, and its resource's attributes.

    with OtlpReceiver() as receiver:
        ...  # OTEL_EXPORTER_OTLP_ENDPOINT=receiver.base_url
        assert receiver.spans[0].name == "llmbench run"

Or use the ``otlp_receiver`` fixture (import it into a conftest.py or a test module).
"""

from __future__ import annotations

import gzip
import threading
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

__all__ = ["OtlpReceiver", "ReceivedEvent", "ReceivedSpan", "otlp_receiver"]


@dataclass(frozen=True)
class ReceivedEvent:
    name: str
    time_ns: int
    attributes: dict[str, Any]


@dataclass(frozen=True)
class ReceivedSpan:
    name: str
    trace_id: str
    span_id: str
    parent_id: str | None
    kind: int  #: the protobuf's SpanKind: 1 internal, 3 client
    start_ns: int
    end_ns: int
    attributes: dict[str, Any]
    events: list[ReceivedEvent]
    status_code: int  #: 0 unset, 1 ok, 2 error
    status_message: str
    resource: dict[str, Any]
    scope: str


@dataclass
class OtlpReceiver:
    """The server; :attr:`spans` and :attr:`requests` fill as exports arrive."""

    spans: list[ReceivedSpan] = field(default_factory=list)
    #: Each request's path and headers (lower-case names).
    requests: list[tuple[str, dict[str, str]]] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __enter__(self) -> OtlpReceiver:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # the name http.server calls
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                headers = {key.lower(): value for key, value in self.headers.items()}
                receiver._take(self.path, headers, body)
                status = 200 if self.path == "/v1/traces" else 404
                self.send_response(status)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>``: the value of ``OTEL_EXPORTER_OTLP_ENDPOINT``."""
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def _take(self, path: str, headers: dict[str, str], body: bytes) -> None:
        encoding = headers.get("content-encoding", "")
        if encoding == "gzip":
            body = gzip.decompress(body)
        elif encoding == "deflate":
            body = zlib.decompress(body)
        spans = decode(body) if path == "/v1/traces" else []
        with self._lock:
            self.requests.append((path, headers))
            self.spans.extend(spans)

    def by_name(self, prefix: str) -> list[ReceivedSpan]:
        """The spans whose name starts with ``prefix``."""
        with self._lock:
            return [span for span in self.spans if span.name.startswith(prefix)]


def decode(body: bytes) -> list[ReceivedSpan]:
    """The spans of one ``ExportTraceServiceRequest``."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    request = ExportTraceServiceRequest()
    request.ParseFromString(body)
    found = []
    for resource_spans in request.resource_spans:
        resource = _attributes(resource_spans.resource.attributes)
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                found.append(
                    ReceivedSpan(
                        name=span.name,
                        trace_id=span.trace_id.hex(),
                        span_id=span.span_id.hex(),
                        parent_id=span.parent_span_id.hex() or None,
                        kind=int(span.kind),
                        start_ns=span.start_time_unix_nano,
                        end_ns=span.end_time_unix_nano,
                        attributes=_attributes(span.attributes),
                        events=[
                            ReceivedEvent(e.name, e.time_unix_nano, _attributes(e.attributes))
                            for e in span.events
                        ],
                        status_code=int(span.status.code),
                        status_message=span.status.message,
                        resource=resource,
                        scope=scope_spans.scope.name,
                    )
                )
    return found


def _attributes(pairs: Any) -> dict[str, Any]:
    return {pair.key: _value(pair.value) for pair in pairs}


def _value(value: Any) -> Any:
    which = value.WhichOneof("value")
    if which == "array_value":
        return [_value(item) for item in value.array_value.values]
    if which == "kvlist_value":
        return _attributes(value.kvlist_value.values)
    return getattr(value, which) if which else None


@pytest.fixture
def otlp_receiver() -> Iterator[OtlpReceiver]:
    """A running receiver, stopped after the test."""
    with OtlpReceiver() as receiver:
        yield receiver
