"""The standalone report's HTML tables: the leaderboard (and its grouped variants), paired
comparisons, flaky cases, judge agreement and the per-case table with each item's transcript.

Every text that comes from a record goes through :func:`text` (escaped); numbers are formatted
in right-aligned cells, a missing value as ``-``.
"""

from __future__ import annotations

import html
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..render import INCOMPLETE_NOTE, coverage_cell, has_incomplete, stopped_note
from ..results import AGENT_BOARD, AGENT_FIRST, CONVERSATION_COLUMNS, is_missing
from ..results_folder import RESULTS_FILE
from .charts import task_type

if TYPE_CHECKING:
    import pandas as pd

    from ..results import CaseVerdict, Comparison, DimensionAgreement

#: The per-case table shows at most this many rows: 2,000 transcripts are already a big page.
CASE_ROWS_LIMIT = 2000
#: Every column a leaderboard table may show: board column -> (header, format).
_COLUMNS: dict[str, tuple[str, str]] = {
    "rank": ("rank", "d"),
    "model": ("model", "s"),
    "score_mean": ("score", ".3f"),
    "pass_rate": ("pass rate", ".1%"),
    "coverage": ("answered", "s"),
    "win_rate": ("win rate", ".2f"),
    "mc_accuracy": ("MC accuracy", ".1%"),
    "n_flaky": ("flaky", "d"),
    "pass_at_k": ("pass@k", ".3f"),
    "pass_hat_k": ("pass^k", ".3f"),
    "k": ("k", "d"),
    "n_items": ("items", "d"),
    "n_errors": ("errors", "d"),
    "cost_usd_total": ("cost $", ".4f"),
    "judge_cost_usd_total": ("judge $", ".4f"),
    "ttft_s_p50": ("TTFT p50 s", ".2f"),
    "ttft_n": ("TTFT n", "d"),
    "latency_s_p50": ("latency p50 s", ".2f"),
    "latency_s_p95": ("latency p95 s", ".2f"),
    "tokens_per_s_mean": ("tokens/s", ".1f"),
    "reasoning_tokens_mean": ("reasoning tokens/item", ".0f"),
    "cached_input_tokens_mean": ("cached input tokens/item", ".0f"),
    "turn_latency_s_p50": ("turn latency p50 s", ".2f"),
    "turn_latency_s_p95": ("turn latency p95 s", ".2f"),
    "conversation_latency_s_p50": ("conversation latency p50 s", ".2f"),
    "conversation_latency_s_p95": ("conversation latency p95 s", ".2f"),
    "turn_ttft_s_p50": ("turn TTFT p50 s", ".2f"),
    "turn_ttft_s_p95": ("turn TTFT p95 s", ".2f"),
}
#: The columns of a quality board, in order; a column the board lacks is left out.
_BOARD_COLUMNS = (
    *("rank", "model", "score_mean", "pass_rate", "coverage", "win_rate", "mc_accuracy"),
    "n_flaky",
    "pass_at_k",
    *("pass_hat_k", "k", "n_items", "n_errors", "cost_usd_total", "judge_cost_usd_total"),
    *("latency_s_p50", "ttft_s_p50", "tokens_per_s_mean"),
    *("reasoning_tokens_mean", "cached_input_tokens_mean"),
    *CONVERSATION_COLUMNS,  # a conversation's timings, after the rest
)
#: The columns of a board of a run with agent items: pass^k first among the quality columns,
#: as the board is ranked (:func:`pytest_llmbench.results.ranked`).
_AGENT_BOARD_COLUMNS = (
    *_BOARD_COLUMNS[:2],
    *AGENT_FIRST,
    *(column for column in _BOARD_COLUMNS[2:] if column not in AGENT_FIRST),
)
#: The columns of a latency-only board: timings instead of scores.
_LATENCY_COLUMNS = (
    *("rank", "model", "n_items", "n_errors", "ttft_s_p50", "ttft_n", "latency_s_p50"),
    *("latency_s_p95", "tokens_per_s_mean", "cost_usd_total"),
    *("reasoning_tokens_mean", "cached_input_tokens_mean"),
    *CONVERSATION_COLUMNS,  # a conversation's timings, after the rest
)
#: Columns shown with their 95% CI: column -> (low column, high column).
_CI_COLUMNS = {
    "score_mean": ("score_ci_low", "score_ci_high"),
    "pass_rate": ("pass_rate_ci_low", "pass_rate_ci_high"),
    "win_rate": ("win_rate_ci_low", "win_rate_ci_high"),
}
#: Columns shown with their sample size: column -> the size's column.
_N_COLUMNS = {"win_rate": "n_pairs"}
#: Columns shown only when some row has a value (no model of the run reported any).
_REPORTED_ONLY = frozenset({"reasoning_tokens_mean", "cached_input_tokens_mean"})


