"""Whole runs with ``--otel``: each record's ``trace`` holds its item's span and its calls (the
model's, a judge's, an agent's tool call and the sandbox command it ran), under -n 0 and -n 2
alike: one trace id everywhere, each item's span id derived from its node id, and the
``traceparent`` each model request carried naming its call span. Without export, no record has a
trace and nothing is kept.

The export itself is not what is tested here: OTEL_EXPORTER_OTLP_ENDPOINT names a port on
127.0.0.1 where nothing listens (a warning about it, once, is accepted).
"""

from __future__ import annotations

import socket
from typing import Any

import pytest
from conftest import Bench
from fakeserver import Rule

from pytest_llmbench.engine import call_spans
from pytest_llmbench.engine.call_spans import item_span_id

QUIZ = """
cases:
  - id: plain
    prompt: What is the capital of France?
    expected: Paris
  - id: judged
    prompt: Name a colour
    assert:
      - {type: llm-rubric, value: names a colour, judges: [fake2]}
"""
AGENT = """
kind: agent
tools: [run_command]
sandbox: off
cases:
  - id: command
    prompt: Run it.
    assert: [{type: tool-called, value: run_command}]
"""


def unused_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def script(bench: Bench) -> None:
    """The fake server's answers: the judge's verdict, the agent's command, then its answer."""
    bench.server.add_rule(Rule(model="fake-model-2", reply='{"score": 0.9, "reason": "fine"}'))
    bench.server.add_rule(Rule(match="capital", reply="Paris"))
    bench.server.add_rule(Rule(match_last="counted", reply="done"))
    command = {"name": "run_command", "arguments": {"command": "echo counted"}}
    bench.server.add_rule(Rule(match="Run it.", tool_calls=[command]))
    bench.eval_file("quiz", QUIZ)
    bench.eval_file("agent", AGENT)


def by_case(records: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {record["case_id"]: record for record in records}


@pytest.mark.slow
@pytest.mark.parametrize("workers", ["0", "2"])
def test_each_record_carries_its_items_span_and_calls(
    bench: Bench, monkeypatch: pytest.MonkeyPatch, workers: str
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", f"http://127.0.0.1:{unused_port()}")
    script(bench)
    bench.server.served_model = "fake-model-2026-11-01"  # the version the provider says served
    result = bench.run_subprocess("-n", workers, "--models=fake", "--otel")
    assert result.ret == 0, result.stdout.str()
    records = by_case(bench.records())
    traces = {case: record["trace"] for case, record in records.items()}
    assert set(traces) == {"plain", "judged", "command"}
    (trace_id,) = {trace["trace_id"] for trace in traces.values()}  # one trace, every process
    (run_span,) = {trace["parent_id"] for trace in traces.values()}
    assert len(trace_id) == 32 and len(run_span) == 16
    if workers == "2":  # the items really ran on both workers
        assert {record["worker"] for record in records.values()} == {"gw0", "gw1"}
    for case, trace in traces.items():
        nodeid = records[case]["nodeid"]
        assert trace["span_id"] == item_span_id(trace_id, nodeid), case
        assert trace["start_ns"] <= min(call["start_ns"] for call in trace["calls"])
        assert trace["end_ns"] >= max(call["end_ns"] for call in trace["calls"])

    def kinds(case: str) -> list[str]:
        return [call["kind"] for call in traces[case]["calls"]]

    assert kinds("plain") == ["chat"]
    assert kinds("judged") == ["chat", "judge"]
    assert kinds("command") == ["chat", "tool", "sandbox", "chat"]
    judge = traces["judged"]["calls"][1]
    assert (judge["attributes"]["model"], judge["name"]) == ("fake2", "openai/fake-model-2")
    served = {call["attributes"].get("response_model") for call in traces["judged"]["calls"]}
    assert served == {"fake-model-2026-11-01"}  # the chat's and the judge's
    tool, command = traces["command"]["calls"][1:3]
    assert (tool["name"], tool["attributes"]["tool"]) == ("run_command", "run_command")
    assert command["parent_id"] == tool["span_id"]
    assert (command["attributes"]["program"], command["attributes"]["exit_code"]) == ("echo", 0)

    # Each model request named its own call span as its parent, in the run's trace.
    model_spans = {
        call["span_id"]
        for trace in traces.values()
        for call in trace["calls"]
        if call["kind"] in ("chat", "judge")
    }
    sent = [request.headers["traceparent"].split("-") for request in bench.server.chat_requests()]
    assert {parts[1] for parts in sent} == {trace_id}
    assert {parts[2] for parts in sent} == model_spans


def test_without_export_no_record_has_a_trace_and_nothing_is_kept(bench: Bench) -> None:
    bench.server.add_rule(Rule(match="capital", reply="Paris"))
    bench.eval_file("quiz", QUIZ.split("  - id: judged")[0])
    bench.run("--models=fake").assert_outcomes(passed=1)
    (record,) = bench.records()
    assert record["trace"] is None
    assert call_spans.active() is None
    assert all("traceparent" not in request.headers for request in bench.server.chat_requests())


def test_an_in_process_run_with_export_stops_keeping_spans_when_it_ends(
    bench: Bench, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", f"http://127.0.0.1:{unused_port()}")
    bench.server.add_rule(Rule(match="capital", reply="Paris"))
    bench.eval_file("quiz", QUIZ.split("  - id: judged")[0])
    bench.run("--models=fake").assert_outcomes(passed=1)  # the variable alone turns it on
    (record,) = bench.records()
    assert [call["kind"] for call in record["trace"]["calls"]] == ["chat"]
    assert call_spans.active() is None  # disabled at the run's end


def test_a_plain_tests_calls_are_its_records_spans(
    bench: Bench, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", f"http://127.0.0.1:{unused_port()}")
    bench.pytester.makepyfile(
        test_plain="""
        def test_ask(llm):
            assert llm.complete("Say hi").text == "ok"
            assert llm.complete("Say bye").text == "ok"
        """
    )
    bench.run("--models=fake").assert_outcomes(passed=1)
    (record,) = bench.records()
    trace = record["trace"]
    assert trace["span_id"] == item_span_id(trace["trace_id"], record["nodeid"])
    assert [call["kind"] for call in trace["calls"]] == ["chat", "chat"]
    sent = {
        request.headers["traceparent"].split("-")[2] for request in bench.server.chat_requests()
    }
    assert sent == {call["span_id"] for call in trace["calls"]}
