"""The standalone report's plotly charts, built from a records frame and its leaderboard.

Each builder returns a :class:`Chart`: a figure, or the one-line reason it is left out when the
run has no data for it (no streamed call has a TTFT, no jury ran, no error happened, ...).
Models keep the leaderboard's order and one colour each across every chart. Figures hold plain
lists rounded to 6 decimals, so the same records always give the same JSON.

A figure is plotly.js's JSON as plain data (``{"data": [traces], "layout": {...}}``), built
with :mod:`.plotly_json` and drawn in the page by the inlined plotly.js: building plotly.py's
validated objects cost more CPU than the rest of a small run's session end, and plotly.py is no
dependency of ours.

pandas is imported inside the functions: the plugin imports this package in runs that never
write a report.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..results import dimension_order, is_missing, judge_entries
from .plotly_json import (
    KIND_COLOURS,
    METRIC_COLOURS,
    MODEL_COLOURS,
    error_bars,
    lookup,
    new_figure,
    number_list,
    rounded,
    set_layout,
    text_list,
)

# Moved to .plotly_json, still importable here; a test greps this file for `_trace("<type>"`.
from .plotly_json import TEMPLATE_FILE as TEMPLATE_FILE
from .plotly_json import TRACE_TYPES as TRACE_TYPES
from .plotly_json import Chart as Chart
from .plotly_json import Figure as Figure
from .plotly_json import chart_template as chart_template
from .plotly_json import trace as _trace

if TYPE_CHECKING:
    import pandas as pd

#: Task type shown for records whose case has no ``task``.
NO_TASK = "(none)"
_ANSWERED = ("passed", "failed")
_PERCENTILES = ((0.5, "p50"), (0.95, "p95"), (0.99, "p99"))
#: Jury dimensions are scored 1..5 (see judging/spec.py).
_JURY_RANGE = (1.0, 5.0)


@dataclass(frozen=True)
class ChartInput:
    """What the builders read: the records frame, the leaderboard, the model order."""

    #: :func:`pytest_llmbench.results.summary.records_frame` of the run's records
    frame: pd.DataFrame
    #: :func:`pytest_llmbench.results.summary.leaderboard` of ``frame``
    board: pd.DataFrame
    #: models in leaderboard order
    models: tuple[str, ...]
    #: every record is a latency measurement (``--latency-only``): no score charts
    latency_only: bool = False

    @property
    def answered(self) -> pd.DataFrame:
        """The passed and failed records (errors and skips stay out of scores and timings)."""
        return self.frame[self.frame["outcome"].isin(_ANSWERED)]

    def colour(self, model: str) -> str:
        """The model's colour, the same in every chart."""
        return MODEL_COLOURS[self.models.index(model) % len(MODEL_COLOURS)]


#: A chart builder: reads the run, returns its chart (or why it is left out).
Builder = Callable[[ChartInput], Chart]


def build_sections(data: ChartInput) -> list[tuple[str, list[Chart]]]:
    """Every chart of the report, grouped under its section heading, in report order.

    A latency-only run has no scores: no score section, no score chart, no judges.
    """
    if data.latency_only:
        return [
            (heading, [build(data) for build in builders]) for heading, builders in _LATENCY_LAYOUT
        ]
    layout: tuple[tuple[str, tuple[Builder, ...]], ...] = (
        ("Leaderboard", (leaderboard_chart,)),
        ("Scores", (score_heatmap, task_heatmap)),
        ("Latency", (latency_percentiles, latency_distribution, tokens_per_s)),
        ("Cost", (cost_vs_score, cost_breakdown)),
        ("Judges", (judge_radar,)),
        ("Errors", (error_breakdown,)),
    )
    return [(heading, [build(data) for build in builders]) for heading, builders in layout]


def grouped_chart(board: pd.DataFrame, axis: str, latency_only: bool = False) -> Chart:
    """One bar per value of ``axis`` (a :func:`~pytest_llmbench.results.summary.grouped` board):
    the score mean with its 95% CI, or for a latency-only run the latency p50."""
    from ..results import axis_column

    key = axis_column(axis)
    name = "by-" + re.sub(r"[^a-z0-9]+", "-", key.lower()).strip("-")
    column, label = (
        ("latency_s_p50", "latency p50 (s)") if latency_only else ("score_mean", "score")
    )
    title = f"{label.capitalize()} per {axis}" + ("" if latency_only else " (95% CI)")
    if board[column].isna().all():
        return Chart(name, title, None, f"No value of {axis} has a {label}.")
    bars = _trace(
        "bar",
        name=label,
        x=text_list(board[key]),
        y=number_list(board[column]),
        marker_color=METRIC_COLOURS[0],
        error_y=None
        if latency_only
        else error_bars(board, column, "score_ci_low", "score_ci_high"),
        hovertemplate="%{x}: %{y:.3f}<extra>" + label + "</extra>",
    )
    figure = new_figure(bars)
    set_layout(figure, xaxis={"title": {"text": axis}, "type": "category"},
            yaxis={"title": {"text": label}})  # fmt: skip
    return Chart(name, title, figure)


