"""Records into span values (telemetry/spans.py): names, ids, GenAI attributes, events, content."""

from __future__ import annotations

import json
from typing import Any

from pytest_llmbench.redact import Redactor
from pytest_llmbench.telemetry.spans import item_spans, run_span

TRACE_ID = "0af7651916cd43dd8448eb211c80319c"
RUN_SPAN = "b7ad6b7169203331"
ITEM_SPAN = "00f067aa0ba902b7"
SECRET = "sk-live-TOPSECRET-123456789"


def traced_record(**changes: Any) -> dict[str, Any]:
    """A record as the engine writes it with export on: a chat call, a judge call, a tool call
    and a sandbox command under that tool."""
    calls = [
        {
            "span_id": "1000000000000001",
            "parent_id": None,
            "kind": "chat",
            "name": "openai/fake-model",
            "start_ns": 1_000,
            "end_ns": 2_000,
            "error": None,
            "attributes": {
                "model": "fake",
                "model_id": "openai/fake-model",
                "provider": "openai",
                "input_tokens": 12,
                "output_tokens": 5,
                "reasoning_tokens": 2,
                "cached_input_tokens": 4,
                "cache_write_tokens": 1,
                "ttft_s": 0.25,
                "cache_hit": False,
                "finish_reason": "stop",
                "response_model": "fake-model-2026-11-01",
                "cost_usd": 0.001,
                "input": json.dumps([{"role": "user", "content": f"key {SECRET}"}]),
                "output": "Paris",
            },
        },
        {
            "span_id": "1000000000000002",
            "parent_id": None,
            "kind": "judge",
            "name": "openai/judge-model",
            "start_ns": 2_100,
            "end_ns": 2_900,
            "error": "judge said nothing",
            "attributes": {"model_id": "openai/judge-model", "error_kind": "judge"},
        },
        {
            "span_id": "1000000000000003",
            "parent_id": None,
            "kind": "mcp",
            "name": "search",
            "start_ns": 3_000,
            "end_ns": 3_500,
            "error": None,
            "attributes": {
                "tool": "search",
                "call_id": "call_1",
                "server": "docs",
                "input": '{"q": "capital"}',
                "output": f"found {SECRET}",
            },
        },
        {
            "span_id": "1000000000000004",
            "parent_id": "1000000000000003",
            "kind": "sandbox",
            "name": "grep",
            "start_ns": 3_100,
            "end_ns": 3_200,
            "error": None,
            "attributes": {"program": "grep", "exit_code": 1, "command": "grep x file"},
        },
    ]
    record: dict[str, Any] = {
        "nodeid": "capitals.eval.yaml::france[fake]",
        "suite": "capitals",
        "eval_file": "capitals.eval.yaml",
        "case_id": "france",
        "case_hash": "0123456789abcdef",
        "model": "fake",
        "model_id": "openai/fake-model",
        "repeat": 0,
        "outcome": "passed",
        "score": 0.75,
        "threshold": 0.5,
        "worker": "gw1",
        "error": None,
        "error_kind": None,
        "messages": [{"role": "user", "content": f"What is the capital? {SECRET}"}],
        "response": "Paris",
        "assertions": [
            {"type": "contains", "passed": True, "score": 1.0, "weight": 1.0, "reason": "found"},
            {"type": "llm_rubric", "passed": False, "score": 0.5, "weight": 1.0, "reason": "meh"},
            {"type": "latency", "passed": None, "score": None, "weight": 1.0, "unchecked": True},
        ],
        "trace": {
            "trace_id": TRACE_ID,
            "span_id": ITEM_SPAN,
            "parent_id": RUN_SPAN,
            "start_ns": 500,
            "end_ns": 4_000,
            "calls": calls,
        },
    }
    record.update(changes)
    return record


def redactor() -> Redactor:
    return Redactor.from_environ({"SOME_API_KEY": SECRET})


def test_a_record_without_trace_gives_no_span() -> None:
    assert item_spans(traced_record(trace=None), content=True, redactor=redactor()) == []


