"""Results: from each finished item's record to the run's files, summary and exit status.

The stage after the engine. A worker attaches a plain record to each report (:mod:`.attach`,
built by :mod:`.item_record` under the contract of :mod:`.record`); the controller's
:mod:`.recorder` appends it to ``results.jsonl`` as it arrives and, at session end, computes the
run's summary once (:mod:`.summary`, with :mod:`.aggregation`, :mod:`.grouping` and
:mod:`.stats`), writes the CSV files (:mod:`.csvs`), lets :mod:`.gates` decide the exit status and
writes ``run.json``. :mod:`.baseline` reads saved runs back. Nothing here imports from the
render or report stages, nor pandas until a function needs it.

Other stages import the summary's names from here.
"""

from __future__ import annotations

from .aggregation import (
    ANSWERED,
    METRIC_COLUMNS,
    aggregate,
    dimension_columns,
    dimension_means,
    has_judges,
    is_missing,
    judge_usage,
    judged_dimensions,
    metrics,
    metrics_frame,
)
from .csvs import (
    AGREEMENT_COLUMNS,
    COMPARISON_COLUMNS,
    VERDICT_COLUMNS,
    Tables,
    WrittenFiles,
    agreement_frame,
    comparisons_frame,
    verdicts_frame,
    write_csvs,
)
from .grouping import (
    GROUP_AXES,
    LATENCY_ONLY,
    NO_VALUE,
    axis_column,
    axis_values,
    grouped,
    grouped_file_name,
    is_latency_only,
    model_dir_name,
    ranked,
    varied_axes,
)
from .stats import NO_MODEL
from .summary import (
    ALL_SUITES,
    RunSummary,
    all_metrics,
    case_order,
    leaderboard,
    model_aggregate,
    records_frame,
    summarize,
    top_comparisons,
    write_aggregates,
)

__all__ = [
    "AGREEMENT_COLUMNS",
    "ALL_SUITES",
    "ANSWERED",
    "COMPARISON_COLUMNS",
    "GROUP_AXES",
    "LATENCY_ONLY",
    "METRIC_COLUMNS",
    "NO_MODEL",
    "NO_VALUE",
    "VERDICT_COLUMNS",
    "RunSummary",
    "Tables",
    "WrittenFiles",
    "aggregate",
    "agreement_frame",
    "all_metrics",
    "axis_column",
    "axis_values",
    "case_order",
    "comparisons_frame",
    "dimension_columns",
    "dimension_means",
    "grouped",
    "grouped_file_name",
    "has_judges",
    "is_latency_only",
    "is_missing",
    "judge_usage",
    "judged_dimensions",
    "leaderboard",
    "metrics",
    "metrics_frame",
    "model_aggregate",
    "model_dir_name",
    "ranked",
    "records_frame",
    "summarize",
    "top_comparisons",
    "varied_axes",
    "verdicts_frame",
    "write_aggregates",
    "write_csvs",
]