def leaderboard_table(board: pd.DataFrame, key: str = "model", latency: bool = False) -> str:
    """The leaderboard, with ``[low, high]`` 95% CIs where the board has them.

    ``key`` is the board's group column (``model``, or a :func:`grouped` axis column). A
    latency-only board shows timings instead of scores; multiple-choice accuracy shows only when
    some item was multiple choice.
    """
    columns = _shown_columns(board, key, latency)
    if "mc_n" not in board.columns or not (board["mc_n"].fillna(0) > 0).any():
        columns = [column for column in columns if column[1] != "mc_accuracy"]
    header = "".join(
        _th(name + (" (95% CI)" if column in _CI_COLUMNS and _has_ci(board, column) else ""), spec)
        for name, column, spec in columns
    )
    rows = "".join(
        "<tr>" + "".join(_board_cell(row, column, spec) for _, column, spec in columns) + "</tr>"
        for _, row in board.iterrows()
    )
    css = "leaderboard" if key == "model" else f"grouped by-{text(anchor(key))}"
    note = f'<p class="note">{text(INCOMPLETE_NOTE)}</p>' if has_incomplete(board) else ""
    if stopped_note(board):
        note += f'<p class="note">{text(stopped_note(board))}</p>'
    return f'<table class="{css}"><tr>{header}</tr>{rows}</table>{note}'


def _shown_columns(board: pd.DataFrame, key: str, latency: bool) -> list[tuple[str, str, str]]:
    """(header, board column, format) of each column the board has; the model column is
    ``key``'s."""
    shown = []
    quality = _AGENT_BOARD_COLUMNS if board.attrs.get(AGENT_BOARD) else _BOARD_COLUMNS
    for column in _LATENCY_COLUMNS if latency else quality:
        header, spec = _COLUMNS[column]
        if column == "model":
            shown.append((key, key, spec))
        elif column in _REPORTED_ONLY and not _has_values(board, column):
            continue
        elif column in board.columns:
            shown.append((header, column, spec))
    # Named metrics (post_process, record_score(name=...)): their means, after the rest.
    for column in board.columns:
        if column.startswith("metric_") and column.endswith("_mean"):
            shown.append((column.removeprefix("metric_").removesuffix("_mean"), column, ".4g"))
    return shown


def _has_values(board: pd.DataFrame, column: str) -> bool:
    return column in board.columns and bool(board[column].notna().any())


def _has_ci(board: pd.DataFrame, column: str) -> bool:
    return all(name in board.columns for name in _CI_COLUMNS[column])


def _board_cell(row: pd.Series, column: str, spec: str) -> str:
    if column == "coverage":
        return _td(coverage_cell(row), "d")
    text = _format(row[column], spec)
    low, high = _CI_COLUMNS.get(column, ("", ""))
    if low in row.index and high in row.index and not is_missing(row[low]):
        text += f" [{_format(row[low], spec)}, {_format(row[high], spec)}]"
    size = _N_COLUMNS.get(column, "")
    if size in row.index and not is_missing(row[size]) and int(row[size]) > 0:
        text += f" (n={int(row[size])})"
    return _td(text, spec)


#: The columns of the efforts table (:func:`effort_table`): board column -> (header, format).
_EFFORT_COLUMNS: dict[str, tuple[str, str]] = {
    "model": ("model", "s"),
    "effort": ("effort", "s"),
    "n_items": ("items", "d"),
    "n_errors": ("errors", "d"),
    "pass_rate": ("pass rate", ".1%"),
    "score_mean": ("score", ".3f"),
    "output_tokens_mean": ("output tokens", ".0f"),
    "reasoning_tokens_mean": ("of which reasoning", ".0f"),
    "cost_usd_total": ("cost $", ".4f"),
    "latency_s_p50": ("latency p50 s", ".2f"),
    "latency_s_p95": ("latency p95 s", ".2f"),
}


