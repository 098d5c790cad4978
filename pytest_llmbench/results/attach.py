"""From a finished phase of an item to its record on the ``TestReport``.

Runs inside the ``pytest_runtest_makereport`` wrapper on the process that ran the item. Eval
items get a record after the call phase, or after a failed/skipped setup (a provider error is an
``error`` outcome). Plain tests get one when they used ``llm`` or ``record_score``. Reports of
items that touched our fixtures are scrubbed of secrets before anything prints or stores them.
The record's headline numbers also become the item's user properties, which JUnit XML writes
as ``<property>`` elements of the test case.

The wrapper runs for every item of every run: it needs the engine's runtime only where one was
made (nothing of ours ran in a process without one), and never loads it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from ..engine import RUNTIME_KEY, STOPPED_KEY
from ..models import ItemError, Usage
from .item_record import completion_fields, eval_record
from .record import build_record, file_field, utc_now, worker_id
from .review_run import apply_labels
from .state import (
    EVAL_RESULT_KEY,
    PLAIN_STATE_KEY,
    ChatLog,
    EvalFailure,
    EvalResult,
    PlainTestState,
)

if TYPE_CHECKING:
    from ..engine import Runtime


def attach_record(
    item: pytest.Item, call: pytest.CallInfo[None], report: pytest.TestReport
) -> None:
    """Put the item's record on ``report`` when this phase finishes the item."""
    runtime = item.config.stash.get(RUNTIME_KEY, None)
    if runtime is None:
        return  # nothing of ours ran in this process
    result = item.stash.get(EVAL_RESULT_KEY, None)
    if result is not None:
        record = _eval_record(item, result, call, report, runtime)
    else:
        record = _plain_record(item, call, report, runtime)
    if record is not None:
        # People's labels that hold for its answer decide its verdict (and the report's).
        labelled = apply_labels(item.config, record, report)
        if labelled is not record:  # a label's comment is text typed by a person
            record = runtime.redactor.value(labelled)
        report.llmbench_record = record  # type: ignore[attr-defined]
        _add_properties(item, report, record)
        activity = runtime.activity()
        if activity is not None:
            # For the controller's progress line: what this process's engine is doing now
            # (once per item is often enough).
            report.llmbench_activity = list(activity)  # type: ignore[attr-defined]
    if report.when == "teardown" and PLAIN_STATE_KEY in item.stash:
        # A rerun (pytest-rerunfailures) is a new attempt: its calls are its own.
        del item.stash[PLAIN_STATE_KEY]
    # Last: building the record may replace the failure text (a provider error's message).
    _scrub(report, runtime)


#: Record fields that become JUnit XML properties, named ``llmbench_<field>``, in this order.
PROPERTY_FIELDS: tuple[str, ...] = (
    "model",
    "score",
    "threshold",
    "cost_usd",
    "judge_cost_usd",
    "input_tokens",
    "output_tokens",
    "reasoning_tokens",
    "cached_input_tokens",
    "latency_s",
    "ttft_s",
    "transport_retries",
    "cached",
    "batched",
    "batch_id",
)


def record_properties(record: dict[str, Any]) -> list[tuple[str, object]]:
    """The user properties of ``record``: ``(llmbench_<field>, value)`` for each field with a value.

    Numbers stay numbers; booleans become ``"true"``/``"false"`` (junitxml writes ``str(value)``,
    and CI parsers read lowercase booleans).
    """
    return [
        (f"llmbench_{name}", _property_value(record.get(name)))
        for name in PROPERTY_FIELDS
        if record.get(name) is not None
    ]


def _property_value(value: Any) -> object:
    if isinstance(value, bool):
        return "true" if value else "false"
    return value


def _add_properties(item: pytest.Item, report: pytest.TestReport, record: dict[str, Any]) -> None:
    properties = record_properties(record)
    # junitxml writes the properties of the *teardown* report, which pytest builds from
    # ``item.user_properties`` on the process that ran the item; so they cross xdist with it.
    # The report of this phase gets them too, as ``record_property`` would have given them.
    # A rerun's attempt replaces the earlier attempt's.
    ours = {f"llmbench_{name}" for name in PROPERTY_FIELDS}
    item.user_properties[:] = [p for p in item.user_properties if p[0] not in ours]
    item.user_properties.extend(properties)
    report.user_properties.extend(properties)


def _eval_record(
    item: pytest.Item,
    result: EvalResult,
    call: pytest.CallInfo[None],
    report: pytest.TestReport,
    runtime: Runtime,
) -> Any:
    if report.when == "setup" and report.passed:
        return None
    if report.when == "teardown":
        return None
    outcome, error = _eval_outcome(result, call, report)
    repeat = runtime.run.repeat
    record = eval_record(
        result,
        outcome,
        error,
        root=item.config.rootpath,
        worker=worker_id(item.config),
        samples_planned=repeat if repeat > 1 else None,
        stopped_early=outcome == "skipped" and STOPPED_KEY in item.stash,
    )
    record["trace"] = _trace(item, call, runtime)
    return runtime.redactor.value(record)


