"""The aggregate CSV files of a run and the frames they are written from.

:func:`write_csvs` writes the tables a :class:`~pytest_llmbench.results.summary.RunSummary`
holds; it computes nothing but the file layout, so the session end aggregates once and writes
what it computed. pandas is imported inside the functions: importing this module stays cheap.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..results_folder import (
    ALL_METRICS_FILE,
    BY_EFFORT_FILE,
    CASE_VERDICTS_FILE,
    COMPARISONS_FILE,
    JUDGE_AGREEMENT_FILE,
    LEADERBOARD_FILE,
    ResultsFolder,
)
from .grouping import grouped_file_name, model_dir_name
from .stats import CaseVerdict, Comparison, pass_at_k, pass_hat_k
from .stats.agreement import DimensionAgreement

if TYPE_CHECKING:
    import pandas as pd

_CSV_DECIMALS = 6


@dataclass(frozen=True)
class WrittenFiles:
    """Paths written by :func:`write_csvs`."""

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
    #: axis -> ``by_<axis>.csv``, for each axis with several values.
    grouped: Mapping[str, Path] = field(default_factory=dict)
    #: ``by_effort.csv``: each model's efforts side by side; None without the effort axis.
    by_effort: Path | None = None


@dataclass(frozen=True)
class Tables:
    """What :func:`write_csvs` writes, each computed once by the caller."""

    all_metrics: pd.DataFrame  #: one row per model and suite
    board: pd.DataFrame  #: the leaderboard
    per_model: Mapping[str, pd.DataFrame]  #: model -> its suites and an ``__all__`` row
    agreement: tuple[DimensionAgreement, ...] | None  #: None when no item had judges
    verdicts: tuple[CaseVerdict, ...]
    comparisons: tuple[Comparison, ...]
    grouped: Mapping[str, pd.DataFrame]  #: axis -> its board
    #: model x effort (:func:`~.effort_table.effort_board`); None without the effort axis
    efforts: pd.DataFrame | None = None


def write_csvs(tables: Tables, out_dir: Path) -> WrittenFiles:
    """Write every aggregate CSV of ``tables`` under ``out_dir``; return their paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    folder = ResultsFolder(out_dir)
    per_model: dict[str, Path] = {}
    for model, dir_name in _model_dirs(tables.per_model).items():
        (out_dir / dir_name).mkdir(exist_ok=True)
        path = folder.model_aggregate(dir_name)
        per_model[model] = _write_csv(tables.per_model[model], path)
    agreement = None
    if tables.agreement is not None:
        rows = agreement_frame(tables.agreement)
        agreement = _write_csv(rows, folder.file(JUDGE_AGREEMENT_FILE))
    by_axis = {
        axis: _write_csv(board, folder.file(grouped_file_name(axis)))
        for axis, board in tables.grouped.items()
    }
    verdicts, comparisons = verdicts_frame(tables.verdicts), comparisons_frame(tables.comparisons)
    efforts = tables.efforts
    by_effort = None if efforts is None else _write_csv(efforts, folder.file(BY_EFFORT_FILE))
    return WrittenFiles(
        all_metrics=_write_csv(tables.all_metrics, folder.file(ALL_METRICS_FILE)),
        leaderboard=_write_csv(tables.board, folder.file(LEADERBOARD_FILE)),
        per_model=per_model,
        judge_agreement=agreement,
        case_verdicts=_write_csv(verdicts, folder.file(CASE_VERDICTS_FILE)),
        comparisons=_write_csv(comparisons, folder.file(COMPARISONS_FILE)),
        grouped=by_axis,
        by_effort=by_effort,
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
    "human_verdicts",
    "verdict_source",
)


_VERDICT_FIELDS = tuple(item.name for item in fields(CaseVerdict))


def verdicts_frame(verdicts: Iterable[CaseVerdict]) -> pd.DataFrame:
    """One row per model and case: repeats answered, passed, errors, pass rate and verdict."""
    import pandas as pd

    verdicts = list(verdicts)
    # k per model, as in the aggregates: the fewest answered repeats of any of its cases.
    k_of: dict[str, int] = {}
    for verdict in verdicts:
        if verdict.n:
            k_of[verdict.model] = min(k_of.get(verdict.model, verdict.n), verdict.n)
    rows = []
    for verdict in verdicts:
        # Every field is a plain value: no deep copy (``asdict``) per case.
        row: dict[str, Any] = {name: getattr(verdict, name) for name in _VERDICT_FIELDS}
        row["verdict_source"] = verdict_source(verdict.human_verdicts, verdict.n)
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


def verdict_source(humans: int, answered: int) -> str:
    """Who decided a case's answered repeats: ``machine``, ``human`` (a person, each), or
    ``mixed``."""
    if humans == 0:
        return "machine"
    return "human" if humans >= answered else "mixed"


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
