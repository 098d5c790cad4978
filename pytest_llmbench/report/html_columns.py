"""pytest-html integration: model, score, tokens, latency and cost columns; per-row extras.

Registered on the controller only when pytest-html writes a report (``--html``). It reads the
record that arrived on the report, so it works the same with and without xdist. A batched
answer has no latency: its latency cell says ``batched`` and its extras name the batch.
"""

from __future__ import annotations

import html
from typing import Any

import pytest

#: (column id, header, record field, format)
_COLUMNS: tuple[tuple[str, str, str, str], ...] = (
    ("llmModel", "Model", "model", "{}"),
    ("llmScore", "Score", "score", "{:.3f}"),
    ("llmTokens", "Tokens (in/out)", "tokens", "{}"),
    ("llmLatency", "Latency (s)", "latency_s", "{:.2f}"),
    ("llmCost", "Cost (USD)", "cost_usd", "{:.6f}"),
)


def _cell_value(record: dict[str, Any] | None, field: str, fmt: str) -> str:
    if record is None:
        return ""
    if field == "tokens":
        tokens_in, tokens_out = record.get("input_tokens"), record.get("output_tokens")
        if tokens_in is None and tokens_out is None:
            return ""
        return "/".join("-" if count is None else str(count) for count in (tokens_in, tokens_out))
    if field == "latency_s" and record.get("batched"):
        return "batched"
    value = record.get(field)
    return "" if value is None else fmt.format(value)


def batch_note(record: Any) -> str | None:
    """``batched (batch <id>, waited <s>)`` for a batched answer's record, else None."""
    if not record.get("batched"):
        return None
    wait = record.get("batch_wait_s")
    waited = (
        f", waited {float(wait):.0f} s"
        if isinstance(wait, (int, float)) and not isinstance(wait, bool)
        else ""
    )
    return f"batched (batch {record.get('batch_id') or 'unknown'}{waited})"


class HtmlColumns:
    """Hook implementations for pytest-html 4."""

    @pytest.hookimpl(optionalhook=True)
    def pytest_html_results_table_header(self, cells: list[str]) -> None:
        """Add our column headers after the test id."""
        for offset, (column, title, _field, _fmt) in enumerate(_COLUMNS):
            cells.insert(
                2 + offset, f'<th class="sortable" data-column-type="{column}">{title}</th>'
            )

    @pytest.hookimpl(optionalhook=True)
    def pytest_html_results_table_row(self, report: pytest.TestReport, cells: list[str]) -> None:
        """Add the record's values (empty cells for reports without a record)."""
        if not cells:
            return  # another plugin removed the row; adding cells would bring it back
        record = getattr(report, "llmbench_record", None)
        for offset, (column, _title, field, fmt) in enumerate(_COLUMNS):
            value = html.escape(_cell_value(record, field, fmt))
            cells.insert(2 + offset, f'<td class="col-{column}">{value}</td>')

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Attach prompt, response, expected answer and verdicts as the row's extras."""
        record = getattr(report, "llmbench_record", None)
        if not isinstance(record, dict):
            return
        from pytest_html import extras

        existing = list(getattr(report, "extras", []) or [])
        report.extras = [*existing, extras.html(render_extra(record))]  # type: ignore[attr-defined]


def render_extra(record: dict[str, Any]) -> str:
    """The HTML block shown under a row: the transcript, each verdict, and the judges' scores.

    A conversation shows its messages with each reply's verdicts (:mod:`.conversation_html`) in
    place of the response and the table of verdicts. A function-calling reply's tool calls
    follow the response (:mod:`.function_calls`).
    """
    from .conversation_html import conversation_html

    talk = conversation_html(record)
    parts = ['<div class="llmbench-extra">']
    for title, field in (("Prompt", "prompt"), ("Response", "response"), ("Expected", "expected")):
        value = record.get(field)
        if field == "response" and record.get("reasoning"):
            parts.append(f"<h4>Thinking</h4><pre>{_text(record['reasoning'])}</pre>")
        if talk and field == "response":
            parts.append(f"<h4>Conversation</h4>{talk}")
        elif value is not None:
            parts.append(f"<h4>{title}</h4><pre>{_text(value)}</pre>")
        if field == "response" and not talk:  # a conversation shows them per reply
            parts += _function_calls(record)
    if record.get("error"):
        parts.append(f"<h4>Error</h4><pre>{_text(record['error'])}</pre>")
    note = batch_note(record)
    if note:
        parts.append(f'<p class="llmbench-batched">{_text(note)}</p>')
    parts += [] if talk else _verdicts_table(record.get("assertions") or [])
    parts += _dimensions_table(record.get("dimensions") or {})
    parts += _judges_table(record.get("judges") or [])
    parts += _agent_blocks(record)
    parts.append("</div>")
    return "".join(parts)