def leaderboard_chart(data: ChartInput) -> Chart:
    """Score mean and pass rate per model, with 95% CI error bars when the board has them."""
    name, title = "leaderboard", "Score and pass rate per model (95% CI)"
    board = data.board
    if board["score_mean"].isna().all() and board["pass_rate"].isna().all():
        return Chart(name, title, None, "No answered item: no score or pass rate.")
    traces = [
        _trace(
            "bar",
            name=label,
            x=text_list(board["model"]),
            y=number_list(board[column]),
            marker_color=colour,
            error_y=error_bars(board, column, f"{prefix}_ci_low", f"{prefix}_ci_high"),
            hovertemplate="%{x}: %{y:.3f}<extra>" + label + "</extra>",
        )
        for (label, column, prefix), colour in zip(
            (("score", "score_mean", "score"), ("pass rate", "pass_rate", "pass_rate")),
            METRIC_COLOURS,
            strict=True,
        )
    ]
    figure = new_figure(traces)
    set_layout(figure, barmode="group", yaxis={"title": {"text": "0..1"}, "range": [0, 1.05]})
    return Chart(name, title, figure)


def score_heatmap(data: ChartInput) -> Chart:
    """Score mean by model (rows) and suite (columns)."""
    name, title = "score-heatmap", "Score mean by model and suite"
    scored = data.answered.dropna(subset=["score"])
    if scored.empty:
        return Chart(name, title, None, "No answered item has a score.")
    means = scored.groupby(["model", "suite"])["score"].mean()
    suites = sorted({str(suite) for suite in scored["suite"]})
    models = [model for model in data.models if model in set(scored["model"])]
    z = [[lookup(means, (model, suite)) for suite in suites] for model in models]
    return Chart(name, title, _heatmap(z, suites, models, "suite", "score"))


def task_heatmap(data: ChartInput) -> Chart:
    """Pass rate by task type (rows) and model (columns); ``(none)`` for cases without a task."""
    name, title = "task-heatmap", "Success rate by task type and model"
    answered = data.answered
    if answered.empty:
        return Chart(name, title, None, "No answered item: no success rate.")
    frame = answered.assign(
        task_type=[task_type(task) for task in answered["task"]],
        passed=answered["outcome"] == "passed",
    )
    rates = frame.groupby(["task_type", "model"])["passed"].mean()
    types = sorted(set(frame["task_type"]))
    models = [model for model in data.models if model in set(frame["model"])]
    z = [[lookup(rates, (kind, model)) for model in models] for kind in types]
    return Chart(name, title, _heatmap(z, models, types, "model", "success rate"))


def latency_percentiles(data: ChartInput) -> Chart:
    """TTFT and total latency p50/p95/p99 per model, as grouped bars (one colour per model)."""
    name, title = "latency-percentiles", "TTFT and total latency percentiles (s)"
    answered = data.answered
    metrics = [(label, column) for label, column in _TIMINGS if answered[column].notna().any()]
    if not metrics:
        return Chart(name, title, None, "No answered item has a latency.")
    x = [f"{label} {suffix}" for label, _ in metrics for _, suffix in _PERCENTILES]
    traces = []
    for model in _models_with(data, answered, [column for _, column in metrics]):
        own = answered[answered["model"] == model]
        y = [rounded(own[column].quantile(q)) for _, column in metrics for q, _ in _PERCENTILES]
        traces.append(_trace("bar", name=model, x=x, y=y, marker_color=data.colour(model)))
    figure = new_figure(traces)
    set_layout(figure, barmode="group", yaxis={"title": {"text": "seconds"}})
    return Chart(name, title, figure)


_TIMINGS = (("TTFT", "ttft_s"), ("total", "latency_s"))


