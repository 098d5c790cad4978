"""Eval runs exporting their trace end to end: the real OTLP/HTTP exporter into a local receiver
(tests/otlp_receiver.py) that decodes the protobuf, with and without xdist workers; a collector
that is not there; bad ``OTEL_*`` variables; content; and no OpenTelemetry import when off."""

from __future__ import annotations

import socket
import time

import pytest
from conftest import FAKE_KEY, FAKE_KEY_ENV, TWO_CAPITALS, Bench, Rule
from otlp_receiver import OtlpReceiver, ReceivedSpan, otlp_receiver  # noqa: F401 - the fixture

pytestmark = pytest.mark.slow

#: A case whose prompt holds the fake provider's key: it must reach no span unredacted.
LEAKY = f"""
cases:
  - id: leaky
    prompt: "What is the capital of France? (key {FAKE_KEY})"
    expected: Paris
    assert: [contains]
"""


@pytest.fixture
def traced(bench: Bench, otlp_receiver: OtlpReceiver, monkeypatch: pytest.MonkeyPatch) -> Bench:  # noqa: F811
    """A project whose runs send their spans to the receiver."""
    bench.server.add_rule(Rule(match="France", reply="Paris"))
    bench.server.add_rule(Rule(match="Japan", reply="Tokyo"))
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", otlp_receiver.base_url)
    return bench


def one_trace(receiver: OtlpReceiver, items: int) -> tuple[ReceivedSpan, list[ReceivedSpan]]:
    """The run's span and its item spans, checked to form one tree of one trace."""
    spans = receiver.spans
    assert len({span.trace_id for span in spans}) == 1
    (run,) = receiver.by_name("llmbench run")
    assert run.parent_id is None
    item_spans = receiver.by_name("eval ")
    assert len(item_spans) == items
    assert {span.parent_id for span in item_spans} == {run.span_id}
    item_ids = {span.span_id for span in item_spans}
    calls = [span for span in spans if span not in item_spans and span is not run]
    assert calls, "every item made a model call"
    # A call nests under its item, or under another call of it (a command under its tool).
    call_ids = {call.span_id for call in calls}
    assert all(call.parent_id in item_ids | call_ids for call in calls)
    assert any(call.parent_id in item_ids for call in calls)
    return run, item_spans


def check_items(run: ReceivedSpan, item_spans: list[ReceivedSpan], receiver: OtlpReceiver) -> None:
    assert run.attributes["llmbench.outcome.passed"] == 2
    assert run.attributes["deployment.environment.name"] == "eval"
    assert run.resource["service.name"] == "pytest-llmbench"
    assert {span.attributes["llmbench.case_id"] for span in item_spans} == {"france", "japan"}
    for item in item_spans:
        assert item.attributes["test.case.result.status"] == "pass"
        assert item.attributes["gen_ai.request.model"] == "openai/fake-model"
        assert run.start_ns <= item.start_ns <= item.end_ns <= run.end_ns
        (event,) = item.events
        assert event.name == "gen_ai.evaluation.result"
        assert event.attributes["gen_ai.evaluation.name"] == "contains"
        assert event.attributes["gen_ai.evaluation.score.label"] == "pass"
    chats = receiver.by_name("chat openai/fake-model")
    assert len(chats) == 2
    for chat in chats:
        assert chat.attributes["gen_ai.operation.name"] == "chat"
        assert chat.attributes["gen_ai.usage.input_tokens"] > 0
        assert chat.attributes["gen_ai.usage.output_tokens"] > 0
        assert "gen_ai.input.messages" not in chat.attributes


def test_a_run_exports_one_trace_rooted_at_the_run_span(
    traced: Bench,
    otlp_receiver: OtlpReceiver,  # noqa: F811
) -> None:
    traced.eval_file("capitals", TWO_CAPITALS)
    traced.run("--models=fake", "--otel").assert_outcomes(passed=2)
    run, item_spans = one_trace(otlp_receiver, items=2)
    check_items(run, item_spans, otlp_receiver)
    records = traced.records()
    assert {r["trace"]["span_id"] for r in records} == {s.span_id for s in item_spans}
    assert {r["trace"]["trace_id"] for r in records} == {run.trace_id}


def test_under_two_workers_every_span_joins_the_run_trace(
    traced: Bench,
    otlp_receiver: OtlpReceiver,  # noqa: F811
) -> None:
    traced.eval_file("capitals", TWO_CAPITALS)
    traced.run_subprocess("--models=fake", "-n", "2").assert_outcomes(passed=2)
    run, item_spans = one_trace(otlp_receiver, items=2)
    check_items(run, item_spans, otlp_receiver)
    assert {span.attributes["llmbench.worker"] for span in item_spans} <= {"gw0", "gw1"}


