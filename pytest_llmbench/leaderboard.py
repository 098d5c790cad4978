"""Pure aggregation of records into metric tables, CSV files and a terminal leaderboard.

Runs once on the controller at session end. The input is the list of wire records (see
:mod:`pytest_llmbench.record`); nothing here touches pytest, the network or the clock.

Counting rules:

- ``skipped`` items count in ``n_items`` and ``n_skipped`` and nowhere else.
- ``error`` items count in ``n_errors``; they are kept out of every mean, the percentiles and
  the pass rate, but tokens, cost, tool calls and retries they spent still count in the totals.
- Means and percentiles are over the answered (passed or failed) items that have the value.

pandas is imported inside the functions: importing this module must stay cheap, because the
plugin imports it in every pytest run, evals or not.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_llmbench.record import FIELDS

if TYPE_CHECKING:
    import pandas as pd

#: Metric columns of every aggregate row, in order, after the group key columns.
METRIC_COLUMNS: tuple[str, ...] = (
    "n_items",
    "n_cases",
    "n_repeats",
    "n_passed",
    "n_failed",
    "n_errors",
    "n_skipped",
    "error_rate",
    "pass_rate",
    "score_mean",
    "score_std",
    "input_tokens_total",
    "output_tokens_total",
    "input_tokens_mean",
    "output_tokens_mean",
    "cost_usd_total",
    "cost_usd_mean",
    "latency_s_mean",
    "latency_s_p50",
    "latency_s_p95",
    "ttft_s_mean",
    "ttft_s_p50",
    "ttft_s_p95",
    "ttft_n",
    "tokens_per_s_mean",
    "tool_calls_total",
    "retries_total",
    "rate_limit_wait_s_total",
    "n_cached",
)

# Counts stay integers (nullable, so a missing total is empty in the CSV rather than "0.0").
_INT_COLUMNS: tuple[str, ...] = (
    "n_items",
    "n_cases",
    "n_repeats",
    "n_passed",
    "n_failed",
    "n_errors",
    "n_skipped",
    "input_tokens_total",
    "output_tokens_total",
    "ttft_n",
    "tool_calls_total",
    "retries_total",
    "n_cached",
)
_NUMERIC_FIELDS: tuple[str, ...] = (
    "repeat",
    "rate_limit_wait_s",
    "score",
    "ttft_s",
    "latency_s",
    "input_tokens",
    "output_tokens",
    "tokens_per_s",
    "cost_usd",
    "retries",
    "tool_calls",
)
_OUTCOME_COUNTS: tuple[tuple[str, str], ...] = (
    ("n_passed", "passed"),
    ("n_failed", "failed"),
    ("n_errors", "error"),
    ("n_skipped", "skipped"),
)
_ANSWERED = ("passed", "failed")
#: Suite name of the row that aggregates all suites of a model.
ALL_SUITES = "__all__"
#: The model label of records from tests that called no model.
NO_MODEL = "(no model)"
_CSV_DECIMALS = 6


def model_dir_name(model: str) -> str:
    """Return a safe, non-empty directory name for ``model`` (``openai/x`` -> ``openai-x``)."""
    name = re.sub(r"[^A-Za-z0-9._-]", "-", model)
    name = re.sub(r"-{2,}", "-", name).strip("-.")
    return name or "model"


def records_frame(records: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """Return one row per record, record fields first, numeric fields as float (None -> NaN)."""
    import pandas as pd

    extra = [key for record in records for key in record if key not in FIELDS]
    columns = list(FIELDS) + list(dict.fromkeys(extra))
    frame = pd.DataFrame([dict(record) for record in records], columns=columns)
    # A plain test that only records a score has no model; it still gets a row of its own.
    frame["model"] = frame["model"].fillna(NO_MODEL)
    for name in _NUMERIC_FIELDS:
        frame[name] = pd.to_numeric(frame[name], errors="coerce").astype("float64")
    return frame


def aggregate(frame: pd.DataFrame, by: Sequence[str]) -> pd.DataFrame:
    """Return :data:`METRIC_COLUMNS` per group of ``by``, key columns first, rows sorted by key."""
    keys = list(by)
    rows = [
        {**dict(zip(keys, key, strict=False)), **_metrics(group)}
        for key, group in frame.groupby(keys, sort=True, dropna=False)
    ]
    return _metrics_frame(rows, keys)


def all_metrics(frame: pd.DataFrame) -> pd.DataFrame:
    """Return one row per model and suite."""
    return aggregate(frame, ["model", "suite"])


def model_aggregate(frame: pd.DataFrame, model: str) -> pd.DataFrame:
    """Return one row per suite of ``model`` and a last row, suite ``__all__``, over all of them.

    Raises :class:`KeyError` when ``model`` has no records.
    """
    import pandas as pd

    own = frame[frame["model"] == model]
    if own.empty:
        raise KeyError(f"no records for model {model!r}")
    per_suite = aggregate(own, ["suite"])
    total = _metrics_frame([{"suite": ALL_SUITES, **_metrics(own)}], ["suite"])
    return pd.concat([per_suite, total], ignore_index=True)


def leaderboard(frame: pd.DataFrame) -> pd.DataFrame:
    """Return one row per model, best first, with a 1-based ``rank`` column in front.

    Order: score_mean desc, pass_rate desc, cost_usd_total asc, model name; NaN sorts last.
    """
    board = aggregate(frame, ["model"]).sort_values(
        ["score_mean", "pass_rate", "cost_usd_total", "model"],
        ascending=[False, False, True, True],
        na_position="last",
        kind="stable",
    )
    board = board.reset_index(drop=True)
    board.insert(0, "rank", range(1, len(board) + 1))
    return board


@dataclass(frozen=True)
class WrittenFiles:
    """Paths written by :func:`write_aggregates`."""

    #: ``all_metrics.csv``: one row per model and suite.
    all_metrics: Path
    #: ``leaderboard.csv``: one row per model, ranked.
    leaderboard: Path
    #: model -> path of its ``<model_dir_name>/aggregate_metrics.csv``.
    per_model: Mapping[str, Path]


def write_aggregates(records: Sequence[Mapping[str, Any]], out_dir: Path) -> WrittenFiles | None:
    """Write the aggregate CSVs under ``out_dir``; return their paths, or None without records."""
    if not records:
        return None
    frame = records_frame(records)
    out_dir.mkdir(parents=True, exist_ok=True)
    per_model: dict[str, Path] = {}
    for model, dir_name in _model_dirs(frame["model"].tolist()).items():
        (out_dir / dir_name).mkdir(exist_ok=True)
        path = out_dir / dir_name / "aggregate_metrics.csv"
        per_model[model] = _write_csv(model_aggregate(frame, model), path)
    return WrittenFiles(
        all_metrics=_write_csv(all_metrics(frame), out_dir / "all_metrics.csv"),
        leaderboard=_write_csv(leaderboard(frame), out_dir / "leaderboard.csv"),
        per_model=per_model,
    )


_BOARD_HEADER: tuple[str, ...] = (
    "rank",
    "model",
    "score",
    "pass",
    "errors",
    "cost $",
    "p50 s",
    "ttft p50 s",
)


def format_leaderboard(board: pd.DataFrame, max_rows: int = 20) -> list[str]:
    """Return a fixed-width text table of ``board`` (from :func:`leaderboard`), header first.

    Shows at most ``max_rows`` models; a last line says how many more there are.
    """
    shown = board.head(max(max_rows, 0))
    rows = [_board_cells(row) for _, row in shown.iterrows()]
    widths = [
        max(len(cell) for cell in column) for column in zip(_BOARD_HEADER, *rows, strict=False)
    ]
    lines = [_board_line(cells, widths) for cells in [_BOARD_HEADER, *rows]]
    if len(board) > len(shown):
        lines.append(f"... {len(board) - len(shown)} more model(s)")
    return lines


def _board_cells(row: pd.Series) -> tuple[str, ...]:
    return (
        str(row["rank"]),
        str(row["model"]),
        _fmt(row["score_mean"], ".3f"),
        "-" if _missing(row["pass_rate"]) else f"{row['pass_rate'] * 100:.1f}%",
        _fmt(row["n_errors"], "d"),
        _fmt(row["cost_usd_total"], ".4f"),
        _fmt(row["latency_s_p50"], ".2f"),
        _fmt(row["ttft_s_p50"], ".2f"),
    )


def _board_line(cells: Sequence[str], widths: Sequence[int]) -> str:
    # The model name reads best left-aligned; numbers line up on the right.
    parts = [
        cell.ljust(width) if index == 1 else cell.rjust(width)
        for index, (cell, width) in enumerate(zip(cells, widths, strict=False))
    ]
    return "  ".join(parts).rstrip()


def _fmt(value: Any, spec: str) -> str:
    return "-" if _missing(value) else format(int(value) if spec == "d" else value, spec)


def _missing(value: Any) -> bool:
    import pandas as pd

    return value is None or bool(pd.isna(value))


def _metrics(group: pd.DataFrame) -> dict[str, Any]:
    """Return the value of every metric column for one group of records."""
    outcomes = group["outcome"].value_counts()
    counts = {column: int(outcomes.get(outcome, 0)) for column, outcome in _OUTCOME_COUNTS}
    spent = group[group["outcome"] != "skipped"]
    answered = group[group["outcome"].isin(_ANSWERED)]
    repeats = group["repeat"].max()
    return {
        "n_items": len(group),
        "n_cases": len(group[["suite", "case_id"]].drop_duplicates()),
        "n_repeats": None if math.isnan(repeats) else int(repeats) + 1,
        **counts,
        "error_rate": _ratio(counts["n_errors"], len(spent)),
        "pass_rate": _ratio(counts["n_passed"], counts["n_passed"] + counts["n_failed"]),
        "score_mean": answered["score"].mean(),
        "score_std": answered["score"].std(),
        **_usage(spent, answered),
        **_timing(answered),
    }


def _usage(spent: pd.DataFrame, answered: pd.DataFrame) -> dict[str, Any]:
    """Totals over every non-skipped item (errors spent them too); means over answers."""
    return {
        "input_tokens_total": _int_total(spent["input_tokens"]),
        "output_tokens_total": _int_total(spent["output_tokens"]),
        "input_tokens_mean": answered["input_tokens"].mean(),
        "output_tokens_mean": answered["output_tokens"].mean(),
        "cost_usd_total": spent["cost_usd"].sum(min_count=1),
        "cost_usd_mean": answered["cost_usd"].mean(),
        "tool_calls_total": int(spent["tool_calls"].sum()),
        "retries_total": int(spent["retries"].sum()),
        "rate_limit_wait_s_total": float(spent["rate_limit_wait_s"].sum()),
        "n_cached": int(spent["cached"].fillna(False).astype(bool).sum()),
    }


def _timing(answered: pd.DataFrame) -> dict[str, Any]:
    latency, ttft = answered["latency_s"], answered["ttft_s"]
    return {
        "latency_s_mean": latency.mean(),
        "latency_s_p50": latency.quantile(0.5),
        "latency_s_p95": latency.quantile(0.95),
        "ttft_s_mean": ttft.mean(),
        "ttft_s_p50": ttft.quantile(0.5),
        "ttft_s_p95": ttft.quantile(0.95),
        "ttft_n": int(ttft.count()),
        "tokens_per_s_mean": answered["tokens_per_s"].mean(),
    }


def _ratio(part: int, whole: int) -> float:
    return part / whole if whole else math.nan


def _int_total(values: pd.Series) -> int | None:
    """Sum of the known values, or None when no item has one (unknown is not zero)."""
    known = values.dropna()
    return int(known.sum()) if len(known) else None


def _metrics_frame(rows: list[dict[str, Any]], keys: list[str]) -> pd.DataFrame:
    import pandas as pd

    frame = pd.DataFrame(rows, columns=[*keys, *METRIC_COLUMNS])
    dtypes = {name: "Int64" if name in _INT_COLUMNS else "float64" for name in METRIC_COLUMNS}
    return frame.astype(dtypes)


def _model_dirs(models: Iterable[str]) -> dict[str, str]:
    """Map each model to a distinct directory name; later colliders get ``-2``, ``-3``, ...

    Collisions are checked case-insensitively, for case-insensitive file systems.
    """
    dirs: dict[str, str] = {}
    taken: set[str] = set()
    for model in sorted(set(models)):
        base = name = model_dir_name(model)
        suffix = 2
        while name.lower() in taken:
            name, suffix = f"{base}-{suffix}", suffix + 1
        taken.add(name.lower())
        dirs[model] = name
    return dirs


def _write_csv(frame: pd.DataFrame, path: Path) -> Path:
    frame.round(_CSV_DECIMALS).to_csv(path, index=False)
    return path