def effort_table(board: pd.DataFrame) -> str:
    """Each model's reasoning efforts side by side (the results' effort board: one row per
    model and effort); token counts are means per answered item."""
    columns = [(column, *shown) for column, shown in _EFFORT_COLUMNS.items() if column in board]
    header = "".join(_th(name, spec) for _, name, spec in columns)
    rows = "".join(
        "<tr>" + "".join(_td(_format(row[column], spec), spec) for column, _, spec in columns)
        + "</tr>"
        for _, row in board.iterrows()
    )  # fmt: skip
    return f'<table class="efforts"><tr>{header}</tr>{rows}</table>'


def comparisons(results: Sequence[Comparison]) -> str:
    """The leader against every other model on their common cases: paired tests
    (:func:`~pytest_llmbench.results.summary.top_comparisons`); empty with a single model."""
    if not results:
        return ""
    rows = [_comparison_row(result) for result in results]
    header = _header(
        ("comparison", "metric", "cases", "difference", "95% CI", "p", "at 0.05"), "ssdfffs"
    )
    return (
        "<h3>Paired comparisons with the leader</h3>"
        '<p class="note">Score: paired bootstrap over cases; pass rate: exact McNemar test on '
        "each case's majority verdict.</p>"
        f'<table class="comparisons"><tr>{header}</tr>{"".join(rows)}</table>'
    )


def _comparison_row(result: Comparison) -> str:
    """One :class:`pytest_llmbench.results.stats.Comparison` as a table row."""
    verdict = "significant" if result.significant else "not significant"
    interval = f"[{_format(result.low, '+.3f')}, {_format(result.high, '+.3f')}]"
    return (
        f'<tr class="{verdict.replace(" ", "-")}">'
        f"<td>{text(result.model_b)} vs {text(result.model_a)}</td>"
        f"<td>{text(result.metric)}</td>{_td(str(result.n_cases), 'd')}"
        f"{_td(_format(result.diff, '+.3f'), 'f')}{_td(interval, 'f')}"
        f"{_td(_format(result.p_value, '.3g'), 'f')}<td>{verdict}</td></tr>"
    )


def flaky_table(verdicts: Iterable[CaseVerdict]) -> str:
    """Cases whose repeats disagree (some passed, some failed), of the run's case verdicts."""
    flaky = [verdict for verdict in verdicts if verdict.verdict == "flaky"]
    if not flaky:
        return '<p class="note">No flaky case: every case passed or failed in all its repeats.</p>'
    rows = "".join(
        f"<tr><td>{text(v.model)}</td><td>{text(v.suite)}</td><td>{text(v.case_id)}</td>"
        f"{_td(f'{v.passed}/{v.n}', 'd')}</tr>"
        for v in flaky
    )
    return (
        f'<h3>Flaky cases ({len(flaky)})</h3><table class="flaky"><tr><th>model</th>'
        f'<th>suite</th><th>case</th><th class="num">passed</th></tr>{rows}</table>'
    )


def agreement_table(agreement: Iterable[DimensionAgreement]) -> str:
    """Krippendorff's alpha between the judges, per dimension (of a run with judges)."""
    rows = "".join(
        f"<tr><td>{text(row.dimension)}</td>"
        f"{_td('n/a' if row.alpha is None else f'{row.alpha:.3f}', 'f')}"
        f"{_td(str(row.units), 'd')}{_td(str(row.judges), 'd')}</tr>"
        for row in agreement
    )
    return (
        '<h3>Judge agreement</h3><table class="agreement"><tr><th>dimension</th>'
        '<th class="num">alpha</th><th class="num">units</th><th class="num">judges</th></tr>'
        f"{rows}</table>"
    )


def cases_table(records: Sequence[Mapping[str, Any]]) -> str:
    """One row per item (``records`` are sorted), its transcript folded in a ``<details>``."""
    shown = records[:CASE_ROWS_LIMIT]
    note = ""
    if len(records) > len(shown):
        note = (
            f'<p class="note">Showing the first {len(shown):,} of {len(records):,} items '
            f"(by suite, case, model, repeat); {RESULTS_FILE} has them all.</p>"
        )
    header = _header(
        ("suite", "case", "model", "repeat", "task type", "outcome", "score", "transcript"),
        "sssdssfs",
    )
    rows = "".join(_case_row(record) for record in shown)
    return f'{note}<table class="cases"><tr>{header}</tr>{rows}</table>'


