"""A run's records as plain span values, named by the OpenTelemetry GenAI semantic conventions.

Pure: no OpenTelemetry import (:mod:`.export` turns a :class:`SpanSpec` into the SDK's span).
A record (:mod:`pytest_llmbench.results.record`) whose ``trace`` is set gives its item's span
and one child span per timed call in ``trace["calls"]``; a record without one (export off, an
older run) gives none. The run's own span, parent of every item's, comes from
:func:`run_span`.

Prompts, answers and assertion reasons go on spans only with ``content`` (``--otel-content``),
and always through a :class:`~pytest_llmbench.redact.Redactor`: the record is redacted already,
this is a second guard. Error messages (redacted, cut to 500 characters) are span statuses.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..redact import Redactor

__all__ = ["AttributeValue", "SpanEvent", "SpanSpec", "item_spans", "run_span"]

#: What an attribute may hold (the OpenTelemetry attribute types).
AttributeValue = str | int | float | bool | tuple[str, ...]

#: The longest error message a span status carries.
_MAX_ERROR_CHARS = 500
#: Call kinds that are model calls, and the ``gen_ai.operation.name`` of each.
_MODEL_OPERATIONS = {
    "chat": "chat",
    "judge": "chat",
    "user_sim": "chat",
    "embeddings": "embeddings",
}
#: Call attributes (our words) -> their GenAI semantic conventions' names, on model calls.
_MODEL_ATTRIBUTES = {
    "provider": "gen_ai.provider.name",
    "response_model": "gen_ai.response.model",
    "input_tokens": "gen_ai.usage.input_tokens",
    "output_tokens": "gen_ai.usage.output_tokens",
    "reasoning_tokens": "gen_ai.usage.reasoning.output_tokens",
    "cached_input_tokens": "gen_ai.usage.cache_read.input_tokens",
    "cache_write_tokens": "gen_ai.usage.cache_creation.input_tokens",
    "cache_hit": "llmbench.cache_hit",
    "cost_usd": "llmbench.cost_usd",
    "batched": "llmbench.batched",
}
#: Call attributes mapped elsewhere (or content, handled apart): not copied as ``llmbench.*``.
_HANDLED = {
    *_MODEL_ATTRIBUTES,
    "model",
    "model_id",
    "ttft_s",
    "finish_reason",
    "role",
    "tool",
    "call_id",
    "program",
    "exit_code",
    "error_kind",
    "input",
    "output",
    "command",
}


@dataclass(frozen=True)
class SpanEvent:
    """Something that happened at one moment of a span (an assertion's verdict)."""

    name: str
    time_ns: int
    attributes: Mapping[str, AttributeValue] = field(default_factory=dict)


@dataclass(frozen=True)
class SpanSpec:
    """One span as exported: ids in hex, times in nanoseconds since the epoch."""

    name: str
    trace_id: str  #: 32 hex digits
    span_id: str  #: 16 hex digits
    parent_id: str | None  #: None: a root span (the run's)
    start_ns: int
    end_ns: int
    kind: str = "internal"  #: ``internal`` or ``client`` (a call to another service)
    attributes: Mapping[str, AttributeValue] = field(default_factory=dict)
    events: tuple[SpanEvent, ...] = ()
    status: str = "unset"  #: ``unset``, ``ok`` or ``error``
    description: str | None = None  #: why, when ``status`` is ``error``


def run_span(
    trace_id: str,
    span_id: str,
    run_id: str,
    start_ns: int,
    end_ns: int,
    git: Mapping[str, Any] | None,
    outcomes: Mapping[str, int],
    exit_status: int,
) -> SpanSpec:
    """The run's span (``llmbench run``), root of the trace: the run id, the commit, how many
    items ended how, and the exit status (an error status when it is not 0)."""
    attributes: dict[str, AttributeValue] = {
        "llmbench.run_id": run_id,
        "deployment.environment": "eval",
        "deployment.environment.name": "eval",
        "llmbench.exit_status": exit_status,
        "llmbench.items": sum(outcomes.values()),
    }
    for outcome, count in sorted(outcomes.items()):
        attributes[f"llmbench.outcome.{outcome}"] = count
    if git and git.get("commit"):
        attributes["vcs.ref.head.revision"] = str(git["commit"])
    if git and git.get("dirty") is not None:
        attributes["llmbench.git.dirty"] = bool(git["dirty"])
    failed = exit_status != 0
    return SpanSpec(
        name="llmbench run",
        trace_id=trace_id,
        span_id=span_id,
        parent_id=None,
        start_ns=start_ns,
        end_ns=max(end_ns, start_ns),
        attributes=attributes,
        status="error" if failed else "ok",
        description=f"pytest exit status {exit_status}" if failed else None,
    )


def item_spans(
    record: Mapping[str, Any], content: bool, redactor: Redactor | None = None
) -> list[SpanSpec]:
    """The item's span and its calls' spans, or none when the record carries no ``trace``.

    ``content``: put the messages and the answer (redacted by ``redactor``, else by one
    reading the environment's secrets) on the item's and the model calls' spans.
    """
    trace = record.get("trace")
    if not isinstance(trace, Mapping):
        return []
    redact = redactor or Redactor.from_environ(_environ())
    item = _item_span(record, trace, content, redact)
    calls = [
        _call_span(call, item, content, redact)
        for call in trace.get("calls") or ()
        if isinstance(call, Mapping)
    ]
    return [item, *calls]


def _environ() -> Mapping[str, str]:
    import os

    return os.environ


def _item_span(
    record: Mapping[str, Any], trace: Mapping[str, Any], content: bool, redact: Redactor
) -> SpanSpec:
    outcome = str(record.get("outcome") or "")
    attributes = _scalars(
        {
            "test.case.name": record.get("nodeid"),
            "test.case.result.status": _result_status(outcome),
            "llmbench.case_id": record.get("case_id"),
            "llmbench.case_hash": record.get("case_hash"),
            "llmbench.suite": record.get("suite"),
            "llmbench.eval_file": record.get("eval_file"),
            "llmbench.model": record.get("model"),
            "gen_ai.request.model": record.get("model_id"),
            "llmbench.repeat": record.get("repeat"),
            "llmbench.outcome": outcome,
            "llmbench.verdict_source": record.get("verdict_source"),
            "llmbench.score": record.get("score"),
            "llmbench.threshold": record.get("threshold"),
            "llmbench.worker": record.get("worker"),
            "llmbench.cost_usd": record.get("cost_usd"),
            "llmbench.latency_s": record.get("latency_s"),
            "llmbench.cached": record.get("cached"),
        }
    )
    status, description = "ok", None
    if outcome == "error":
        attributes["error.type"] = str(record.get("error_kind") or "error")
        status, description = "error", _error_text(record.get("error"), redact)
    if content:
        attributes.update(_content(record.get("messages"), record.get("response"), redact))
    end_ns = int(trace["end_ns"])
    events = tuple(
        _evaluation_event(index, verdict, end_ns, content, redact)
        for index, verdict in enumerate(record.get("assertions") or ())
        if isinstance(verdict, Mapping)
    )
    return SpanSpec(
        name=f"eval {record.get('case_id')} {record.get('model')}",
        trace_id=str(trace["trace_id"]),
        span_id=str(trace["span_id"]),
        parent_id=str(trace["parent_id"]) if trace.get("parent_id") else None,
        start_ns=int(trace["start_ns"]),
        end_ns=max(end_ns, int(trace["start_ns"])),
        attributes=attributes,
        events=events,
        status=status,
        description=description,
    )


def _result_status(outcome: str) -> str | None:
    """``test.case.result.status``: pass or fail (an error fails; a skipped item has none)."""
    return {"passed": "pass", "failed": "fail", "error": "fail"}.get(outcome)


def _evaluation_event(
    index: int, verdict: Mapping[str, Any], time_ns: int, content: bool, redact: Redactor
) -> SpanEvent:
    """A ``gen_ai.evaluation.result`` event: one assertion's verdict."""
    if verdict.get("unchecked"):
        label = "unchecked"
    else:
        label = "pass" if verdict.get("passed") else "fail"
    attributes = _scalars(
        {
            "gen_ai.evaluation.name": verdict.get("type"),
            "gen_ai.evaluation.score.value": verdict.get("score"),
            "gen_ai.evaluation.score.label": label,
            "llmbench.assertion.index": index,
            "llmbench.assertion.weight": verdict.get("weight"),
            "llmbench.assertion.turn": verdict.get("turn"),
        }
    )
    if content and verdict.get("reason"):
        attributes["gen_ai.evaluation.explanation"] = redact.text(str(verdict["reason"]))
    return SpanEvent("gen_ai.evaluation.result", time_ns, attributes)


def _call_span(
    call: Mapping[str, Any], item: SpanSpec, content: bool, redact: Redactor
) -> SpanSpec:
    kind = str(call.get("kind") or "")
    raw = call.get("attributes") or {}
    name = str(call.get("name") or raw.get("model_id") or raw.get("tool") or kind)
    if kind in _MODEL_OPERATIONS:
        span_name, span_kind, attributes = _model_call(kind, name, raw, content, redact)
    elif kind in ("tool", "mcp"):
        span_name, span_kind = f"execute_tool {name}", "internal"
        attributes = _scalars(
            {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": raw.get("tool") or name,
                "gen_ai.tool.call.id": raw.get("call_id"),
                "gen_ai.tool.type": "extension" if kind == "mcp" else "function",
                "llmbench.role": kind,
            }
        )
        if content:
            attributes.update(_tool_content(raw.get("input"), raw.get("output"), redact))
    elif kind == "sandbox":
        span_name, span_kind = f"sandbox {name}", "internal"
        attributes = _scalars(
            {
                "process.executable.name": raw.get("program") or name,
                "process.exit.code": raw.get("exit_code"),
                "llmbench.role": kind,
            }
        )
        if content and raw.get("command"):
            attributes["process.command_line"] = redact.text(str(raw["command"]))
    else:
        span_name, span_kind = f"{kind or 'call'} {name}", "internal"
        attributes = {"llmbench.role": kind or "call"}
    attributes.update(
        _scalars({f"llmbench.{key}": value for key, value in raw.items() if key not in _HANDLED})
    )
    error = call.get("error")
    if error:
        attributes["error.type"] = str(raw.get("error_kind") or "error")
    start_ns = int(call.get("start_ns") or item.start_ns)
    return SpanSpec(
        name=span_name,
        trace_id=item.trace_id,
        span_id=str(call["span_id"]),
        parent_id=str(call.get("parent_id") or item.span_id),
        start_ns=start_ns,
        end_ns=max(int(call.get("end_ns") or start_ns), start_ns),
        kind=span_kind,
        attributes=attributes,
        status="error" if error else "unset",
        description=_error_text(error, redact) if error else None,
    )


def _model_call(
    kind: str, name: str, raw: Mapping[str, Any], content: bool, redact: Redactor
) -> tuple[str, str, dict[str, AttributeValue]]:
    """A model, judge, simulated-user or embeddings call: name, span kind and attributes."""
    operation = _MODEL_OPERATIONS[kind]
    model_id = str(raw.get("model_id") or name)
    attributes = _scalars(
        {
            "gen_ai.operation.name": operation,
            "gen_ai.request.model": model_id,
            "llmbench.model": raw.get("model"),
            "llmbench.role": raw.get("role") or kind,
            "llmbench.ttft_s": raw.get("ttft_s"),
            "gen_ai.response.time_to_first_chunk": raw.get("ttft_s"),
            **{otel: raw.get(ours) for ours, otel in _MODEL_ATTRIBUTES.items()},
        }
    )
    if raw.get("finish_reason"):
        attributes["gen_ai.response.finish_reasons"] = (str(raw["finish_reason"]),)
    if content:
        attributes.update(_call_content(raw.get("input"), raw.get("output"), redact))
    return f"{operation} {model_id}", "client", attributes


def _content(messages: Any, response: Any, redact: Redactor) -> dict[str, AttributeValue]:
    """``gen_ai.input.messages`` / ``gen_ai.output.messages`` (JSON, redacted) of a record."""
    found: dict[str, AttributeValue] = {}
    if isinstance(messages, Sequence) and not isinstance(messages, str) and messages:
        found["gen_ai.input.messages"] = redact.text(_messages_json(messages))
    if isinstance(response, str):
        found["gen_ai.output.messages"] = redact.text(_reply_json(response))
    return found


def _call_content(sent: Any, reply: Any, redact: Redactor) -> dict[str, AttributeValue]:
    """A call's ``input`` (the messages sent, JSON) and ``output`` (the reply's text)."""
    found: dict[str, AttributeValue] = {}
    if isinstance(sent, str) and sent:
        try:
            messages = json.loads(sent)
        except ValueError:
            messages = [{"role": "user", "content": sent}]
        if isinstance(messages, list):
            found["gen_ai.input.messages"] = redact.text(_messages_json(messages))
    if isinstance(reply, str):
        found["gen_ai.output.messages"] = redact.text(_reply_json(reply))
    return found


def _tool_content(arguments: Any, result: Any, redact: Redactor) -> dict[str, AttributeValue]:
    """A tool call's arguments (JSON) and result, as ``gen_ai.tool.call.*``."""
    found: dict[str, AttributeValue] = {}
    if isinstance(arguments, str):
        found["gen_ai.tool.call.arguments"] = redact.text(arguments)
    if isinstance(result, str):
        found["gen_ai.tool.call.result"] = redact.text(result)
    return found


def _messages_json(messages: Sequence[Any]) -> str:
    """Chat messages in the conventions' shape: ``[{"role", "parts": [{"type": "text",
    "content"}]}]`` (a message whose content is not text keeps it as it was sent)."""
    shaped = []
    for message in messages:
        if not isinstance(message, Mapping):
            continue
        body = message.get("content")
        parts = [{"type": "text", "content": body}] if isinstance(body, str) else body
        shaped.append({"role": message.get("role"), "parts": parts or []})
    return json.dumps(shaped, ensure_ascii=False, default=str)


def _reply_json(text: str) -> str:
    reply = {"role": "assistant", "parts": [{"type": "text", "content": text}]}
    return json.dumps([reply], ensure_ascii=False)


def _error_text(error: Any, redact: Redactor) -> str:
    text = redact.text(str(error or "error"))
    return text if len(text) <= _MAX_ERROR_CHARS else text[: _MAX_ERROR_CHARS - 3] + "..."


def _scalars(values: Mapping[str, Any]) -> dict[str, AttributeValue]:
    """The values an attribute can hold, None and others left out."""
    return {
        key: value
        for key, value in values.items()
        if isinstance(value, (str, int, float, bool)) and value is not None
    }