def _function_calls(record: dict[str, Any]) -> list[str]:
    """A function-calling reply's tool calls, each name with its arguments as JSON."""
    from .function_calls import function_calls_html

    calls = function_calls_html(record.get("tool_calls"))
    return [f"<h4>Tool calls</h4>{calls}"] if calls else []


def _verdicts_table(verdicts: list[dict[str, Any]]) -> list[str]:
    if not verdicts:
        return []
    parts = [
        '<h4>Assertions</h4><table class="llmbench-verdicts">',
        "<tr><th>verdict</th><th>type</th><th>score</th><th>weight</th><th>reason</th></tr>",
    ]
    for verdict in verdicts:
        mark = (
            "UNCHECKED" if verdict.get("unchecked") else "PASS" if verdict.get("passed") else "FAIL"
        )
        parts.append(
            f"<tr><td>{mark}</td><td>{_text(verdict.get('type'))}</td>"
            f"<td>{float(verdict.get('score', 0)):.3f}</td><td>{_text(verdict.get('weight'))}</td>"
            f"<td>{_text(verdict.get('reason', ''))}</td></tr>"
        )
    parts.append("</table>")
    return parts


def _dimensions_table(dimensions: dict[str, Any]) -> list[str]:
    """The item's score per judged dimension, aggregated over its judges."""
    if not dimensions:
        return []
    rows = [
        f"<tr><td>{_text(key)}</td><td>{_score(value)}</td></tr>"
        for key, value in dimensions.items()
    ]
    return [
        '<h4>Dimensions</h4><table class="llmbench-dimensions">',
        "<tr><th>dimension</th><th>score</th></tr>",
        *rows,
        "</table>",
    ]


def _judges_table(judges: list[dict[str, Any]]) -> list[str]:
    """One row per judge and dimension; a failed judge gets one row with its error."""
    if not judges:
        return []
    parts = [
        '<h4>Judges</h4><table class="llmbench-judges">',
        "<tr><th>judge</th><th>type</th><th>dimension</th><th>score</th><th>reason</th>"
        "<th>error</th></tr>",
    ]
    for entry in judges:
        who = (
            f'<td title="{_text(entry.get("model_id") or "")}">{_text(entry.get("judge"))}</td>'
            f"<td>{_text(entry.get('type'))}</td>"
        )
        scores: dict[str, Any] = entry.get("scores") or {}
        reasons: dict[str, Any] = entry.get("reasons") or {}
        error = _text(entry.get("error") or "")
        for key, score in scores.items() or [("", None)]:
            parts.append(
                f"<tr>{who}<td>{_text(key)}</td><td>{_score(score)}</td>"
                f"<td>{_text(reasons.get(key, ''))}</td><td>{error}</td></tr>"
            )
    parts.append("</table>")
    return parts


def _text(value: Any) -> str:
    return html.escape(str(value))


def _score(value: Any) -> str:
    # Jury scores are whole numbers 1..5 and rubric scores fractions: ``g`` shows both plainly.
    return "" if value is None else _text(format(float(value), ".4g"))


def _agent_blocks(record: dict[str, Any]) -> list[str]:
    """An agent item's loop: steps, tools used, where its workdir is, and the transcript."""
    transcript = record.get("transcript") or []
    if not transcript and not record.get("agent_steps"):
        return []
    counts = record.get("tool_counts") or {}
    used = ", ".join(f"{name}: {count}" for name, count in counts.items()) or "none"
    parts = [
        "<h4>Agent</h4><p>"
        f"{_text(record.get('agent_steps'))} step(s), stopped: "
        f"{_text(record.get('agent_stopped'))}; "
        f"tools: {_text(used)}; workdir: <code>{_text(record.get('workdir'))}</code></p>"
    ]
    if transcript:
        parts.append('<h4>Transcript</h4><ol class="llmbench-transcript">')
        for message in transcript:
            parts.append(f"<li><b>{_text(message.get('role'))}</b>{_message_body(message)}</li>")
        parts.append("</ol>")
    return parts


def _message_body(message: dict[str, Any]) -> str:
    body = ""
    if message.get("content"):
        body += f"<pre>{_text(message['content'])}</pre>"
    for call in message.get("tool_calls") or []:
        function = call.get("function") or call
        name, arguments = function.get("name"), function.get("arguments")
        body += f"<pre>→ {_text(name)}({_text(arguments)})</pre>"
    return body
