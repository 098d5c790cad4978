"""Pure aggregation of records into the run's summary: metric tables, verdicts, comparisons.

:func:`summarize` runs once on the controller at session end; the CSV files are written from
its tables by :mod:`.csvs`. The input is the list of wire records (see
:mod:`pytest_llmbench.results.record`); nothing here touches pytest, the network or the clock.

The metric columns and their counting rules are in :mod:`.aggregation` and the boards by axis in
:mod:`.grouping`; other stages import all of them from :mod:`pytest_llmbench.results`. The
terminal text is drawn by :mod:`pytest_llmbench.render.terminal`.

pandas is imported inside the functions: importing this module must stay cheap, because the
plugin imports it in every pytest run, evals or not.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .aggregation import (
    METRIC_COLUMNS,
    TOKEN_FIELDS,
    aggregate,
    conversation_columns,
    custom_columns,
    custom_metrics,
    dimension_columns,
    grade_errors,
    has_conversations,
    has_judges,
    judged_dimensions,
    metrics,
    metrics_frame,
)
from .csvs import (
    Tables,
    WrittenFiles,
    write_csvs,
)
from .effort_table import effort_board
from .grouping import (
    grouped,
    has_agent_runs,
    is_latency_only,
    ranked,
    varied_axes,
)
from .record import FIELDS
from .stats import NO_MODEL, CaseVerdict, Comparison, case_key, case_verdicts, compare
from .stats.agreement import DimensionAgreement, dimension_agreement
from .winrates import with_win_rates

if TYPE_CHECKING:
    import pandas as pd


_NUMERIC_FIELDS: tuple[str, ...] = (
    "repeat",
    "rate_limit_wait_s",
    "score",
    "ttft_s",
    "latency_s",
    *TOKEN_FIELDS,
    "tokens_per_s",
    "cost_usd",
    "judge_cost_usd",
    "judge_tokens",
    "transport_retries",
    "tool_call_count",
)
#: Suite name of the row that aggregates all suites of a model.
ALL_SUITES = "__all__"


def records_frame(
    records: Sequence[Mapping[str, Any]], errors_count_as: str = "fail"
) -> pd.DataFrame:
    """Return one row per record, record fields first, numeric fields as float (None -> NaN),
    then the graded outcome and score the rates count (see :func:`grade_errors`)."""
    import pandas as pd

    known = set(FIELDS)
    extra = [key for record in records for key in record if key not in known]
    columns = list(FIELDS) + list(dict.fromkeys(extra))
    frame = pd.DataFrame([dict(record) for record in records], columns=columns)
    # A plain test that only records a score has no model; it still gets a row of its own.
    frame["model"] = frame["model"].fillna(NO_MODEL)
    for name in _NUMERIC_FIELDS:
        frame[name] = pd.to_numeric(frame[name], errors="coerce").astype("float64")
    grade_errors(frame, errors_count_as)
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
    dimensions, custom, talks = judged_dimensions(own), custom_metrics(own), has_conversations(own)
    row = {"suite": ALL_SUITES, **metrics(own, dimensions, custom, talks)}
    total = metrics_frame([row], ["suite"], dimensions, custom, talks)
    return pd.concat([per_suite, total], ignore_index=True)


def leaderboard(frame: pd.DataFrame) -> pd.DataFrame:
    """Return one row per model, best first, with a 1-based ``rank`` column in front.

    Order: score_mean desc, pass_rate desc, cost_usd_total asc, model name; NaN sorts last.
    A run with agent items (:func:`has_agent_runs`): pass_hat_k desc first, then pass_rate.
    A latency-only run (:func:`is_latency_only`) has no scores: latency_s_p50 asc, then cost.
    """
    board = aggregate(frame, ["model"])
    return ranked(board, "model", is_latency_only(frame), agent=has_agent_runs(frame))


@dataclass(frozen=True)
class RunSummary:
    """What the session end derives from the records, computed once (:func:`summarize`).

    The recorder stashes it; the CSVs, the terminal, the CI outputs, the report and the gates
    read it instead of aggregating again.
    """

    records: tuple[Mapping[str, Any], ...]  #: the records in :func:`case_order`
    frame: pd.DataFrame  #: :func:`records_frame` of ``records``
    board: pd.DataFrame  #: :func:`leaderboard`
    all_metrics: pd.DataFrame  #: :func:`all_metrics`: one row per model and suite
    comparisons: tuple[Comparison, ...]  #: :func:`top_comparisons` in board order
    agreement: tuple[DimensionAgreement, ...]  #: judge agreement per dimension
    verdicts: tuple[CaseVerdict, ...]  #: :func:`~.stats.case_verdicts`
    grouped: Mapping[str, pd.DataFrame]  #: axis -> :func:`grouped`, per :func:`varied_axes`
    latency_only: bool  #: :func:`is_latency_only`
    judged: bool  #: whether any record has a judge entry
    #: model x effort (:func:`~.effort_table.effort_board`); None without the effort axis
    efforts: pd.DataFrame | None = None

    @property
    def models(self) -> tuple[str, ...]:
        """The models in board order."""
        return tuple(str(model) for model in self.board["model"])

    def model_table(self, model: str) -> pd.DataFrame:
        """:func:`model_aggregate` of ``model``, taken from the rows already aggregated."""
        import pandas as pd

        own = self.frame[self.frame["model"] == model]
        dimensions, custom = judged_dimensions(own), custom_metrics(own)
        columns = [
            "suite",
            *METRIC_COLUMNS,
            *dimension_columns(dimensions),
            *custom_columns(custom),
            *conversation_columns(has_conversations(own)),
        ]
        per_suite = self.all_metrics[self.all_metrics["model"] == model]
        total = self.board[self.board["model"] == model].assign(suite=ALL_SUITES)
        return pd.concat([per_suite[columns], total[columns]], ignore_index=True)


def case_order(record: Mapping[str, Any]) -> tuple[str, str, str, int, str]:
    """Sort key of a record: suite, case, model, repeat, node id.

    Records arrive in completion order (xdist); sorted, they give the same tables every time.
    """
    repeat = record.get("repeat")
    model = record.get("model")
    return (
        str(record.get("suite")),
        str(record.get("case_id")),
        NO_MODEL if model is None else str(model),
        repeat if isinstance(repeat, int) else -1,
        str(record.get("nodeid")),
    )


def summarize(records: Sequence[Mapping[str, Any]], errors_count_as: str = "fail") -> RunSummary:
    """Every table of the run, each computed once: the records frame, the aggregates by model
    and suite and by model, the repeat verdicts, the comparisons and the judge agreement.

    ``errors_count_as`` (``fail`` or ``skip``) is how errored items count in the rates.
    """
    ordered = tuple(sorted(records, key=case_order))
    frame = records_frame(ordered, errors_count_as)
    by_suite = all_metrics(frame)
    board = with_win_rates(_board(frame, by_suite), ordered)  # pairwise judging's win rates
    return RunSummary(
        records=ordered,
        frame=frame,
        board=board,
        all_metrics=by_suite,
        comparisons=tuple(top_comparisons(ordered, board["model"].tolist())),
        agreement=tuple(dimension_agreement(ordered)),
        verdicts=tuple(case_verdicts(ordered)),
        grouped={axis: grouped(frame, axis) for axis in varied_axes(frame)},
        latency_only=is_latency_only(frame),
        judged=has_judges(ordered),
        efforts=effort_board(frame),
    )


def _board(frame: pd.DataFrame, by_suite: pd.DataFrame) -> pd.DataFrame:
    """The leaderboard; when no model has several suites, its groups are those of
    ``by_suite`` already, and so are its rows."""
    if by_suite["model"].is_unique:
        rows = by_suite.drop(columns="suite")
        return ranked(rows, "model", is_latency_only(frame), agent=has_agent_runs(frame))
    return leaderboard(frame)


def write_aggregates(
    records: Sequence[Mapping[str, Any]], out_dir: Path, summary: RunSummary | None = None
) -> WrittenFiles | None:
    """Write the aggregate CSVs under ``out_dir``; return their paths, or None without records.

    ``summary`` is :func:`summarize` of ``records`` when the caller has it already.
    """
    if not records:
        return None
    summary = summary or summarize(records)
    tables = Tables(
        all_metrics=summary.all_metrics,
        board=summary.board,
        per_model={model: summary.model_table(model) for model in summary.models},
        agreement=summary.agreement if summary.judged else None,
        verdicts=summary.verdicts,
        comparisons=summary.comparisons,
        grouped=summary.grouped,
        efforts=summary.efforts,
    )
    return write_csvs(tables, out_dir)


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
