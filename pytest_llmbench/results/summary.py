"""Pure aggregation of records into metric tables, CSV files and a terminal leaderboard.

Runs once on the controller at session end. The input is the list of wire records (see
:mod:`pytest_llmbench.results.record`); nothing here touches pytest, the network or the clock.

The metric columns and their counting rules are in :mod:`.aggregation` and the boards by axis in
:mod:`.grouping`; their public names are importable from here too. The terminal text is drawn
by :mod:`pytest_llmbench.render.terminal`.

pandas is imported inside the functions: importing this module must stay cheap, because the
plugin imports it in every pytest run, evals or not.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .aggregation import (
    METRIC_COLUMNS,
    aggregate,
    dimension_columns,
    has_judges,
    judged_dimensions,
    metrics,
    metrics_frame,
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
from .record import FIELDS
from .stats import NO_MODEL, Comparison, case_key, case_verdicts, compare, pass_at_k, pass_hat_k
from .stats.agreement import DimensionAgreement, dimension_agreement

if TYPE_CHECKING:
    import pandas as pd

#: Names of :mod:`.aggregation` and :mod:`.grouping` that callers import from here.
__all__ = [
    "GROUP_AXES",
    "LATENCY_ONLY",
    "METRIC_COLUMNS",
    "NO_MODEL",
    "NO_VALUE",
    "aggregate",
    "axis_column",
    "axis_values",
    "dimension_columns",
    "grouped",
    "grouped_file_name",
    "has_judges",
    "is_latency_only",
    "judged_dimensions",
    "model_dir_name",
    "varied_axes",
]

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
#: Suite name of the row that aggregates all suites of a model.
ALL_SUITES = "__all__"
_CSV_DECIMALS = 6


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
    total = metrics_frame(
        [{"suite": ALL_SUITES, **metrics(own, dimensions)}], ["suite"], dimensions
    )
    return pd.concat([per_suite, total], ignore_index=True)


def leaderboard(frame: pd.DataFrame) -> pd.DataFrame:
    """Return one row per model, best first, with a 1-based ``rank`` column in front.

    Order: score_mean desc, pass_rate desc, cost_usd_total asc, model name; NaN sorts last.
    A latency-only run (:func:`is_latency_only`) has no scores: latency_s_p50 asc, then cost.
    """
    return ranked(aggregate(frame, ["model"]), "model", is_latency_only(frame))


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


#: Columns of ``case_verdicts.csv``: the fields of :class:`~pytest_llmbench.results.stats.CaseVerdict`.
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
    :func:`pytest_llmbench.results.stats.compare`); ``diff`` is other minus best.
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


#: Columns of ``judge_agreement.csv``: the fields of :class:`DimensionAgreement`.
AGREEMENT_COLUMNS: tuple[str, ...] = ("dimension", "alpha", "units", "judges", "values")


def agreement_frame(agreement: Iterable[DimensionAgreement]) -> pd.DataFrame:
    """Return one row per judged dimension: Krippendorff's alpha and what it is over."""
    import pandas as pd

    rows = [asdict(row) for row in agreement]
    return pd.DataFrame(rows, columns=list(AGREEMENT_COLUMNS)).astype({"alpha": "float64"})


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
