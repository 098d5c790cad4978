"""The terminal text of a run's summary: the leaderboard table and the judge summary.

:func:`format_leaderboard` renders a board of :func:`pytest_llmbench.results.summary.leaderboard`
as fixed-width lines, :func:`format_judges` the judged dimensions and their agreement;
:class:`~.terminal_summary.TerminalSummary` prints them at the end of a run that has records.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..results import (
    AGENT_BOARD,
    ANSWERED,
    LATENCY_ONLY,
    Comparison,
    DimensionAgreement,
    dimension_columns,
    dimension_means,
    dimension_order,
    has_judges,
    is_missing,
    judge_usage,
    judged_dimensions,
)
from .markup import (
    INCOMPLETE_NOTE,
    coverage_cell,
    has_incomplete,
    incomplete_mark,
    stopped_note,
)

if TYPE_CHECKING:
    import pandas as pd

_BOARD_HEADER: tuple[str, ...] = (
    "#",
    "model",
    "score [95% CI]",
    "pass",
    "cost $",
    "p50 s",
    "ttft s",
)
_LATENCY_HEADER: tuple[str, ...] = (
    "#",
    "model",
    "ttft p50 s (n)",
    "p50 s",
    "p95 s",
    "tok/s",
    "errors",
    "cost $",
)
_ACCURACY_HEADER = "MC acc"
#: An agent board's first quality column (:data:`~pytest_llmbench.results.AGENT_BOARD`).
_PASS_HAT_K_HEADER = "pass^k"
_VS_TOP_HEADER = "vs #1"
# Long model names are cut so that a row stays within 100 columns.
_MODEL_WIDTH = 20


def format_leaderboard(
    board: pd.DataFrame, max_rows: int = 20, comparisons: Sequence[Comparison] = ()
) -> list[str]:
    """Return a fixed-width text table of ``board`` (from :func:`leaderboard`), header first.

    The score shows its 95% CI; an ``MC acc`` column follows the pass rate when any item was
    multiple choice. A board of a run with agent items shows pass^k (with its k) first, as it
    is ranked. With ``comparisons`` (from :func:`top_comparisons`) a ``vs #1`` column
    gives rows 2..n their score difference to the top row, its p-value and ``*`` (significant,
    p < 0.05) or ``n.s.``. A latency-only board shows TTFT p50 (and how many items had one),
    latency p50/p95, tokens/s, errors and cost instead. Shows at most ``max_rows`` models; a
    last line says how many more there are.
    """
    shown = board.head(max(max_rows, 0))
    if board.attrs.get(LATENCY_ONLY):
        header, rows = _LATENCY_HEADER, [_latency_cells(row) for _, row in shown.iterrows()]
    else:
        header, rows = _quality_table(board, shown, comparisons)
    # The model name reads best left-aligned; numbers line up on the right.
    lines = _table(header, rows, left=1)
    if len(board) > len(shown):
        lines.append(f"... {len(board) - len(shown)} more model(s)")
    if has_incomplete(board):
        lines.append(INCOMPLETE_NOTE)
    if stopped_note(board):
        lines.append(stopped_note(board))
    return lines


def _quality_table(
    board: pd.DataFrame, shown: pd.DataFrame, comparisons: Sequence[Comparison]
) -> tuple[tuple[str, ...], list[tuple[str, ...]]]:
    """The header and rows of a board of scores.

    An ``answered`` column (answered / items run) follows the pass rate when some model has an
    item without an answer (an error): a rate over fewer answers must show it.
    """
    versus = {c.model_b: c for c in comparisons if c.metric == "score"}
    accuracy = bool("mc_n" in board and (board["mc_n"].fillna(0) > 0).any())
    coverage = bool((board["n_errors"].fillna(0) > 0).any())
    header = list(_BOARD_HEADER)
    extra = [
        name for name, shown_ in ((_ACCURACY_HEADER, accuracy), ("answered", coverage)) if shown_
    ]
    at = _BOARD_HEADER.index("pass") + 1
    header[at:at] = extra
    if versus:
        header.append(_VS_TOP_HEADER)
    agent = bool(board.attrs.get(AGENT_BOARD))  # pass^k first, as the board is ranked
    if agent:
        header.insert(2, _PASS_HAT_K_HEADER)
    rows = [_board_cells(row, versus, accuracy, coverage, agent) for _, row in shown.iterrows()]
    return tuple(header), rows


def _pass_hat_k_cell(row: pd.Series) -> str:
    """``0.67 k=3``: pass^k and the k it is over; ``-`` without one."""
    value, k = row.get("pass_hat_k"), row.get("k")
    if is_missing(value):
        return "-"
    return f"{value:.2f}" if k is None or is_missing(k) else f"{value:.2f} k={int(k)}"


def _board_cells(
    row: pd.Series,
    versus: Mapping[str, Comparison],
    accuracy: bool,
    coverage: bool,
    agent: bool = False,
) -> tuple[str, ...]:
    model = str(row["model"])
    cells = [
        str(row["rank"]),
        _model_cell(model),
        *([_pass_hat_k_cell(row)] if agent else []),
        _score_cell(row),
        _percent(row["pass_rate"]),
        _fmt(row["cost_usd_total"], ".4f"),
        _fmt(row["latency_s_p50"], ".2f"),
        _fmt(row["ttft_s_p50"], ".2f"),
    ]
    at = _BOARD_HEADER.index("pass") + 1 + agent
    cells[at:at] = [
        *([_percent(row["mc_accuracy"])] if accuracy else []),
        *([coverage_cell(row)] if coverage else []),
    ]
    if versus:
        cells.append(_versus_cell(versus.get(model)) if row["rank"] != 1 else "")
    return tuple(cells)


def _latency_cells(row: pd.Series) -> tuple[str, ...]:
    ttft = _fmt(row["ttft_s_p50"], ".2f")
    return (
        str(row["rank"]),
        _model_cell(str(row["model"])),
        ttft if ttft == "-" else f"{ttft} ({int(row['ttft_n'])})",
        _fmt(row["latency_s_p50"], ".2f"),
        _fmt(row["latency_s_p95"], ".2f"),
        _fmt(row["tokens_per_s_mean"], ".1f"),
        _fmt(row["n_errors"], "d") + incomplete_mark(row),
        _fmt(row["cost_usd_total"], ".4f"),
    )


def _model_cell(model: str) -> str:
    """The name, cut in the middle when long: a variant's suffix (``:terse@t0.2``) tells
    contestants apart, so both ends stay."""
    if len(model) <= _MODEL_WIDTH:
        return model
    head = (_MODEL_WIDTH - 3) // 3
    return model[:head] + "..." + model[-(_MODEL_WIDTH - 3 - head) :]


def _percent(value: Any) -> str:
    return "-" if is_missing(value) else f"{value * 100:.1f}%"


def _score_cell(row: pd.Series) -> str:
    """``0.62 [0.51, 0.73]``; the bare score when there is no interval."""
    score, low, high = row["score_mean"], row.get("score_ci_low"), row.get("score_ci_high")
    if is_missing(score) or is_missing(low) or is_missing(high):
        return _fmt(score, ".2f")
    return f"{score:.2f} [{low:.2f}, {high:.2f}]"


def _versus_cell(comparison: Comparison | None) -> str:
    """``-0.08 p=0.03 *`` or ``-0.02 p=0.41 n.s.``; ``-`` without common scored cases."""
    if comparison is None or comparison.n_cases == 0:
        return "-"
    p_value = comparison.p_value
    shown = "p<0.01" if p_value < 0.01 else f"p={p_value:.2f}"
    return f"{comparison.diff:+.2f} {shown} {'*' if comparison.significant else 'n.s.'}"


_JUDGES_HEADER: tuple[str, ...] = ("dimension", "mean", "alpha", "units")


def format_judges(frame: pd.DataFrame, agreement_rows: Iterable[DimensionAgreement]) -> list[str]:
    """Return the judge summary of a records frame; empty when no item had judges.

    One line per dimension: the mean over answered items, Krippendorff's alpha between the
    judges (``agreement_rows``, from :func:`dimension_agreement`) and the number of units it is
    over; then judge errors, tokens and cost.
    """
    if not has_judges({"judges": judges} for judges in frame["judges"]):
        return []
    agreement = {row.dimension: row for row in agreement_rows}
    answered = frame[frame["outcome"].isin(ANSWERED)]
    dimensions = dimension_order([*agreement, *judged_dimensions(frame)])
    means = dimension_means(answered, dimensions)
    rows = [
        (key, _fmt(means[column], ".3f"), *_agreement_cells(agreement.get(key)))
        for key, column in zip(dimensions, dimension_columns(dimensions), strict=True)
    ]
    usage = judge_usage(frame[frame["outcome"] != "skipped"])
    cost = usage["judge_cost_usd_total"]
    return [
        *_table(_JUDGES_HEADER, rows, left=0),
        f"judge errors: {usage['judge_errors']} (excluded from scores); "
        f"judge tokens: {usage['judge_tokens_total']}; "
        f"judge cost: {'unknown' if is_missing(cost) else f'${cost:.4f}'}",
    ]


def _agreement_cells(row: DimensionAgreement | None) -> tuple[str, str]:
    if row is None or row.units == 0:
        return "n/a (fewer than 2 judges)", "0"
    if row.alpha is None:
        return "n/a (no variation)", str(row.units)
    return f"{row.alpha:.3f}", str(row.units)


def _table(header: Sequence[str], rows: Sequence[Sequence[str]], left: int) -> list[str]:
    """Fixed-width lines of ``header`` and ``rows``; column ``left`` is left-aligned."""
    widths = [max(len(cell) for cell in column) for column in zip(header, *rows, strict=False)]
    return [_table_line(cells, widths, left) for cells in [header, *rows]]


def _table_line(cells: Sequence[str], widths: Sequence[int], left: int) -> str:
    parts = [
        cell.ljust(width) if index == left else cell.rjust(width)
        for index, (cell, width) in enumerate(zip(cells, widths, strict=False))
    ]
    return "  ".join(parts).rstrip()


def _fmt(value: Any, spec: str) -> str:
    return "-" if is_missing(value) else format(int(value) if spec == "d" else value, spec)