def _case_row(record: Mapping[str, Any]) -> str:
    outcome = str(record.get("outcome"))
    cells = (
        f"<td>{text(record.get('suite'))}</td><td>{text(record.get('case_id'))}</td>"
        f"<td>{text(record.get('model'))}</td>{_td(text(record.get('repeat')), 'd')}"
        f"<td>{text(task_type(record.get('task')))}</td>"
        f'<td class="{text(outcome)}">{text(outcome)}{human_badge(record)}</td>'
        f"{_td(_format(record.get('score'), '.3f'), 'f')}"
    )
    return (
        f"<tr>{cells}<td><details><summary>show</summary>{transcript(record)}</details></td></tr>"
    )


def human_badge(record: Mapping[str, Any]) -> str:
    """A ``person`` badge after the outcome of an item a person's label decided, with the
    reviewer, the machine's verdict and the comment (escaped: it is user text); empty else."""
    review = record.get("review")
    if record.get("verdict_source") != "human" or not isinstance(review, Mapping):
        return ""
    who = review.get("reviewer") or "a person"
    comment = str(review.get("comment") or "")
    where = f" (assertion {review['assertion']})" if review.get("assertion") is not None else ""
    title = f"decided by {who}{where}; the machine said {record.get('machine_outcome')}"
    badge = f' <span class="person" title="{text(title)}">person</span>'
    return badge + (f'<div class="review-comment">{text(comment)}</div>' if comment else "")


def transcript(record: Mapping[str, Any]) -> str:
    """An item's messages, then (as in the pytest-html extras) its answer and every verdict, and
    an agent environment's state diff."""
    from .conversation_html import entries, opening
    from .html_columns import render_extra
    from .state_html import state_block

    sent = _messages(record.get("messages"))
    talk = bool(entries(record))
    if talk:  # a conversation shows its own messages, after its system prompt
        sent = opening(sent)
    messages = "".join(
        f"<h4>{text(message.get('role', '?'))}</h4><pre>{text(_content(message))}</pre>"
        for message in sent
    )
    # The messages include the prompt: render_extra need not show it a second time.
    extra = render_extra({**record, "prompt": None if messages or talk else record.get("prompt")})
    state = state_block(record)  # an agent environment's: after the verdicts that read it
    return f'<div class="transcript">{messages}{context_block(record)}{extra}{state}</div>'


def context_block(record: Mapping[str, Any]) -> str:
    """A RAG item's retrieved context, as its judges read it: where it came from (the case or
    the solver) and each chunk, numbered in rank order, escaped; empty without a context."""
    context = record.get("context")
    if not isinstance(context, Mapping) or not isinstance(context.get("chunks"), list):
        return ""
    source = text(context.get("source", "case"))
    if not context["chunks"]:
        return f'<h4>context ({source})</h4><p class="context">empty retrieval (no chunks)</p>'
    chunks = "".join(f"<li><pre>{text(chunk)}</pre></li>" for chunk in context["chunks"])
    return f'<h4>context ({source})</h4><ol class="context">{chunks}</ol>'


def _messages(value: Any) -> Iterable[Mapping[str, Any]]:
    return [item for item in value if isinstance(item, Mapping)] if isinstance(value, list) else []


def _content(message: Mapping[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    # Multi-part content and tool calls: show their JSON rather than drop them.
    shown = {key: value for key, value in message.items() if key != "role"}
    return json.dumps(shown, ensure_ascii=False, indent=1, default=str)


# -- formatting -----------------------------------------------------------------------------


def _header(names: Sequence[str], specs: str) -> str:
    """The header cells of a table: one name per column, each aligned by its format letter."""
    return "".join(_th(name, spec) for name, spec in zip(names, specs, strict=True))


def _th(name: str, spec: str) -> str:
    return f'<th class="num">{text(name)}</th>' if spec != "s" else f"<th>{text(name)}</th>"


def _td(text: str, spec: str) -> str:
    """A cell of already escaped (or numeric) ``text``."""
    return f'<td class="num">{text}</td>' if spec != "s" else f"<td>{text}</td>"


def _format(value: Any, spec: str) -> str:
    if is_missing(value):
        return "-"
    if spec == "s":
        return text(value)
    return text(format(int(value) if spec == "d" else float(value), spec))


def anchor(name: str) -> str:
    return name.lower().replace(" ", "-")


def text(value: Any) -> str:
    return html.escape(str(value))