def test_the_item_span_is_a_child_of_the_run_span_with_the_case_attributes() -> None:
    item = item_spans(traced_record(), content=False, redactor=redactor())[0]
    assert (item.name, item.trace_id, item.span_id, item.parent_id) == (
        "eval france fake",
        TRACE_ID,
        ITEM_SPAN,
        RUN_SPAN,
    )
    assert (item.start_ns, item.end_ns, item.status) == (500, 4_000, "ok")
    assert item.attributes["test.case.name"] == "capitals.eval.yaml::france[fake]"
    assert item.attributes["test.case.result.status"] == "pass"
    assert item.attributes["llmbench.case_hash"] == "0123456789abcdef"
    assert item.attributes["gen_ai.request.model"] == "openai/fake-model"
    assert item.attributes["llmbench.score"] == 0.75
    assert item.attributes["llmbench.worker"] == "gw1"
    assert item.attributes["llmbench.repeat"] == 0
    assert "error.type" not in item.attributes


def test_each_assertion_is_an_evaluation_event() -> None:
    item = item_spans(traced_record(), content=False, redactor=redactor())[0]
    events = [(e.name, dict(e.attributes)) for e in item.events]
    assert [name for name, _ in events] == ["gen_ai.evaluation.result"] * 3
    first, second, third = (attributes for _, attributes in events)
    assert first["gen_ai.evaluation.name"] == "contains"
    assert first["gen_ai.evaluation.score.label"] == "pass"
    assert first["gen_ai.evaluation.score.value"] == 1.0
    assert second["gen_ai.evaluation.score.label"] == "fail"
    assert second["llmbench.assertion.index"] == 1
    assert third["gen_ai.evaluation.score.label"] == "unchecked"
    assert "gen_ai.evaluation.score.value" not in third
    assert all("gen_ai.evaluation.explanation" not in a for a in (first, second, third))
    assert {e.time_ns for e in item.events} == {4_000}


def test_an_errored_item_has_an_error_status_and_type() -> None:
    record = traced_record(outcome="error", error=f"boom {SECRET}", error_kind="timeout")
    item = item_spans(record, content=False, redactor=redactor())[0]
    assert item.status == "error"
    assert item.attributes["error.type"] == "timeout"
    assert item.attributes["test.case.result.status"] == "fail"
    assert item.description == "boom [REDACTED:SOME_API_KEY]"


def test_model_calls_follow_the_genai_conventions() -> None:
    _, chat, judge, *_ = item_spans(traced_record(), content=False, redactor=redactor())
    assert (chat.name, chat.kind, chat.parent_id) == ("chat openai/fake-model", "client", ITEM_SPAN)
    assert chat.attributes["gen_ai.operation.name"] == "chat"
    assert chat.attributes["gen_ai.provider.name"] == "openai"
    assert chat.attributes["gen_ai.request.model"] == "openai/fake-model"
    assert chat.attributes["gen_ai.usage.input_tokens"] == 12
    assert chat.attributes["gen_ai.usage.output_tokens"] == 5
    assert chat.attributes["gen_ai.usage.reasoning.output_tokens"] == 2
    assert chat.attributes["gen_ai.usage.cache_read.input_tokens"] == 4
    assert chat.attributes["gen_ai.usage.cache_creation.input_tokens"] == 1
    assert chat.attributes["gen_ai.response.finish_reasons"] == ("stop",)
    # the version the provider said served the call, beside the model id asked for
    assert chat.attributes["gen_ai.response.model"] == "fake-model-2026-11-01"
    assert "gen_ai.response.model" not in judge.attributes  # its provider named none
    assert "llmbench.response_model" not in chat.attributes
    assert chat.attributes["gen_ai.response.time_to_first_chunk"] == 0.25
    assert chat.attributes["llmbench.ttft_s"] == 0.25
    assert chat.attributes["llmbench.cache_hit"] is False
    assert chat.attributes["llmbench.cost_usd"] == 0.001
    assert chat.attributes["llmbench.role"] == "chat"
    assert (chat.start_ns, chat.end_ns, chat.status) == (1_000, 2_000, "unset")
    assert judge.name == "chat openai/judge-model"
    assert judge.attributes["llmbench.role"] == "judge"
    assert (judge.status, judge.description) == ("error", "judge said nothing")
    assert judge.attributes["error.type"] == "judge"


def test_tool_and_sandbox_calls_nest_as_recorded() -> None:
    *_, tool, sandbox = item_spans(traced_record(), content=False, redactor=redactor())
    assert (tool.name, tool.parent_id) == ("execute_tool search", ITEM_SPAN)
    assert tool.attributes["gen_ai.operation.name"] == "execute_tool"
    assert tool.attributes["gen_ai.tool.name"] == "search"
    assert tool.attributes["gen_ai.tool.call.id"] == "call_1"
    assert tool.attributes["gen_ai.tool.type"] == "extension"
    assert tool.attributes["llmbench.server"] == "docs"  # an attribute of our own, kept
    assert (sandbox.name, sandbox.parent_id) == ("sandbox grep", tool.span_id)
    assert sandbox.attributes["process.executable.name"] == "grep"
    assert sandbox.attributes["process.exit.code"] == 1
    assert "process.command_line" not in sandbox.attributes
    assert "gen_ai.tool.call.arguments" not in tool.attributes
    assert "gen_ai.tool.call.result" not in tool.attributes


