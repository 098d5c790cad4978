"""The Trends page's drawings: a series' pass rate as an inline SVG chart, and a case's verdicts
as a row of coloured cells.

The chart has one point per run (oldest on the left, evenly spaced: runs are steps, not dates),
its 95% interval as a whisker, a dashed vertical mark where the commit or the model version
changed since the previous run, and the drift test's finding as a red ring on the run where it
was detected. Every text in it (run ids, commits) is escaped; nothing needs JavaScript.
"""

from __future__ import annotations

from ..report import text
from ..results import CaseHistory, Drift, RunPoint, Series

#: The chart's size and its margins (left for the % axis, bottom for the run labels).
WIDTH, HEIGHT = 720, 240
_LEFT, _RIGHT, _TOP, _BOTTOM = 44, 16, 18, 46
#: At most this many run labels under the axis (every k-th run beyond).
_LABELS = 12

CHART_STYLE = """
svg.trend { background: white; border: 1px solid #dadce0; }
svg.trend .grid { stroke: #f1f3f4; } svg.trend .axis { fill: #5f6368; font-size: 10px; }
svg.trend .line { fill: none; stroke: #1a73e8; stroke-width: 1.5; }
svg.trend .ci { stroke: #8ab4f8; stroke-width: 2; }
svg.trend .point { fill: #1a73e8; } svg.trend .empty { fill: white; stroke: #9aa0a6; } svg.trend .mark-commit { stroke: #9aa0a6; }
svg.trend .mark-model { stroke: #a142f4; } svg.trend .drift-at { fill: none; stroke: #c5221f;
  stroke-width: 2.5; }
svg.trend .mark-label { font-size: 9px; fill: #5f6368; }
span.badge { padding: 0.1em 0.5em; border-radius: 3px; font-size: 0.85em; margin-left: 0.5em; }
span.badge.drift { background: #fce8e6; color: #c5221f; } span.badge.steady { background: #e6f4ea; }
table.points td { white-space: nowrap; }
p.legend { font-size: 0.85em; margin: 0.2em 0 0.6em; }
span.cells { display: inline-flex; gap: 2px; }
span.cell { display: inline-block; width: 14px; height: 14px; border: 1px solid #dadce0; }
span.cell.pass { background: #81c995; } span.cell.fail { background: #ee675c; }
span.cell.flaky { background: #fdd663; } span.cell.error { background: #fa903e; }
span.cell.changed { background: #dadce0; } span.cell.none { background: white; }
"""


def _x(index: int, count: int) -> float:
    inner = WIDTH - _LEFT - _RIGHT
    return _LEFT + (inner / 2 if count < 2 else inner * index / (count - 1))


def _y(rate: float) -> float:
    return _TOP + (HEIGHT - _TOP - _BOTTOM) * (1.0 - min(max(rate, 0.0), 1.0))


def _percent(rate: float | None) -> str:
    return "-" if rate is None else f"{100 * rate:.1f}%"


def _point_title(point: RunPoint) -> str:
    interval = ""
    if point.pass_low is not None and point.pass_high is not None:
        interval = f" [{_percent(point.pass_low)}, {_percent(point.pass_high)}]"
    commit = f", commit {point.commit[:10]}" if point.commit else ""
    return f"{point.run_id}: {_percent(point.pass_rate)}{interval}, n={point.n}{commit}"


def chart(series: Series) -> str:
    """``series``' pass rate run after run as an ``<svg>`` element."""
    points = series.points
    count = len(points)
    parts = [_grid()]
    parts += _marks(points)
    line = " ".join(
        f"{_x(i, count):.1f},{_y(p.pass_rate):.1f}"
        for i, p in enumerate(points)
        if p.pass_rate is not None
    )
    if line.count(" ") >= 1:
        parts.append(f'<polyline class="line" points="{line}"/>')
    for i, point in enumerate(points):
        x = _x(i, count)
        if point.pass_low is not None and point.pass_high is not None:
            parts.append(
                f'<line class="ci" x1="{x:.1f}" x2="{x:.1f}" y1="{_y(point.pass_low):.1f}" '
                f'y2="{_y(point.pass_high):.1f}"/>'
            )
        if point.pass_rate is None:  # nothing counted: a hollow mark on the axis
            counted = f"n=0, {point.left_out} left out, {point.errors} errors"
            title = f"{point.run_id}: nothing counted ({counted})"
            parts.append(
                f'<circle class="empty" data-run="{text(point.run_id)}" cx="{x:.1f}" '
                f'cy="{_y(0.0):.1f}" r="3.5"><title>{text(title)}</title></circle>'
            )
        else:
            parts.append(
                f'<circle class="point" data-run="{text(point.run_id)}" cx="{x:.1f}" '
                f'cy="{_y(point.pass_rate):.1f}" r="3.5"><title>{text(_point_title(point))}'
                "</title></circle>"
            )
    parts += _drift_marker(series.drift, points)
    parts += _run_labels(points)
    label = f"pass rate of {series.model} on {series.eval_file}, {count} runs"
    return (
        f'<svg class="trend" role="img" aria-label="{text(label)}" width="{WIDTH}" '
        f'height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" xmlns="http://www.w3.org/2000/svg">'
        f"{''.join(parts)}</svg>"
    )