def latency_distribution(data: ChartInput) -> Chart:
    """TTFT and total latency per model, as box plots."""
    name, title = "latency-distribution", "Latency distribution per model (s)"
    answered = data.answered
    metrics = [(label, column) for label, column in _TIMINGS if answered[column].notna().any()]
    if not metrics:
        return Chart(name, title, None, "No answered item has a latency.")
    traces = []
    for (label, column), colour in zip(metrics, METRIC_COLOURS, strict=False):
        known = answered.dropna(subset=[column])
        known = known.iloc[_model_rank(data, known["model"])]
        traces.append(
            _trace(
                "box",
                name=label,
                x=text_list(known["model"]),
                y=number_list(known[column]),
                marker_color=colour,
                boxpoints=False,
            )
        )
    figure = new_figure(traces)
    set_layout(figure, boxmode="group", yaxis={"title": {"text": "seconds"}})
    return Chart(name, title, figure)


def tokens_per_s(data: ChartInput) -> Chart:
    """Output tokens per second per model, as box plots."""
    name, title = "tokens-per-s", "Output tokens per second per model"
    answered = data.answered.dropna(subset=["tokens_per_s"])
    if answered.empty:
        return Chart(name, title, None, "No answered item has a tokens-per-second value.")
    traces = [
        _trace(
            "box",
            name=model,
            y=number_list(answered.loc[answered["model"] == model, "tokens_per_s"]),
            marker_color=data.colour(model),
            boxpoints=False,
        )
        for model in _models_with(data, answered, ["tokens_per_s"])
    ]
    figure = new_figure(traces)
    set_layout(figure, showlegend=False, yaxis={"title": {"text": "tokens/s"}})
    return Chart(name, title, figure)


def cost_vs_score(data: ChartInput) -> Chart:
    """Total cost (x) against score mean (y) per model; bubble area follows latency p50."""
    name, title = "cost-vs-score", "Cost vs score (bubble size: latency p50)"
    board = data.board.dropna(subset=["cost_usd_total", "score_mean"])
    if board.empty:
        return Chart(name, title, None, "No model has both a known cost and a score.")
    largest = float(board["latency_s_p50"].max()) if board["latency_s_p50"].notna().any() else 0
    traces = [
        _trace(
            "scatter",
            name=str(row["model"]),
            x=[rounded(row["cost_usd_total"])],
            y=[rounded(row["score_mean"])],
            mode="markers+text",
            text=[str(row["model"])],
            textposition="top center",
            marker={
                "size": [_bubble(row["latency_s_p50"], largest)],
                "color": data.colour(str(row["model"])),
                "opacity": 0.7,
            },
            customdata=[[rounded(row["latency_s_p50"])]],
            hovertemplate="cost $%{x:.4f}<br>score %{y:.3f}<br>latency p50 %{customdata[0]} s",
        )
        for row in board.to_dict("records")
    ]
    figure = new_figure(traces)
    set_layout(
        figure,
        xaxis={"title": {"text": "total cost (USD)"}, "rangemode": "tozero"},
        yaxis={"title": {"text": "score mean"}},
    )
    return Chart(name, title, figure)


def _bubble(latency: Any, largest: float) -> float:
    """Marker diameter: its area grows with latency; unknown latency gets the smallest."""
    if is_missing(latency) or largest <= 0:
        return 12.0
    return round(12 + 48 * math.sqrt(float(latency) / largest), 3)


def cost_breakdown(data: ChartInput) -> Chart:
    """Model calls' cost and judge calls' cost per model, stacked."""
    name, title = "cost-breakdown", "Cost breakdown: model vs judge (USD)"
    board = data.board
    parts = (("model", "cost_usd_total"), ("judge", "judge_cost_usd_total"))
    if all(board[column].isna().all() for _, column in parts):
        return Chart(name, title, None, "No cost is known for any model or judge call.")
    traces = [
        _trace(
            "bar",
            name=label,
            x=text_list(board["model"]),
            y=number_list(board[column].fillna(0.0)),
            marker_color=colour,
        )
        for (label, column), colour in zip(parts, METRIC_COLOURS, strict=True)
    ]
    figure = new_figure(traces)
    set_layout(figure, barmode="stack", yaxis={"title": {"text": "USD"}})
    return Chart(name, title, figure)


