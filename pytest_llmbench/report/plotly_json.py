"""plotly.js figures as plain data: the report's one look, and the helpers its charts build with.

A figure is plotly.js's JSON (``{"data": [traces], "layout": {...}}``), drawn in the page by the
inlined plotly.js. Its template is plotly's ``plotly_white`` for the trace types drawn here
(``assets/chart-template.json``, written by ``tools/chart_template.py``). Numbers are rounded to
6 decimals, so the same records always give the same JSON. What each chart shows is
:mod:`.charts`'s.
"""

from __future__ import annotations

import functools
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..results import is_missing

if TYPE_CHECKING:
    import pandas as pd


_HEIGHT = 420
#: The trace types the report draws: the only ones whose template defaults it needs.
TRACE_TYPES = ("bar", "box", "heatmap", "scatter", "scatterpolar")
#: Colours of metric series (score vs pass rate, TTFT vs total, model vs judge): dark and
#: muted, so that they never read as one of the models' colours.
METRIC_COLOURS = ("#3b4b5c", "#9aa5b1")
#: One colour per model, in leaderboard order (plotly's default qualitative palette).
MODEL_COLOURS = (
    "#636EFA", "#EF553B", "#00CC96", "#AB63FA", "#FFA15A",
    "#19D3F3", "#FF6692", "#B6E880", "#FF97FF", "#FECB52",
)  # fmt: skip
#: One colour per error kind (ColorBrewer's Set2).
KIND_COLOURS = (
    "rgb(102,194,165)", "rgb(252,141,98)", "rgb(141,160,203)", "rgb(231,138,195)",
    "rgb(166,216,84)", "rgb(255,217,47)", "rgb(229,196,148)", "rgb(179,179,179)",
)  # fmt: skip
TEMPLATE_FILE = Path(__file__).parent / "assets" / "chart-template.json"
#: A figure: plotly.js's JSON, ``{"data": [...], "layout": {...}}``.
Figure = dict[str, Any]


@dataclass(frozen=True)
class Chart:
    """One chart of the report: its figure, or why it is left out."""

    #: stable id; the chart's div id is ``chart-<name>``
    name: str
    #: heading shown above the chart
    title: str
    #: the figure (plotly.js's JSON as data), or None when the run has no data for it
    figure: Figure | None
    #: why ``figure`` is None (one line)
    note: str = ""


def error_bars(board: pd.DataFrame, column: str, low: str, high: str) -> dict[str, Any] | None:
    """Asymmetric error bars from the board's CI columns; None when it has none."""
    if low not in board.columns or high not in board.columns:
        return None
    above = [_gap(top, mid) for top, mid in zip(board[high], board[column], strict=True)]
    below = [_gap(mid, bottom) for mid, bottom in zip(board[column], board[low], strict=True)]
    return {"type": "data", "symmetric": False, "array": above, "arrayminus": below}


def _gap(upper: Any, lower: Any) -> float | None:
    if is_missing(upper) or is_missing(lower):
        return None
    return rounded(max(float(upper) - float(lower), 0.0))


def trace(kind: str, **props: Any) -> dict[str, Any]:
    """A trace of ``kind`` with the properties given (None: unset; ``marker_color`` is
    ``marker.color``, as plotly.py spells it)."""
    built: dict[str, Any] = {"type": kind}
    for key, value in props.items():
        if value is None:
            continue
        if key == "marker_color":
            built.setdefault("marker", {})["color"] = value
        else:
            built[key] = value
    return built


def new_figure(traces: dict[str, Any] | list[dict[str, Any]]) -> Figure:
    return {"data": [traces] if isinstance(traces, dict) else list(traces), "layout": {}}


def set_layout(figure: Figure, **extra: Any) -> None:
    figure["layout"].update(
        template=chart_template(),
        height=_HEIGHT,
        margin={"l": 60, "r": 20, "t": 30, "b": 60},
        legend={"orientation": "h", "y": -0.2},
        **extra,
    )


@functools.cache
def chart_template() -> dict[str, Any]:
    """plotly_white with the defaults of the trace types drawn here only (half its size in
    each chart's JSON)."""
    template: dict[str, Any] = json.loads(TEMPLATE_FILE.read_text(encoding="utf-8"))
    return template


def lookup(series: pd.Series, key: tuple[str, str]) -> float | None:
    return rounded(series[key]) if key in series.index else None


def text_list(series: pd.Series) -> list[str]:
    return [str(value) for value in series]


def number_list(series: pd.Series) -> list[float | None]:
    return [rounded(value) for value in series]


def rounded(value: Any) -> float | None:
    """``value`` to 6 decimals; missing or infinite: None (JSON has no Infinity)."""
    if is_missing(value) or not math.isfinite(float(value)):
        return None
    return round(float(value), 6)
