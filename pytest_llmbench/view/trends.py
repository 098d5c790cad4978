"""The Trends page of `llmbench view`: ``llmbench trend``'s series and flip histories, drawn.

Per model x eval file, the pass rate run after run (:func:`.trend_chart.chart`), the drift
test's finding and a table of the points; then the cases failing or flaky in their latest run
with their verdicts run by run; then the folders that are not readable runs, with why. Filters
are query parameters (``model``, ``file``, ``cases``), so every view is a link. A run still
under the viewer's roots links to its page (:mod:`.trend_source` reads the runs). Every case
id, file name, run id and commit is escaped: they are user data.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..report import text
from ..results import CaseHistory, RunPoint, Series, TrendReport
from .pages import layout, link, select_field
from .trend_chart import CHART_STYLE, LEGEND, cells, chart, drift_badge

#: At most this many runs in a case's row of cells (the latest).
CELLS = 40
#: ``cases``: which case histories are listed.
_CASES = {
    "": "failing and flaky cases",
    "flips": "every case that flipped",
    "all": "every case",
}


def trends_of_roots(
    roots: Sequence[Path], reviews_dir: Path | None, query: Mapping[str, Any]
) -> str:
    """The page over the runs under ``roots`` (filtered by ``query``)."""
    from .trend_source import read_trend

    report, links, note = read_trend(roots, reviews_dir)
    return trends_page(report, page_params(query), links, note=note)


def trends_page(
    report: TrendReport,
    params: Mapping[str, str],
    run_links: Mapping[str, str],
    *,
    note: str = "",
) -> str:
    """The whole page for ``report`` filtered by ``params``; ``run_links``: the viewer's page
    of each run id still under its roots; ``note``: what was read (shown under the title)."""
    model, eval_file = params.get("model", ""), params.get("file", "")
    series = [s for s in report.series if _chosen(s.model, s.eval_file, model, eval_file)]
    parts = [f"<style>{CHART_STYLE}</style>"]
    if note:
        parts.append(f'<p class="note" id="read">{text(note)}</p>')
    if not report.runs:
        parts.append('<p class="note">No finished runs here yet: run pytest, then reload.</p>')
    parts.append(_filters(report, params))
    parts.append(
        f'<p class="note" id="count">{len(series)} of {len(report.series)} series, '
        f"{len(report.runs)} runs</p>"
    )
    if series:
        parts.append(LEGEND)
    parts += [_series_section(s, run_links) for s in series]
    parts.append(_cases_section(report, params, run_links))
    parts.append(_skipped_section(report))
    return layout("Trends", "".join(parts))


def _chosen(model: str, eval_file: str, wanted_model: str, wanted_file: str) -> bool:
    return (not wanted_model or model == wanted_model) and (
        not wanted_file or eval_file == wanted_file
    )


def _filters(report: TrendReport, params: Mapping[str, str]) -> str:
    def select(name: str, choices: Mapping[str, str]) -> str:
        return select_field(name, choices, params)

    models = sorted({s.model for s in report.series} | {c.model for c in report.cases})
    files = sorted({s.eval_file for s in report.series} | {c.eval_file for c in report.cases})
    return (
        '<form class="filters" method="get" id="filters">'
        f"{select('model', {'': 'every model', **{m: m for m in models}})}"
        f"{select('file', {'': 'every eval file', **{f: f for f in files}})}"
        f"{select('cases', _CASES)}"
        '<button type="submit">apply</button></form>'
    )


# -- a series ------------------------------------------------------------------------------------


def _series_section(series: Series, run_links: Mapping[str, str]) -> str:
    title = f'{text(series.model)} <span class="note">on</span> {text(series.eval_file)}'
    rows = "".join(_point_row(point, run_links) for point in reversed(series.points))
    return (
        f'<section class="series" data-model="{text(series.model)}" '
        f'data-file="{text(series.eval_file)}"><h2>{title}{drift_badge(series.drift)}</h2>'
        f"{chart(series)}"
        '<details class="points"><summary>The runs, newest first</summary>'
        '<table class="points"><tr><th>run</th><th>date</th><th>commit</th><th>model versions</th>'
        "<th>n</th><th>pass rate [95% CI]</th><th>score [95% CI]</th><th>left out</th>"
        f"<th>errors</th><th>changed</th></tr>{rows}</table></details></section>"
    )


def _run_cell(run_id: str, run_links: Mapping[str, str]) -> str:
    key = run_links.get(run_id)
    if key is None:
        return text(run_id)
    return f'<a href="{text(link("/run/" + key))}">{text(run_id)}</a>'


def _interval(value: float | None, low: float | None, high: float | None, percent: bool) -> str:
    def shown(number: float) -> str:
        return f"{100 * number:.1f}%" if percent else f"{number:.3f}"

    if value is None:
        return "-"
    if low is None or high is None:
        return shown(value)
    return f"{shown(value)} [{shown(low)}, {shown(high)}]"


def _point_row(point: RunPoint, run_links: Mapping[str, str]) -> str:
    figures = [
        (point.started_at or "?")[:19].replace("T", " "),
        (point.commit or "-")[:10],
        ", ".join(point.model_versions) or "-",
        str(point.n),
        _interval(point.pass_rate, point.pass_low, point.pass_high, True),
        _interval(point.score, point.score_low, point.score_high, False),
        str(point.left_out),
        str(point.errors),
        ", ".join(point.marks) or "",
    ]
    tds = "".join(f"<td>{text(value)}</td>" for value in figures)
    return (
        f'<tr data-run="{text(point.run_id)}"><td>{_run_cell(point.run_id, run_links)}</td>'
        f"{tds}</tr>"
    )


# -- cases ---------------------------------------------------------------------------------------


def _listed(case: CaseHistory, cases: str) -> bool:
    if cases == "all":
        return True
    if cases == "flips":
        return case.flips > 0
    return case.state in ("failing", "flaky")


def _cases_section(
    report: TrendReport, params: Mapping[str, str], run_links: Mapping[str, str]
) -> str:
    model, eval_file, cases = (
        params.get("model", ""),
        params.get("file", ""),
        params.get("cases", ""),
    )
    listed = [
        c
        for c in report.cases
        if _chosen(c.model, c.eval_file, model, eval_file) and _listed(c, cases)
    ]
    heading = f"<h2>Cases: {text(_CASES.get(cases, _CASES['']))}</h2>"
    if not listed:
        return f'{heading}<p class="note" id="no-cases">None.</p>'
    rows = "".join(_case_row(case, report.runs, run_links) for case in listed)
    last = f", the last {CELLS}" if len(report.runs) > CELLS else ""
    return (
        f'{heading}<table class="cases" id="cases"><tr><th>model</th><th>eval file</th>'
        f"<th>case</th><th>state</th><th>flips</th><th>verdict run by run (oldest first{last})"
        f"</th></tr>{rows}</table>"
    )


def _case_row(case: CaseHistory, runs: tuple[str, ...], run_links: Mapping[str, str]) -> str:
    state = text(case.state)
    if case.since is not None:
        state += f" since {_run_cell(case.since, run_links)}"
    return (
        f'<tr data-case="{text(case.case_id)}" class="{text(case.state)}">'
        f"<td>{text(case.model)}</td><td>{text(case.eval_file)}</td><td>{text(case.case_id)}</td>"
        f'<td class="state">{state}</td><td>{case.flips}</td>'
        f"<td>{cells(case, runs[-CELLS:])}</td></tr>"
    )


def _skipped_section(report: TrendReport) -> str:
    if not report.skipped:
        return ""
    rows = "".join(
        f"<tr><td>{text(s.path)}</td><td>{text(s.reason)}</td></tr>" for s in report.skipped
    )
    return (
        f"<h2>Skipped folders</h2>"
        f'<table class="skipped" id="skipped"><tr><th>folder</th><th>why</th></tr>{rows}</table>'
    )


def page_params(query: Mapping[str, Any]) -> dict[str, str]:
    """The page's query parameters as plain strings (unknown ones dropped)."""
    return {name: str(query[name]) for name in ("model", "file", "cases") if name in query}
