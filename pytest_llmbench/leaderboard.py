"""Pure aggregation of records into metric tables, CSV files and a terminal leaderboard.

Runs once on the controller at session end. The input is the list of wire records (see
:mod:`pytest_llmbench.record`); nothing here touches pytest, the network or the clock.

Counting rules:

- ``skipped`` items count in ``n_items`` and ``n_skipped`` and nowhere else.
- ``error`` items count in ``n_errors``; they are kept out of every mean, the percentiles and
  the pass rate, but tokens, cost, tool calls and retries they spent still count in the totals.
- Means and percentiles are over the answered (passed or failed) items that have the value.
- Confidence intervals (``*_ci_low``/``*_ci_high``, 95%) treat the repeats of a case as one
  cluster (:func:`pytest_llmbench.stats.clustered_mean`); the pass rate's is over the answered
  items as 0/1 values. ``n_flaky`` counts the cases whose answered repeats disagree;
  ``pass_at_k``/``pass_hat_k`` are averaged over the answered cases for ``k``, the fewest
  answered repeats of any of them.
- Judges: cost, tokens and failed judges count over every non-skipped item; the per-dimension
  means (``dim_<key>_mean``, one column per judged dimension after :data:`METRIC_COLUMNS`) are
  over the answered items that have the dimension.
- Multiple choice: ``mc_n`` counts the answered items with a ``choice``; ``mc_accuracy`` is the
  share of them whose choice is correct (NaN without any).
- A latency-only run (every record ``eval_type == "latency"``) has no scores: its boards rank by
  latency p50, fastest first (:func:`is_latency_only`).

pandas is imported inside the functions: importing this module must stay cheap, because the
plugin imports it in every pytest run, evals or not.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_llmbench.judging.agreement import (
    DimensionAgreement,
    dimension_agreement,
    dimension_order,
    judge_entries,
)
from pytest_llmbench.record import FIELDS
from pytest_llmbench.stats import (  # NO_MODEL lives in stats: case verdicts need it too
    NO_MODEL,
    Comparison,
    case_key,
    case_verdicts,
    compare,
    pass_at_k,
    pass_hat_k,
    summarize_repeats,
)
from pytest_llmbench.tables import is_missing

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
    # Multiple choice: answered items with a choice, and the share of them chosen right.
    "mc_n",
    "mc_accuracy",
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
    "judge_cost_total",
    "judge_tokens_total",
    "judge_errors",
    # Repeat-aware statistics (see pytest_llmbench.stats): 95% CIs clustered by case.
    "score_ci_low",
    "score_ci_high",
    "pass_rate_ci_low",
    "pass_rate_ci_high",
    "n_flaky",
    "pass_at_k",
    "pass_hat_k",
    "k",
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
    "judge_tokens_total",
    "judge_errors",
    "n_flaky",
    "k",
    "mc_n",
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
    "judge_cost",
    "judge_tokens",
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
_CSV_DECIMALS = 6


def model_dir_name(model: str) -> str:
    """Return a safe, non-empty directory name for ``model`` (``openai/x`` -> ``openai-x``)."""
    name = re.sub(r"[^A-Za-z0-9._-]", "-", model)
    name = re.sub(r"-{2,}", "-", name).strip("-.")
    return name or "model"


def records_frame(records: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """Return one row per record, record fields first, numeric fields as float (None -> NaN)."""
    import pandas as pd

    known = set(FIELDS)
    extra = [key for record in records for key in record if key not in known]
    columns = list(FIELDS) + list(dict.fromkeys(extra))
    frame = pd.DataFrame([dict(record) for record in records], columns=columns)
    # A plain test that only records a score has no model; it still gets a row of its own.
    frame["model"] = frame["model"].fillna(NO_MODEL)
    for name in _NUMERIC_FIELDS:
        frame[name] = pd.to_numeric(frame[name], errors="coerce").astype("float64")
    return frame


def aggregate(frame: pd.DataFrame, by: Sequence[str]) -> pd.DataFrame:
    """Return the metrics per group of ``by``, key columns first, rows sorted by key.

    The metrics are :data:`METRIC_COLUMNS`, then ``dim_<key>_mean`` for each dimension judged
    in ``frame`` (see :func:`judged_dimensions`).
    """
    keys, dimensions = list(by), judged_dimensions(frame)
    rows = [
        {**dict(zip(keys, key, strict=False)), **_metrics(group, dimensions)}
        for key, group in frame.groupby(keys, sort=True, dropna=False)
    ]
    return _metrics_frame(rows, keys, dimensions)


def judged_dimensions(frame: pd.DataFrame) -> list[str]:
    """The dimension keys in the ``dimensions`` of answered records, in report order."""
    answered = frame[frame["outcome"].isin(_ANSWERED)]
    return dimension_order(key for scores in answered["dimensions"] for key in _dict(scores))


def dimension_columns(dimensions: Iterable[str]) -> list[str]:
    """The aggregate column of each dimension key: ``dim_<key>_mean``."""
    return [f"dim_{key}_mean" for key in dimensions]


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
    dimensions = judged_dimensions(own)
    total = _metrics_frame(
        [{"suite": ALL_SUITES, **_metrics(own, dimensions)}], ["suite"], dimensions
    )
    return pd.concat([per_suite, total], ignore_index=True)


def leaderboard(frame: pd.DataFrame) -> pd.DataFrame:
    """Return one row per model, best first, with a 1-based ``rank`` column in front.

    Order: score_mean desc, pass_rate desc, cost_usd_total asc, model name; NaN sorts last.
    A latency-only run (:func:`is_latency_only`) has no scores: latency_s_p50 asc, then cost.
    """
    return _ranked(aggregate(frame, ["model"]), "model", is_latency_only(frame))


#: The axes :func:`grouped` groups by; ``tag:<name>`` reads ``model_tags[<name>]``.
GROUP_AXES: tuple[str, ...] = ("model", "profile", "prompt_variant", "temperature", "eval_type")
_TAG_AXIS = "tag:"
#: The key of records that lack the axis value (older runs, items without the variant).
NO_VALUE = "(none)"


def axis_column(axis: str) -> str:
    """The key column of ``axis`` in :func:`grouped`: the axis, or ``tag_<name>``.

    Raises :class:`ValueError` for an unknown axis, listing the known ones.
    """
    if axis in GROUP_AXES:
        return axis
    name = axis[len(_TAG_AXIS) :] if axis.startswith(_TAG_AXIS) else ""
    if not name.strip():
        known = ", ".join([*GROUP_AXES, "tag:<name>"])
        raise ValueError(f"unknown group axis {axis!r}; known: {known}")
    return f"tag_{name}"


def axis_values(frame: pd.DataFrame, axis: str) -> list[str]:
    """The value of ``axis`` for each row of ``frame``, as text; :data:`NO_VALUE` if missing."""
    axis_column(axis)  # validates
    if axis.startswith(_TAG_AXIS):
        name = axis[len(_TAG_AXIS) :]
        column = frame["model_tags"] if "model_tags" in frame else [None] * len(frame)
        return [_axis_text(_dict(tags).get(name)) for tags in column]
    values = frame[axis] if axis in frame else [None] * len(frame)
    texts = [_axis_text(value) for value in values]
    if axis == "eval_type":  # records from before eval types were all quality evals
        return ["quality" if text == NO_VALUE else text for text in texts]
    return texts


def _axis_text(value: Any) -> str:
    if is_missing(value) or value == "":
        return NO_VALUE
    if isinstance(value, float):
        return f"{value:g}"  # temperatures: 0.2, not 0.20000000000000001
    return str(value)


def grouped(frame: pd.DataFrame, axis: str) -> pd.DataFrame:
    """Return one row per value of ``axis``, ranked like :func:`leaderboard`.

    ``axis`` is one of :data:`GROUP_AXES` or ``tag:<name>``; the key column is named by
    :func:`axis_column`, its values are text (:data:`NO_VALUE` when a record lacks one). The
    metric columns are those of :func:`aggregate`; a ``rank`` column comes first. Raises
    :class:`ValueError` for an unknown axis.
    """
    column = axis_column(axis)
    keyed = frame.assign(**{column: axis_values(frame, axis)})
    return _ranked(aggregate(keyed, [column]), column, is_latency_only(frame))


def is_latency_only(frame: pd.DataFrame) -> bool:
    """Whether every record is a latency measurement (``--latency-only``): no scores to rank."""
    if frame.empty or "eval_type" not in frame:
        return False
    return bool((frame["eval_type"] == "latency").all())


def _ranked(board: pd.DataFrame, key: str, latency: bool) -> pd.DataFrame:
    """Sort ``board`` best first and put a 1-based ``rank`` column in front.

    Quality: score_mean desc, pass_rate desc, cost_usd_total asc, key. Latency runs:
    latency_s_p50 asc, cost_usd_total asc, key. NaN sorts last.
    """
    if latency:
        order, ascending = ["latency_s_p50", "cost_usd_total", key], [True, True, True]
    else:
        order = ["score_mean", "pass_rate", "cost_usd_total", key]
        ascending = [False, False, True, True]
    board = board.sort_values(order, ascending=ascending, na_position="last", kind="stable")
    board = board.reset_index(drop=True)
    board.insert(0, "rank", range(1, len(board) + 1))
    board.attrs[LATENCY_ONLY] = latency  # format_leaderboard reads it
    return board


#: Key of a board's ``attrs`` that tells a latency-only board (see :func:`format_leaderboard`).
LATENCY_ONLY = "llmbench_latency_only"


def varied_axes(frame: pd.DataFrame) -> list[str]:
    """The axes besides ``model`` worth a :func:`grouped` table of their own, in order.

    :data:`GROUP_AXES` first, then ``tag:<name>`` for each name in ``model_tags``, sorted; an
    axis counts when it has at least 2 distinct values and does not merely rename the models
    (one value per model and one model per value, as ``profile`` in a run without prompt or
    temperature variants): that table would be the leaderboard again.
    """
    tags = sorted({name for value in frame.get("model_tags", ()) for name in _dict(value)})
    axes = [axis for axis in GROUP_AXES if axis != "model"] + [f"tag:{name}" for name in tags]
    models = [str(model) for model in frame["model"]]
    found = []
    for axis in axes:
        values = axis_values(frame, axis)
        pairs = set(zip(models, values, strict=True))
        renames = len(pairs) == len(set(models)) == len(set(values))
        if len(set(values)) >= 2 and not renames:
            found.append(axis)
    return found


def grouped_file_name(axis: str) -> str:
    """``by_<axis>.csv``; ``by_tag_<name>.csv`` for a tag (its name made safe for a file)."""
    return f"by_{model_dir_name(axis_column(axis))}.csv"


@dataclass(frozen=True)
class WrittenFiles:
    """Paths written by :func:`write_aggregates`."""

    #: ``all_metrics.csv``: one row per model and suite.
    all_metrics: Path
    #: ``leaderboard.csv``: one row per model, ranked.
    leaderboard: Path
    #: model -> path of its ``<model_dir_name>/aggregate_metrics.csv``.
    per_model: Mapping[str, Path]
    #: ``judge_agreement.csv``: one row per judged dimension; None when no item had judges.
    judge_agreement: Path | None = None
    #: ``case_verdicts.csv``: one row per model and case (see :data:`VERDICT_COLUMNS`).
    case_verdicts: Path | None = None
    #: ``comparisons.csv``: the top model against each other one (see
    #: :data:`COMPARISON_COLUMNS`); only the header with a single model.
    comparisons: Path | None = None
    #: axis -> ``by_<axis>.csv`` (:func:`grouped`), for each of :func:`varied_axes`.
    grouped: Mapping[str, Path] = field(default_factory=dict)


@dataclass(frozen=True)
class RunSummary:
    """What the session end derives from the records, computed once (:func:`summarize`)."""

    frame: pd.DataFrame  #: :func:`records_frame`
    board: pd.DataFrame  #: :func:`leaderboard`
    comparisons: tuple[Comparison, ...]  #: :func:`top_comparisons` in board order
    agreement: tuple[DimensionAgreement, ...]  #: judge agreement per dimension


def summarize(records: Sequence[Mapping[str, Any]]) -> RunSummary:
    """The records frame, the leaderboard, the paired comparisons and the judge agreement."""
    frame = records_frame(records)
    board = leaderboard(frame)
    return RunSummary(
        frame=frame,
        board=board,
        comparisons=tuple(top_comparisons(records, board["model"].tolist())),
        agreement=tuple(dimension_agreement(records)),
    )


def write_aggregates(
    records: Sequence[Mapping[str, Any]], out_dir: Path, summary: RunSummary | None = None
) -> WrittenFiles | None:
    """Write the aggregate CSVs under ``out_dir``; return their paths, or None without records.

    ``summary`` is :func:`summarize` of ``records`` when the caller has it already.
    """
    if not records:
        return None
    summary = summary or summarize(records)
    frame = summary.frame
    out_dir.mkdir(parents=True, exist_ok=True)
    per_model: dict[str, Path] = {}
    for model, dir_name in _model_dirs(frame["model"].tolist()).items():
        (out_dir / dir_name).mkdir(exist_ok=True)
        path = out_dir / dir_name / "aggregate_metrics.csv"
        per_model[model] = _write_csv(model_aggregate(frame, model), path)
    agreement = None
    if has_judges(records):
        rows = agreement_frame(summary.agreement)
        agreement = _write_csv(rows, out_dir / "judge_agreement.csv")
    by_axis = {
        axis: _write_csv(grouped(frame, axis), out_dir / grouped_file_name(axis))
        for axis in varied_axes(frame)
    }
    return WrittenFiles(
        all_metrics=_write_csv(all_metrics(frame), out_dir / "all_metrics.csv"),
        leaderboard=_write_csv(summary.board, out_dir / "leaderboard.csv"),
        per_model=per_model,
        judge_agreement=agreement,
        case_verdicts=_write_csv(verdicts_frame(records), out_dir / "case_verdicts.csv"),
        comparisons=_write_csv(comparisons_frame(summary.comparisons), out_dir / "comparisons.csv"),
        grouped=by_axis,
    )


#: Columns of ``case_verdicts.csv``: the fields of :class:`~pytest_llmbench.stats.CaseVerdict`.
VERDICT_COLUMNS: tuple[str, ...] = (
    "model",
    "suite",
    "case_id",
    "n",
    "passed",
    "errors",
    "pass_rate",
    "k",
    "pass_at_k",
    "pass_hat_k",
    "verdict",
)


def verdicts_frame(records: Iterable[Mapping[str, Any]]) -> pd.DataFrame:
    """One row per model and case: repeats answered, passed, errors, pass rate and verdict."""
    import pandas as pd

    verdicts = case_verdicts(records)
    # k per model, as in the aggregates: the fewest answered repeats of any of its cases.
    k_of: dict[str, int] = {}
    for verdict in verdicts:
        if verdict.n:
            k_of[verdict.model] = min(k_of.get(verdict.model, verdict.n), verdict.n)
    rows = []
    for verdict in verdicts:
        row: dict[str, Any] = asdict(verdict)
        k = k_of.get(verdict.model)
        if k and verdict.n:
            row.update(
                k=k,
                pass_at_k=pass_at_k(verdict.n, verdict.passed, k),
                pass_hat_k=pass_hat_k(verdict.n, verdict.passed, k),
            )
        rows.append(row)
    frame = pd.DataFrame(rows, columns=list(VERDICT_COLUMNS))
    return frame.astype({"pass_rate": "float64", "pass_at_k": "float64", "pass_hat_k": "float64"})


def top_comparisons(
    records: Sequence[Mapping[str, Any]], models: Sequence[str], *, seed: int = 0
) -> list[Comparison]:
    """The first of ``models`` (the leaderboard's best) against each other one, in order.

    Two comparisons per other model, score then pass rate (see
    :func:`pytest_llmbench.stats.compare`); ``diff`` is other minus best.
    """
    if len(models) < 2:
        return []
    by_model: dict[str, list[Mapping[str, Any]]] = {}
    for record in records:
        by_model.setdefault(case_key(record)[0], []).append(record)
    best = models[0]
    return [
        comparison
        for other in models[1:]
        for comparison in compare(
            by_model.get(best, []), by_model.get(other, []), best, other, seed=seed
        )
    ]


#: Columns of ``comparisons.csv``.
COMPARISON_COLUMNS: tuple[str, ...] = (
    "model_a",
    "model_b",
    "metric",
    "n_cases",
    "diff",
    "ci_low",
    "ci_high",
    "p_value",
    "significant",
)


def comparisons_frame(comparisons: Iterable[Comparison]) -> pd.DataFrame:
    """One row per comparison, columns :data:`COMPARISON_COLUMNS`."""
    import pandas as pd

    rows = [
        (c.model_a, c.model_b, c.metric, c.n_cases, c.diff, c.low, c.high, c.p_value, c.significant)
        for c in comparisons
    ]
    frame = pd.DataFrame(rows, columns=list(COMPARISON_COLUMNS))
    return frame.astype({"n_cases": "int64", "diff": "float64", "significant": "bool"})


def has_judges(records: Iterable[Mapping[str, Any]]) -> bool:
    """Whether any record has a judge entry (failed judges included)."""
    return any(judge_entries(record.get("judges")) for record in records)


#: Columns of ``judge_agreement.csv``: the fields of :class:`DimensionAgreement`.
AGREEMENT_COLUMNS: tuple[str, ...] = ("dimension", "alpha", "units", "judges", "values")


def agreement_frame(agreement: Iterable[DimensionAgreement]) -> pd.DataFrame:
    """Return one row per judged dimension: Krippendorff's alpha and what it is over."""
    import pandas as pd

    rows = [asdict(row) for row in agreement]
    return pd.DataFrame(rows, columns=list(AGREEMENT_COLUMNS)).astype({"alpha": "float64"})


_BOARD_HEADER: tuple[str, ...] = (
    "#",
    "model",
    "score [95% CI]",
    "pass",
    "errors",
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
_VS_TOP_HEADER = "vs #1"
# Long model names are cut so that a row stays within 100 columns.
_MODEL_WIDTH = 20


def format_leaderboard(
    board: pd.DataFrame, max_rows: int = 20, comparisons: Sequence[Comparison] = ()
) -> list[str]:
    """Return a fixed-width text table of ``board`` (from :func:`leaderboard`), header first.

    The score shows its 95% CI; an ``MC acc`` column follows the pass rate when any item was
    multiple choice. With ``comparisons`` (from :func:`top_comparisons`) a ``vs #1`` column
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
    return lines


def _quality_table(
    board: pd.DataFrame, shown: pd.DataFrame, comparisons: Sequence[Comparison]
) -> tuple[tuple[str, ...], list[tuple[str, ...]]]:
    """The header and rows of a board of scores."""
    versus = {c.model_b: c for c in comparisons if c.metric == "score"}
    accuracy = bool("mc_n" in board and (board["mc_n"].fillna(0) > 0).any())
    header = list(_BOARD_HEADER)
    if accuracy:
        header.insert(_BOARD_HEADER.index("pass") + 1, _ACCURACY_HEADER)
    if versus:
        header.append(_VS_TOP_HEADER)
    rows = [_board_cells(row, versus, accuracy) for _, row in shown.iterrows()]
    return tuple(header), rows


def _board_cells(
    row: pd.Series, versus: Mapping[str, Comparison], accuracy: bool = False
) -> tuple[str, ...]:
    model = str(row["model"])
    cells = [
        str(row["rank"]),
        _model_cell(model),
        _score_cell(row),
        _percent(row["pass_rate"]),
        _fmt(row["n_errors"], "d"),
        _fmt(row["cost_usd_total"], ".4f"),
        _fmt(row["latency_s_p50"], ".2f"),
        _fmt(row["ttft_s_p50"], ".2f"),
    ]
    if accuracy:
        cells.insert(_BOARD_HEADER.index("pass") + 1, _percent(row["mc_accuracy"]))
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
        _fmt(row["n_errors"], "d"),
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
    answered = frame[frame["outcome"].isin(_ANSWERED)]
    dimensions = dimension_order([*agreement, *judged_dimensions(frame)])
    means = _dimension_means(answered, dimensions)
    rows = [
        (key, _fmt(means[column], ".3f"), *_agreement_cells(agreement.get(key)))
        for key, column in zip(dimensions, dimension_columns(dimensions), strict=True)
    ]
    usage = _judge_usage(frame[frame["outcome"] != "skipped"])
    cost = usage["judge_cost_total"]
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


def _metrics(group: pd.DataFrame, dimensions: Sequence[str]) -> dict[str, Any]:
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
        **_judge_usage(spent),
        **_repeat_stats(group),
        **_choice_stats(answered),
        **_dimension_means(answered, dimensions),
    }


def _choice_stats(answered: pd.DataFrame) -> dict[str, Any]:
    """``mc_n`` and ``mc_accuracy`` over the answered multiple-choice items."""
    choices = [_dict(value) for value in answered["choice"]] if "choice" in answered else []
    correct = [bool(choice.get("correct")) for choice in choices if choice]
    return {"mc_n": len(correct), "mc_accuracy": _ratio(sum(correct), len(correct))}


_CASE_FIELDS = ["model", "suite", "case_id", "outcome", "score"]


def _repeat_stats(group: pd.DataFrame) -> dict[str, Any]:
    """Clustered CIs of the score and pass rate, flaky cases, pass@k and pass^k."""
    columns = [group[name].tolist() for name in _CASE_FIELDS]
    records = [
        dict(zip(_CASE_FIELDS, values, strict=True)) for values in zip(*columns, strict=True)
    ]
    summary = summarize_repeats(records)
    score, passing, at_k = summary.score, summary.pass_rate, summary.at_k
    return {
        "score_ci_low": math.nan if score is None else score.low,
        "score_ci_high": math.nan if score is None else score.high,
        "pass_rate_ci_low": math.nan if passing is None else passing.low,
        "pass_rate_ci_high": math.nan if passing is None else passing.high,
        "n_flaky": summary.n_flaky,
        "pass_at_k": math.nan if at_k is None else at_k.pass_at_k,
        "pass_hat_k": math.nan if at_k is None else at_k.pass_hat_k,
        "k": None if at_k is None else at_k.k,
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


def _judge_usage(spent: pd.DataFrame) -> dict[str, Any]:
    """Judge spending of the non-skipped items: cost (None if unknown), tokens, failed judges."""
    return {
        "judge_cost_total": spent["judge_cost"].sum(min_count=1),
        "judge_tokens_total": int(spent["judge_tokens"].sum()),
        "judge_errors": sum(
            1
            for entries in spent["judges"]
            for entry in judge_entries(entries)
            if entry.get("error")
        ),
    }


def _dimension_means(answered: pd.DataFrame, dimensions: Sequence[str]) -> dict[str, float]:
    """``dim_<key>_mean`` of each dimension over the answered items that have it (NaN if none)."""
    known: dict[str, list[float]] = {key: [] for key in dimensions}
    for scores in answered["dimensions"]:
        for key, value in _dict(scores).items():
            if key in known and value is not None:
                known[key].append(float(value))
    return {
        column: math.fsum(values) / len(values) if values else math.nan
        for column, values in zip(dimension_columns(dimensions), known.values(), strict=True)
    }


def _dict(value: Any) -> dict[str, Any]:
    # Older records have no ``dimensions``/``judges``: the frame holds NaN in their place.
    return value if isinstance(value, dict) else {}


def _ratio(part: int, whole: int) -> float:
    return part / whole if whole else math.nan


def _int_total(values: pd.Series) -> int | None:
    """Sum of the known values, or None when no item has one (unknown is not zero)."""
    known = values.dropna()
    return int(known.sum()) if len(known) else None


def _metrics_frame(
    rows: list[dict[str, Any]], keys: list[str], dimensions: Sequence[str]
) -> pd.DataFrame:
    import pandas as pd

    columns = [*METRIC_COLUMNS, *dimension_columns(dimensions)]
    frame = pd.DataFrame(rows, columns=[*keys, *columns])
    dtypes = {name: "Int64" if name in _INT_COLUMNS else "float64" for name in columns}
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