def _eval_outcome(
    result: EvalResult, call: pytest.CallInfo[None], report: pytest.TestReport
) -> tuple[str, str | None]:
    """The eval item's outcome and error message after the setup or call phase."""
    excinfo = call.excinfo
    if report.when == "setup":
        outcome = "skipped" if report.skipped else "error"
        if result.item_error is not None:
            return outcome, result.item_error.message
        return outcome, _skip_reason(report) if report.skipped else _message(excinfo)
    if excinfo is not None and isinstance(excinfo.value, EvalFailure):
        report.llmbench_score_failure = True  # type: ignore[attr-defined]
        return "failed", None
    if report.skipped:
        return "skipped", None
    if report.failed:
        # Anything but a low score (a crashing python assertion, a bug) is not a verdict.
        return "error", _message(excinfo)
    return report.outcome, None


def _plain_record(
    item: pytest.Item, call: pytest.CallInfo[None], report: pytest.TestReport, runtime: Runtime
) -> Any:
    state: PlainTestState | None = item.stash.get(PLAIN_STATE_KEY, None)
    if state is None or report.when != "call":
        return None
    outcome: str = report.outcome
    error = _message(call.excinfo) if report.failed else None
    error_kind = state.error.kind if state.error else None
    if state.error is not None and call.excinfo is not None and call.excinfo.value is state.error:
        outcome = "error"  # an outage is not a low score, even in a plain test
    elif report.skipped and "--max-cost" in (reason := _skip_reason(report) or ""):
        error, error_kind = reason, "budget"  # counted as not run, like eval items
    path = item.path
    root = item.config.rootpath
    # A plain test runs its own asserts; under --latency-only its record is a measurement too.
    latency = runtime.run.latency_only
    record = build_record(
        nodeid=item.nodeid,
        suite=path.stem,
        eval_file=file_field(path, root),
        case_id=getattr(item, "originalname", item.name),
        model=state.model.name if state.model else None,
        model_id=state.model.model if state.model else None,
        profile=state.model.name if state.model else None,
        model_tags=dict(state.model.tags) if state.model else {},
        repeat=state.repeat,
        outcome=outcome,
        score=state.score if outcome in ("passed", "failed") and not latency else None,
        eval_type="latency" if latency else "quality",
        threshold=None,
        error=error,
        error_kind=error_kind if outcome == "error" or error_kind == "budget" else None,
        prompt=state.prompts[-1] if state.prompts else None,
        conversation=_chat_entries(state.chats) if state.chats else None,
        metrics=dict(state.metrics),
        worker=worker_id(item.config),
        started_at=state.started_at or utc_now(),
        **_summed(state),
    )
    record["trace"] = _trace(item, call, runtime)
    return runtime.redactor.value(record)


def _trace(item: pytest.Item, call: pytest.CallInfo[None], runtime: Runtime) -> Any:
    """The record's ``trace``: the item's span and its calls, when the run exports a trace
    (else None). The phase's times bound the span; its calls may start earlier (look-ahead)."""
    if runtime.run.otel is None:
        return None
    from ..engine import item_trace

    return item_trace(item.nodeid, int(call.start * 1e9), int(call.stop * 1e9))


def _chat_entries(chats: list[ChatLog]) -> list[dict[str, Any]]:
    """A plain test's ``conversation``: its ``llm.chat`` conversations one after another, in
    the order they were opened, each entry with the 1-based ``chat`` it belongs to. A chat's
    system prompt comes first (turn 0); each send is a turn: its message, then the reply."""
    from ..engine import conversation_entry  # the case kinds' module: loaded when used

    entries: list[dict[str, Any]] = []
    for number, chat in enumerate(chats, start=1):
        said = [conversation_entry(0, "system", chat.system, None)] if chat.system else []
        for reply in chat.replies:
            turn, answer = reply.turn + 1, reply.completion
            said.append(conversation_entry(turn, "user", str(reply.sent[-1]["content"]), None))
            said.append(conversation_entry(turn, "assistant", answer.text, answer))
        entries.extend({"chat": number, **entry} for entry in said)
    return entries


def _summed(state: PlainTestState) -> dict[str, Any]:
    """Totals over every call the test made; timings of the last call."""
    if not state.completions:
        return {}
    fields = completion_fields(state.completions[-1])
    for name in Usage().fields():  # unknown when any call's is: a partial total would mislead
        values = [getattr(c, name) for c in state.completions]
        fields[name] = None if any(v is None for v in values) else sum(values)
    fields["transport_retries"] = sum(c.retries for c in state.completions)
    return fields


def _skip_reason(report: pytest.TestReport) -> str | None:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2]).removeprefix("Skipped: ")
    return None


def _message(excinfo: Any) -> str | None:
    if excinfo is None:
        return None
    value = excinfo.value
    if isinstance(value, ItemError):
        return value.message
    text = str(value).strip()
    return f"{type(value).__name__}: {text}" if text else type(value).__name__


def _scrub(report: pytest.TestReport, runtime: Runtime) -> None:
    """Remove secrets from the failure text and captured output of ``report``."""
    redactor = runtime.redactor
    if not redactor.secrets:
        return
    longrepr = report.longrepr
    if isinstance(longrepr, tuple):
        # A skip's (path, line, reason): terminal summaries need the tuple shape kept.
        report.longrepr = tuple(  # type: ignore[assignment]
            redactor.text(part) if isinstance(part, str) else part for part in longrepr
        )
    elif longrepr is not None:
        text = str(longrepr)
        cleaned = redactor.text(text)
        if cleaned != text:
            report.longrepr = cleaned
    report.sections = [(title, redactor.text(content)) for title, content in report.sections]