def test_without_content_no_prompt_or_answer_is_on_any_span() -> None:
    spans = item_spans(traced_record(), content=False, redactor=redactor())
    text = repr([(span.attributes, [e.attributes for e in span.events]) for span in spans])
    assert "Paris" not in text
    assert "What is the" not in text
    assert "gen_ai.input.messages" not in text


def test_with_content_prompts_and_answers_arrive_redacted() -> None:
    item, chat, _, tool, sandbox = item_spans(traced_record(), content=True, redactor=redactor())
    sent = json.loads(str(item.attributes["gen_ai.input.messages"]))
    assert sent == [
        {
            "role": "user",
            "parts": [{"type": "text", "content": "What is the capital? [REDACTED:SOME_API_KEY]"}],
        }
    ]
    reply = json.loads(str(item.attributes["gen_ai.output.messages"]))
    assert reply[0]["parts"][0]["content"] == "Paris"
    assert "[REDACTED:SOME_API_KEY]" in str(chat.attributes["gen_ai.input.messages"])
    assert SECRET not in repr([span.attributes for span in (item, chat)])
    assert item.events[0].attributes["gen_ai.evaluation.explanation"] == "found"
    assert sandbox.attributes["process.command_line"] == "grep x file"
    assert tool.attributes["gen_ai.tool.call.arguments"] == '{"q": "capital"}'
    assert tool.attributes["gen_ai.tool.call.result"] == "found [REDACTED:SOME_API_KEY]"


def test_the_run_span_is_the_root_with_the_commit_and_counts() -> None:
    span = run_span(
        trace_id=TRACE_ID,
        span_id=RUN_SPAN,
        run_id="pytest-llmbench-1-abc",
        start_ns=10,
        end_ns=99,
        git={"commit": "deadbeef", "dirty": True},
        outcomes={"passed": 3, "failed": 1},
        exit_status=1,
    )
    assert (span.name, span.parent_id, span.span_id) == ("llmbench run", None, RUN_SPAN)
    assert span.attributes["llmbench.run_id"] == "pytest-llmbench-1-abc"
    assert span.attributes["vcs.ref.head.revision"] == "deadbeef"
    assert span.attributes["llmbench.git.dirty"] is True
    assert span.attributes["deployment.environment.name"] == "eval"
    assert span.attributes["llmbench.outcome.passed"] == 3
    assert span.attributes["llmbench.items"] == 4
    assert (span.status, span.description) == ("error", "pytest exit status 1")
    clean = run_span(TRACE_ID, RUN_SPAN, "r", 10, 99, None, {}, 0)
    assert clean.status == "ok"
    assert "vcs.ref.head.revision" not in clean.attributes


def test_a_solver_run_is_an_internal_span_of_its_item() -> None:
    solver = {
        "span_id": "1000000000000009",
        "parent_id": None,
        "kind": "solver",
        "name": "app.rag:solve",
        "start_ns": 600,
        "end_ns": 3_900,
        "error": None,
        "attributes": {"solver": "app.rag:solve"},
    }
    record = traced_record()
    record["trace"]["calls"] = [solver]
    _, span = item_spans(record, content=False, redactor=redactor())
    assert (span.name, span.kind, span.parent_id) == ("solver app.rag:solve", "internal", ITEM_SPAN)
    assert span.attributes["llmbench.role"] == "solver"
    assert span.attributes["llmbench.solver"] == "app.rag:solve"


def test_an_item_span_says_whose_verdict_its_outcome_is() -> None:
    """A person's label decided the outcome: the span says so beside it."""
    labelled = traced_record(outcome="failed", verdict_source="human", machine_outcome="passed")
    item = item_spans(labelled, content=False, redactor=redactor())[0]
    assert item.attributes["llmbench.outcome"] == "failed"
    assert item.attributes["llmbench.verdict_source"] == "human"
    machine = item_spans(traced_record(verdict_source="machine"), False, redactor())[0]
    assert machine.attributes["llmbench.verdict_source"] == "machine"
