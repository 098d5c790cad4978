"""Text renderings of a leaderboard frame: Markdown, HTML and the cells they share.

Used by the ``llmbench`` command and the GitHub step summary, so both print one table format.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..results import STOPPED_NOTE, is_missing

if TYPE_CHECKING:
    import pandas as pd


def md_cell(text: str) -> str:
    """``text`` safe inside a Markdown table cell: one line, ``|`` and ``\\`` escaped."""
    return " ".join(text.split()).replace("\\", "\\\\").replace("|", "\\|")


def board_markdown(board: pd.DataFrame, key: str = "model") -> str:
    """The leaderboard as a Markdown table of its main columns (numbers right-aligned); ``key``
    names the key column, as in :func:`board_table`."""
    header, rows = board_table(board, key)
    align = [":---" if name == key else "---:" for name in header]
    lines = [_md_row(header), "| " + " | ".join(align) + " |"]
    lines += [_md_row(row) for row in rows]
    if has_incomplete(board):
        lines += ["", md_cell(INCOMPLETE_NOTE)]
    if stopped_note(board):
        lines += ["", md_cell(stopped_note(board))]
    return "\n".join(lines) + "\n"


#: The columns of :func:`efforts_markdown`: effort board column -> (header, format).
_EFFORT_CELLS: dict[str, tuple[str, str]] = {
    "model": ("model", "{}"),
    "effort": ("effort", "{}"),
    "n_items": ("items", "{:d}"),
    "pass_rate": ("pass rate", "{:.1%}"),
    "score_mean": ("score", "{:.3f}"),
    "output_tokens_mean": ("output tokens", "{:.0f}"),
    "reasoning_tokens_mean": ("of which reasoning", "{:.0f}"),
    "cost_usd_total": ("cost $", "{:.4f}"),
    "latency_s_p50": ("p50 s", "{:.2f}"),
    "latency_s_p95": ("p95 s", "{:.2f}"),
}


def efforts_markdown(board: pd.DataFrame) -> str:
    """The effort board (one row per model and effort) as a Markdown table; token counts are
    means per answered item."""
    columns = [(column, *shown) for column, shown in _EFFORT_CELLS.items() if column in board]
    align = [":---" if spec == "{}" else "---:" for _, _, spec in columns]
    lines = [_md_row([header for _, header, _ in columns]), "| " + " | ".join(align) + " |"]
    for _, row in board.iterrows():
        cells = [
            str(row[column]) if spec == "{}" else _number(row[column], spec)
            for column, _, spec in columns
        ]
        lines.append(_md_row(cells))
    return "\n".join(lines) + "\n"


def _md_row(cells: Sequence[str]) -> str:
    return "| " + " | ".join(md_cell(cell) for cell in cells) + " |"


def board_html(board: pd.DataFrame, key: str = "model") -> str:
    """The leaderboard as a small self-contained HTML page (every cell escaped); ``key`` names
    the key column, as in :func:`board_table`."""
    header, rows = board_table(board, key)
    head = "".join(f"<th>{html.escape(cell)}</th>" for cell in header)
    body = "\n".join(
        "<tr>" + "".join(f"<td>{html.escape(cell)}</td>" for cell in row) + "</tr>" for row in rows
    )
    note = f"<p>{html.escape(INCOMPLETE_NOTE)}</p>" if has_incomplete(board) else ""
    if stopped_note(board):
        note += f"<p>{html.escape(stopped_note(board))}</p>"
    return _PAGE.format(head=head, body=body, note=note)


_PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>llmbench leaderboard</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 2em; }}
table {{ border-collapse: collapse; }}
th, td {{ border: 1px solid #ccc; padding: 0.3em 0.6em; text-align: right; }}
th:nth-child(2), td:nth-child(2) {{ text-align: left; }}
thead {{ background: #f3f3f3; }}
</style>
</head>
<body>
<h1>llmbench leaderboard</h1>
<table>
<thead><tr>{head}</tr></thead>
<tbody>
{body}
</tbody>
</table>
{note}
</body>
</html>
"""


#: The note under a board with an incomplete row (its ``answered`` cell ends in ``!``).
INCOMPLETE_NOTE = (
    "! incomplete: more than 10% of the items errored, so the row's rates rest on fewer answers"
)


def stopped_note(board: pd.DataFrame) -> str:
    """The note under a board some of whose repeats ``--stop-early`` spared (its pass@k, pass^k
    and CIs are then over the samples taken); empty otherwise."""
    if "n_stopped_early" not in board.columns:
        return ""
    stopped = int(board["n_stopped_early"].fillna(0).sum())
    if stopped <= 0:
        return ""
    return f"{STOPPED_NOTE}; {stopped} repeat(s) not run"