def test_judge_tool_and_sandbox_calls_nest_under_their_items(
    bench: Bench,
    otlp_receiver: OtlpReceiver,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from test_trace_capture import script

    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", otlp_receiver.base_url)
    script(bench)  # a plain case, a judged one, an agent's command
    bench.run("--models=fake", "--otel").assert_outcomes(passed=3)
    _, item_spans = one_trace(otlp_receiver, items=3)
    items = {span.attributes["llmbench.case_id"]: span for span in item_spans}
    (judge,) = otlp_receiver.by_name("chat openai/fake-model-2")
    assert judge.parent_id == items["judged"].span_id
    assert judge.attributes["llmbench.role"] == "judge"
    assert judge.attributes["llmbench.model"] == "fake2"
    (verdict,) = items["judged"].events
    assert verdict.attributes["gen_ai.evaluation.name"] == "llm-rubric"
    assert verdict.attributes["gen_ai.evaluation.score.value"] == 0.9
    (tool,) = otlp_receiver.by_name("execute_tool ")
    assert (tool.name, tool.parent_id) == ("execute_tool run_command", items["command"].span_id)
    assert tool.attributes["gen_ai.tool.type"] == "function"
    assert tool.attributes["gen_ai.tool.call.id"]
    (command,) = otlp_receiver.by_name("sandbox ")
    assert (command.name, command.parent_id) == ("sandbox echo", tool.span_id)
    assert command.attributes["process.exit.code"] == 0
    assert tool.start_ns <= command.start_ns <= command.end_ns <= tool.end_ns
    steps = [s for s in otlp_receiver.by_name("chat ") if s.parent_id == items["command"].span_id]
    assert len(steps) == 2  # the agent's two model steps, around the tool call


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


#: Our warning made an error: the run still passes, and says it on the terminal instead.
STRICT = ("-W", "error::pytest_llmbench.telemetry.TraceExportWarning")


@pytest.mark.parametrize("strict", [False, True])
def test_an_unreachable_collector_warns_once_and_the_run_ends_promptly(
    bench: Bench, monkeypatch: pytest.MonkeyPatch, strict: bool
) -> None:
    bench.server.add_rule(Rule(match="France", reply="Paris"))
    bench.server.add_rule(Rule(match="Japan", reply="Tokyo"))
    endpoint = f"http://127.0.0.1:{closed_port()}"
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", "authorization=Bearer%20very-private")
    # The exporter's own retries would wait 31 s within this timeout; the run's end does not.
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "60000")
    bench.eval_file("capitals", TWO_CAPITALS)
    started = time.monotonic()
    result = bench.run("--models=fake", *(STRICT if strict else ()))
    elapsed = time.monotonic() - started
    result.assert_outcomes(passed=2, warnings=0 if strict else 1)
    assert result.ret == 0
    output = result.stdout.str()
    assert output.count("the run's trace was not fully exported") == 1
    assert f"{endpoint}/v1/traces" in output
    assert "very-private" not in output
    assert "Failed to export" not in output  # the SDK's own lines are silenced
    assert elapsed < 25


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("OTEL_EXPORTER_OTLP_TIMEOUT", "soon"),
        ("OTEL_EXPORTER_OTLP_ENDPOINT", "localhost:4318"),
        ("OTEL_EXPORTER_OTLP_COMPRESSION", "brotli"),
    ],
)
def test_a_malformed_otel_variable_is_a_usage_error_naming_it(
    bench: Bench, monkeypatch: pytest.MonkeyPatch, name: str, value: str
) -> None:
    monkeypatch.setenv(name, value)
    bench.eval_file("capitals", TWO_CAPITALS)
    result = bench.run("--models=fake", "--otel")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert name in result.stderr.str()


@pytest.mark.parametrize("content", [False, True])
def test_content_only_with_otel_content_and_redacted(
    traced: Bench,
    otlp_receiver: OtlpReceiver,  # noqa: F811
    content: bool,
) -> None:
    traced.eval_file("leaky", LEAKY)
    flags = ["--otel-content"] if content else []
    traced.run("--models=fake", "--otel", *flags).assert_outcomes(passed=1)
    (item,) = otlp_receiver.by_name("eval leaky")
    (chat,) = otlp_receiver.by_name("chat ")
    everything = repr(
        [(s.attributes, [e.attributes for e in s.events]) for s in otlp_receiver.spans]
    )
    assert FAKE_KEY not in everything
    if not content:
        assert "gen_ai.input.messages" not in everything
        assert "gen_ai.output.messages" not in everything
        assert "capital of France" not in everything
        return
    marker = f"[REDACTED:{FAKE_KEY_ENV}]"
    for span in (item, chat):
        assert "capital of France" in span.attributes["gen_ai.input.messages"]
        assert marker in span.attributes["gen_ai.input.messages"]
        assert "Paris" in span.attributes["gen_ai.output.messages"]
    assert item.events[0].attributes.get("gen_ai.evaluation.explanation")


PROBE = """
import sys


def pytest_unconfigure(config):
    loaded = sorted(name for name in sys.modules if name.startswith("opentelemetry"))
    print("OTEL-MODULES", len(loaded))
"""


@pytest.mark.parametrize("on", [False, True])
def test_a_run_without_otel_never_imports_opentelemetry(
    traced: Bench, monkeypatch: pytest.MonkeyPatch, on: bool
) -> None:
    if not on:
        monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT")
    traced.pytester.makeconftest(PROBE)
    traced.eval_file("capitals", TWO_CAPITALS)
    result = traced.run_subprocess("--models=fake", "-s")
    result.assert_outcomes(passed=2)
    # On: proof that the probe sees the SDK once it is loaded.
    assert ("OTEL-MODULES 0" in result.stdout.str()) is not on