def judge_radar(data: ChartInput) -> Chart:
    """Each model's mean jury score per dimension (1..5), one polygon per model."""
    name, title = "judge-radar", "Jury dimensions per model (1..5)"
    keys = jury_dimensions(data.frame["judges"])
    if not keys:
        return Chart(name, title, None, "No jury ran in this run.")
    traces = []
    for model in data.models:
        means = _dimension_means(data.answered[data.answered["model"] == model], keys)
        if all(value is None for value in means):
            continue
        traces.append(
            _trace(
                "scatterpolar",
                name=model,
                r=[*means, means[0]],  # repeat the first point to close the polygon
                theta=[*keys, keys[0]],
                fill="toself",
                opacity=0.6,
                line={"color": data.colour(model)},
            )
        )
    if not traces:
        return Chart(name, title, None, "No answered item has a jury score.")
    figure = new_figure(traces)
    set_layout(figure, polar={"radialaxis": {"range": list(_JURY_RANGE), "dtick": 1}})
    return Chart(name, title, figure)


def error_breakdown(data: ChartInput) -> Chart:
    """Items with an ``error_kind`` per model, stacked by kind."""
    name, title = "error-breakdown", "Errors by kind per model"
    errors = data.frame.dropna(subset=["error_kind"])
    if errors.empty:
        return Chart(name, title, None, "No item had an error.")
    counts = errors.groupby(["error_kind", "model"]).size()
    models = [model for model in data.models if model in set(errors["model"])]
    kinds = sorted({str(kind) for kind in errors["error_kind"]})
    traces = [
        _trace(
            "bar",
            name=kind,
            x=models,
            y=[int(counts.get((kind, model), 0)) for model in models],
            marker_color=KIND_COLOURS[index % len(KIND_COLOURS)],
        )
        for index, kind in enumerate(kinds)
    ]
    figure = new_figure(traces)
    # One kind alone would get no legend, and its name would show nowhere.
    set_layout(figure, barmode="stack", showlegend=True, yaxis={"title": {"text": "items"}})
    return Chart(name, title, figure)


_LATENCY_LAYOUT: tuple[tuple[str, tuple[Builder, ...]], ...] = (
    ("Leaderboard", ()),
    ("Latency", (latency_percentiles, latency_distribution, tokens_per_s)),
    ("Cost", (cost_breakdown,)),
    ("Errors", (error_breakdown,)),
)


def task_type(task: Any) -> str:
    """A record's task type, or :data:`NO_TASK`."""
    kind = task.get("task_type") if isinstance(task, Mapping) else None
    return str(kind) if kind else NO_TASK


def jury_dimensions(judges_column: Iterable[Any]) -> list[str]:
    """The dimension keys scored by jury judges, in report order (the six standard ones first)."""
    keys = (
        key
        for entries in judges_column
        for entry in judge_entries(entries)
        if entry.get("type") == "jury"
        for key in (entry.get("scores") or {})
    )
    return dimension_order(keys)


def _dimension_means(answered: pd.DataFrame, keys: Sequence[str]) -> list[float | None]:
    values: dict[str, list[float]] = {key: [] for key in keys}
    for scores in answered["dimensions"]:
        for key, value in (scores if isinstance(scores, Mapping) else {}).items():
            if key in values and value is not None:
                values[key].append(float(value))
    return [rounded(math.fsum(found) / len(found)) if found else None for found in values.values()]


def _heatmap(
    z: list[list[float | None]], x: list[str], y: list[str], x_title: str, label: str
) -> Figure:
    figure = new_figure(
        _trace(
            "heatmap",
            z=z,
            x=x,
            y=y,
            zmin=0,
            zmax=1,
            colorscale="RdYlGn",
            texttemplate="%{z:.2f}",
            hovertemplate="%{y} / %{x}: %{z:.3f}<extra>" + label + "</extra>",
            xgap=2,
            ygap=2,
        )
    )
    set_layout(
        figure,
        xaxis={"title": {"text": x_title}, "type": "category"},
        yaxis={"type": "category", "autorange": "reversed"},
    )
    return figure


def _models_with(data: ChartInput, frame: pd.DataFrame, columns: Sequence[str]) -> list[str]:
    """The models (leaderboard order) that have a value in any of ``columns``."""
    present = set(frame.loc[frame[list(columns)].notna().any(axis=1), "model"])
    return [model for model in data.models if model in present]


def _model_rank(data: ChartInput, models: pd.Series) -> list[int]:
    """Row positions of ``models`` sorted by leaderboard order (stable within a model)."""
    order = {model: index for index, model in enumerate(data.models)}
    ranks = [order.get(model, len(order)) for model in models.tolist()]
    return sorted(range(len(ranks)), key=ranks.__getitem__)