def _grid() -> str:
    lines = []
    for tick in (0.0, 0.25, 0.5, 0.75, 1.0):
        y = _y(tick)
        lines.append(
            f'<line class="grid" x1="{_LEFT}" x2="{WIDTH - _RIGHT}" y1="{y:.1f}" y2="{y:.1f}"/>'
            f'<text class="axis" x="{_LEFT - 6}" y="{y + 3:.1f}" text-anchor="end">'
            f"{int(100 * tick)}%</text>"
        )
    return "".join(lines)


def _marks(points: tuple[RunPoint, ...]) -> list[str]:
    """A dashed line halfway between a run and the one before it, for each change it marks."""
    count = len(points)
    found = []
    for i, point in enumerate(points):
        if i == 0 or not point.marks:
            continue
        x = (_x(i - 1, count) + _x(i, count)) / 2
        for offset, what in enumerate(sorted(set(point.marks))):
            kind = "model" if what == "model" else "commit"
            shifted = x + 3 * offset
            found.append(
                f'<line class="mark mark-{kind}" data-run="{text(point.run_id)}" '
                f'x1="{shifted:.1f}" x2="{shifted:.1f}" y1="{_TOP}" y2="{HEIGHT - _BOTTOM}" '
                f'stroke-dasharray="4 3"><title>{text(what)} changed before '
                f"{text(point.run_id)}</title></line>"
                f'<text class="mark-label" x="{shifted + 2:.1f}" y="{_TOP - 6 + 9 * offset}">'
                f"{text(what)}</text>"
            )
    return found


def _drift_marker(drift: Drift, points: tuple[RunPoint, ...]) -> list[str]:
    if not drift.detected or drift.at_run is None:
        return []
    for i, point in enumerate(points):
        if point.run_id == drift.at_run and point.pass_rate is not None:
            title = f"drift {drift.direction or ''} detected at {drift.at_run}"
            return [
                f'<circle class="drift-at" data-run="{text(point.run_id)}" '
                f'cx="{_x(i, len(points)):.1f}" cy="{_y(point.pass_rate):.1f}" r="8">'
                f"<title>{text(title)}</title></circle>"
            ]
    return []


def _run_labels(points: tuple[RunPoint, ...]) -> list[str]:
    count = len(points)
    step = max(1, -(-count // _LABELS))
    labels = []
    for i, point in enumerate(points):
        if i % step and i != count - 1:
            continue
        shown = point.run_id if len(point.run_id) <= 16 else point.run_id[:15] + "…"
        x, y = _x(i, count), HEIGHT - _BOTTOM + 12
        labels.append(
            f'<text class="axis" x="{x:.1f}" y="{y}" text-anchor="end" '
            f'transform="rotate(-25 {x:.1f} {y})">{text(shown)}</text>'
        )
    return labels


#: What the chart's marks mean, under each chart.
LEGEND = (
    '<p class="note legend">Each point: a run\'s pass rate, with its 95% interval (Wilson). '
    "Dashed lines: the commit (grey) or the model version (purple) changed before that run. "
    "Red ring: the run where the drift test found a change.</p>"
)


def drift_badge(drift: Drift) -> str:
    """The drift test's finding in a few words."""
    if not drift.detected:
        return (
            f'<span class="badge steady" title="{text(drift.method)}: statistic '
            f'{drift.statistic:.2f} of {drift.threshold:.2f}">no drift</span>'
        )
    since = f" since {drift.since_run}" if drift.since_run else ""
    words = f"drift {drift.direction or ''}{since}, detected at {drift.at_run or '?'}"
    return (
        f'<span class="badge drift" title="{text(drift.method)}: statistic '
        f'{drift.statistic:.2f} above {drift.threshold:.2f}">{text(words)}</span>'
    )


#: A verdict's cell class and what it says.
_VERDICTS = {
    "pass": "passed",
    "fail": "failed",
    "flaky": "flaky (passed and failed)",
    "error": "error",
    "changed": "case changed since (not compared)",
}


def cells(history: CaseHistory, runs: tuple[str, ...]) -> str:
    """One coloured cell per run of ``runs`` (blank where the case was not run)."""
    verdicts = dict(history.verdicts)
    shown = []
    for run in runs:
        verdict = verdicts.get(run)
        kind = verdict if verdict is not None and verdict in _VERDICTS else "none"
        said = _VERDICTS.get(kind, "not run")
        shown.append(
            f'<span class="cell {kind}" data-run="{text(run)}" title="{text(run)}: {said}"></span>'
        )
    return f'<span class="cells">{"".join(shown)}</span>'
