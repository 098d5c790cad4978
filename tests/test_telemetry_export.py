"""Span values through the OpenTelemetry SDK (telemetry/export.py): into memory, over OTLP/HTTP
into a local receiver, and into a collector that is not there."""

from __future__ import annotations

import logging
import socket
from collections.abc import Sequence
from typing import Any

import pytest
from otlp_receiver import OtlpReceiver, otlp_receiver  # noqa: F401 - the fixture
from test_telemetry_spans import ITEM_SPAN, RUN_SPAN, TRACE_ID, redactor, traced_record

from pytest_llmbench.config import OtelSettings
from pytest_llmbench.telemetry.export import open_sender
from pytest_llmbench.telemetry.spans import item_spans, run_span


def specs() -> list[Any]:
    run = run_span(TRACE_ID, RUN_SPAN, "run-1", 100, 5_000, None, {"passed": 1}, 0)
    return [*item_spans(traced_record(), content=False, redactor=redactor()), run]


def settings(endpoint: str = "http://127.0.0.1:9/v1/traces", **changes: Any) -> OtelSettings:
    return OtelSettings(endpoint=endpoint, **changes)


def closed_port() -> int:
    """A port on 127.0.0.1 that nothing listens on (just released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_spans_reach_an_exporter_with_their_own_ids_times_and_events() -> None:
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from opentelemetry.trace import SpanKind, StatusCode

    memory = InMemorySpanExporter()
    sender = open_sender(settings(service_name="evals"), "9.9", exporter=memory)
    sender.send(specs())
    sender.close(wait_s=5)
    assert sender.failure is None
    spans = {span.name: span for span in memory.get_finished_spans()}
    assert set(spans) == {
        "eval france fake",
        "chat openai/fake-model",
        "chat openai/judge-model",
        "execute_tool search",
        "sandbox grep",
        "llmbench run",
    }
    item, run = spans["eval france fake"], spans["llmbench run"]
    assert item.context is not None and run.context is not None
    assert format(item.context.trace_id, "032x") == TRACE_ID
    assert format(item.context.span_id, "016x") == ITEM_SPAN
    assert item.parent is not None and format(item.parent.span_id, "016x") == RUN_SPAN
    assert run.parent is None
    assert (item.start_time, item.end_time) == (500, 4_000)
    assert [event.name for event in item.events] == ["gen_ai.evaluation.result"] * 3
    chat = spans["chat openai/fake-model"]
    assert chat.kind is SpanKind.CLIENT
    assert chat.parent is not None and format(chat.parent.span_id, "016x") == ITEM_SPAN
    assert spans["chat openai/judge-model"].status.status_code is StatusCode.ERROR
    assert item.resource.attributes["service.name"] == "evals"
    assert item.resource.attributes["service.version"] == "9.9"
    assert item.resource.attributes["deployment.environment.name"] == "eval"


def test_spans_arrive_over_otlp_http_gzipped_with_the_headers(
    otlp_receiver: OtlpReceiver,  # noqa: F811
) -> None:
    endpoint = otlp_receiver.base_url + "/v1/traces"
    chosen = settings(endpoint, headers=(("x-honeycomb-team", "team-key"),), compression="gzip")
    sender = open_sender(chosen, "1.0")
    sender.send(specs())
    sender.close(wait_s=10)
    assert sender.failure is None
    names = sorted(span.name for span in otlp_receiver.spans)
    assert names == sorted(span.name for span in specs())
    path, headers = otlp_receiver.requests[0]
    assert path == "/v1/traces"
    assert headers["x-honeycomb-team"] == "team-key"
    assert headers["content-encoding"] == "gzip"
    item = otlp_receiver.by_name("eval ")[0]
    assert (item.trace_id, item.span_id, item.parent_id) == (TRACE_ID, ITEM_SPAN, RUN_SPAN)
    assert item.attributes["llmbench.score"] == 0.75
    chat = otlp_receiver.by_name("chat openai/fake-model")[0]
    assert chat.attributes["gen_ai.response.finish_reasons"] == ["stop"]
    assert chat.kind == 3  # SPAN_KIND_CLIENT
    assert item.events[1].attributes["gen_ai.evaluation.score.label"] == "fail"
    assert item.scope == "pytest_llmbench"


def test_a_dead_collector_is_one_failure_naming_the_endpoint_and_no_log_noise(
    caplog: pytest.LogCaptureFixture,
) -> None:
    endpoint = f"http://127.0.0.1:{closed_port()}/v1/traces"
    chosen = settings(endpoint, headers=(("authorization", "Bearer hush-hush"),), timeout_s=1.0)
    sender = open_sender(chosen, "1.0")
    with caplog.at_level(logging.DEBUG):
        sender.send(specs())
        sender.close(wait_s=5)
    assert sender.failure is not None
    assert endpoint in sender.failure
    assert "hush-hush" not in sender.failure
    assert [r for r in caplog.records if r.name.startswith("opentelemetry")] == []


class Refusing:
    """An exporter that fails every export and counts the calls."""

    def __init__(self, raises: bool = False) -> None:
        self.calls = 0
        self.raises = raises

    def export(self, spans: Sequence[Any]) -> Any:
        from opentelemetry.sdk.trace.export import SpanExportResult

        self.calls += 1
        if self.raises:
            raise ConnectionError("refused")
        return SpanExportResult.FAILURE

    def shutdown(self) -> None:
        pass

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


@pytest.mark.parametrize("raises", [False, True])
def test_after_the_first_failure_spans_are_dropped_without_a_call(raises: bool) -> None:
    refusing = Refusing(raises)
    sender = open_sender(settings(), "1.0", exporter=refusing)
    sender._processor.force_flush()  # nothing queued: no call
    sender.send(specs())
    sender._processor.force_flush()
    assert refusing.calls == 1
    assert sender.failure is not None and "127.0.0.1:9" in sender.failure
    sender.send(specs())  # dropped before the processor
    sender.close(wait_s=5)
    assert refusing.calls == 1


def test_a_span_that_cannot_be_built_is_a_failure_not_an_exception() -> None:
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    broken = item_spans(traced_record(), content=False, redactor=redactor())[0]
    object.__setattr__(broken, "span_id", "not-hex")
    sender = open_sender(settings(), "1.0", exporter=InMemorySpanExporter())
    sender.send([broken])
    sender.close(wait_s=5)
    assert sender.failure is not None and "could not be built" in sender.failure


def test_a_collector_that_never_answers_holds_the_end_no_longer_than_the_wait() -> None:
    """A collector that takes the connection and says nothing (20 s timeout): the end waits the
    bound, then says the collector did not answer; it does not wait out the timeout."""
    import threading
    import time

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(listener.accept()[0])  # kept open, never answered
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        endpoint = f"http://127.0.0.1:{listener.getsockname()[1]}/v1/traces"
        sender = open_sender(settings(endpoint, timeout_s=20.0), "1.0")
        sender.send(specs())
        started = time.monotonic()
        sender.close(wait_s=1.0)
        waited = time.monotonic() - started
    finally:
        stop.set()
        thread.join()
        for conn in held:
            conn.close()
        listener.close()
    assert sender.failure is not None and "did not answer" in sender.failure
    assert waited < 10.0  # the bound (1 s) and the exporter's stop, never the 20 s timeout


class Slow:
    """An exporter that takes its time over each batch (a slow collector)."""

    def __init__(self) -> None:
        self.spans = 0

    def export(self, spans: Sequence[Any]) -> Any:
        import time

        from opentelemetry.sdk.trace.export import SpanExportResult

        time.sleep(0.05)
        self.spans += len(spans)
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        pass

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


def test_spans_dropped_by_a_full_queue_are_a_failure(monkeypatch: pytest.MonkeyPatch) -> None:
    """More spans than the processor may queue: those it drops are said, not lost silently."""
    from pytest_llmbench.telemetry import export

    monkeypatch.setattr(export, "MAX_QUEUED_SPANS", 16)
    slow = Slow()
    sender = open_sender(settings(), "1.0", exporter=slow)
    one = specs()
    for _ in range(40):
        sender.send(one)
    sender.close(wait_s=5)
    sent = 40 * len(one)
    assert slow.spans < sent
    assert sender.failure is not None and "dropped" in sender.failure