def coverage_cell(row: Mapping[Any, Any] | pd.Series) -> str:
    """``answered/run`` of a board row (items run: not skipped), ``!`` after an incomplete one."""
    answered = int(row["n_passed"]) + int(row["n_failed"])
    run = int(row["n_items"]) - int(row["n_skipped"])
    return f"{answered}/{run}" + incomplete_mark(row)


def incomplete_mark(row: Mapping[Any, Any] | pd.Series) -> str:
    """`` !`` after a cell of an incomplete row, else nothing."""
    return " !" if _is_true(row.get("incomplete")) else ""


def _is_true(value: Any) -> bool:
    return not is_missing(value) and bool(value)


def has_incomplete(board: pd.DataFrame) -> bool:
    """Whether any row of ``board`` is incomplete (more than 10% of its items errored)."""
    return "incomplete" in board and any(_is_true(value) for value in board["incomplete"])


def board_table(board: pd.DataFrame, key: str = "model") -> tuple[list[str], list[list[str]]]:
    """Header and text rows of the leaderboard's main columns (95% CIs when the board has them).

    ``key`` is the key column: ``model``, or the axis column of a board grouped by another axis.
    A latency-only board (``--latency-only``) shows timings instead of scores; a board of a
    run with agent items shows pass^k first, as it is ranked.
    """
    from ..results import AGENT_BOARD, LATENCY_ONLY

    if board.attrs.get(LATENCY_ONLY):
        return _latency_table(board, key)
    wins = "win_rate" in board.columns  # a run that judged pairs (pairwise, select-best)
    agent = bool(board.attrs.get(AGENT_BOARD))  # pass^k first, as the board is ranked
    header = ["rank", key, *(["pass^k"] if agent else [])]
    header += ["score [95% CI]", "pass rate [95% CI]", "answered"]
    header += [*(["win rate [95% CI]"] if wins else []), "cases", "errors"]
    header += ["cost USD", "latency p50 s"]
    rows = [
        [
            str(row["rank"]),
            str(row[key]),
            *([_number(row.get("pass_hat_k"), "{:.3f}")] if agent else []),
            _with_ci(row, "score_mean", "score_ci_low", "score_ci_high", "{:.3f}"),
            _with_ci(row, "pass_rate", "pass_rate_ci_low", "pass_rate_ci_high", "{:.1%}"),
            coverage_cell(row),
            *([_win_cell(row)] if wins else []),
            _number(row.get("n_cases"), "{:d}"),
            _number(row.get("n_errors"), "{:d}"),
            _number(row.get("cost_usd_total"), "{:.4f}"),
            _number(row.get("latency_s_p50"), "{:.2f}"),
        ]
        for row in board.to_dict("records")
    ]
    return header, rows


def _latency_table(board: pd.DataFrame, key: str) -> tuple[list[str], list[list[str]]]:
    """A latency-only board: TTFT p50 with its sample size, latency p50/p95, tokens/s, cost."""
    header = ["rank", key, "ttft p50 s (n)", "latency p50 s", "latency p95 s", "tokens/s"]
    header += ["errors", "cost USD"]
    rows = [
        [
            str(row["rank"]),
            str(row[key]),
            f"{_number(row.get('ttft_s_p50'), '{:.2f}')} ({_number(row.get('ttft_n'), '{:d}')})",
            _number(row.get("latency_s_p50"), "{:.2f}"),
            _number(row.get("latency_s_p95"), "{:.2f}"),
            _number(row.get("tokens_per_s_mean"), "{:.1f}"),
            _number(row.get("n_errors"), "{:d}") + incomplete_mark(row),
            _number(row.get("cost_usd_total"), "{:.4f}"),
        ]
        for row in board.to_dict("records")
    ]
    return header, rows


def _win_cell(row: Mapping[Any, Any]) -> str:
    """``0.75 [0.20, 0.97] (n=2)``: the win rate over the model's judged pairs; ``-`` for a
    model without any."""
    cell = _with_ci(row, "win_rate", "win_rate_ci_low", "win_rate_ci_high", "{:.2f}")
    pairs = row.get("n_pairs")
    if pairs is None or is_missing(pairs) or int(pairs) == 0:
        return cell
    return f"{cell} (n={int(pairs)})"


def _with_ci(row: Mapping[Any, Any], name: str, low: str, high: str, spec: str) -> str:
    value = _number(row.get(name), spec)
    if is_missing(row.get(low)) or is_missing(row.get(high)):
        return value
    return f"{value} [{spec.format(row[low])}, {spec.format(row[high])}]"


def _number(value: Any, spec: str) -> str:
    if is_missing(value):
        return "-"
    return spec.format(int(value) if spec == "{:d}" else float(value))
