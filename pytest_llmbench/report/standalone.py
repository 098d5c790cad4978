"""The standalone report: one self-contained ``report.html`` with interactive plotly charts.

The file inlines plotly.js once (a partial bundle of the chart types drawn, gzipped: 0.6 MB
where the whole library took 4.8) and loads nothing at view time (no CDN, no fetch): it opens
from disk, offline, years later. Every text that comes from a record is escaped, so a model
answer holding ``<script>`` shows as text. The same records give the same file apart from the
generation time: rows and charts are sorted, chart ids are fixed, the bootstrap is seeded.

:class:`ReportWriter` writes it at the end of a run, on the controller; ``llmbench report DIR``
rebuilds it from a results folder with :func:`write_report`. This module assembles the page
(run facts, sections, charts); its tables are built in :mod:`.tables`.
"""

from __future__ import annotations

import base64
import functools
import json
import shlex
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..results import model_of, reviews_line, utc_now
from ..results_folder import ResultsFolder
from .calibration_html import CALIBRATION_SECTION, calibration_table
from .charts import Chart, ChartInput, build_sections, grouped_chart
from .conversation_html import CONVERSATION_STYLE
from .html_tables import (
    agreement_table,
    anchor,
    cases_table,
    comparisons,
    effort_table,
    flaky_table,
    leaderboard_table,
    text,
)
from .matrix import MATRIX_SCRIPT, MATRIX_STYLE, case_matrix
from .win_matrix import win_matrix_table

if TYPE_CHECKING:
    import pandas as pd

    from ..results import RunSummary

DEFAULT_TITLE = "pytest-llmbench report"
_CASE_ORDER = ("suite", "case_id", "model", "repeat")
_STYLE = """
body{font:14px/1.45 system-ui,sans-serif;margin:0;color:#222;background:#fafafa}
main{max-width:1300px;margin:auto;padding:8px 24px 48px}
nav a{margin-right:12px}
section{background:#fff;border:1px solid #ddd;border-radius:6px;padding:4px 16px 12px;
margin:16px 0}
table{border-collapse:collapse;margin:8px 0}
th,td{border-bottom:1px solid #e4e4e4;padding:3px 8px;text-align:left;vertical-align:top}
td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}
dl.facts{display:grid;grid-template-columns:max-content auto;gap:2px 16px}
dl.facts dt{font-weight:600}dl.facts dd{margin:0}
figure.chart{margin:12px 0}figure.chart h3{margin:8px 0 0}
p.note{color:#666;font-style:italic}
pre{white-space:pre-wrap;word-break:break-word;background:#f4f4f4;padding:6px;margin:4px 0}
.person{font-size:.75em;background:#ddf4ff;color:#0969da;border-radius:4px;padding:0 4px}
.review-comment{font-size:.85em;color:#444;font-style:italic}
.passed{color:#1a7f37}.failed{color:#cf222e}.error{color:#9a6700}.skipped{color:#666}
.significant{font-weight:600}
details summary{cursor:pointer;color:#0969da}
"""


def write_report(
    records: Sequence[Mapping[str, Any]],
    out_dir: Path,
    *,
    title: str | None = None,
    run_info: Mapping[str, Any] | None = None,
    summary: RunSummary | None = None,
    calibration: Sequence[Mapping[str, Any]] = (),
) -> Path:
    """Write ``out_dir/report.html`` for ``records`` and return its path.

    ``run_info`` is the run's ``run.json`` (start and finish time, arguments, versions);
    ``summary`` the records' :func:`~pytest_llmbench.results.summary.summarize`, when the
    caller has it (else it is computed here, once); ``calibration`` the rows of
    ``judge_calibration.csv`` (a "Judges against people" section when there are any).
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    path = ResultsFolder(out_dir).report
    page = render_report(
        records, title=title, run_info=run_info, summary=summary, calibration=calibration
    )
    path.write_text(page, encoding="utf-8")
    return path


def render_report(
    records: Sequence[Mapping[str, Any]],
    *,
    title: str | None = None,
    run_info: Mapping[str, Any] | None = None,
    summary: RunSummary | None = None,
    calibration: Sequence[Mapping[str, Any]] = (),
) -> str:
    """The report's HTML text (see :func:`write_report`)."""
    heading = title or DEFAULT_TITLE
    if summary is None and records:
        from ..results import summarize

        summary = summarize(records)
    sections = _sections(summary, heading, run_info or {})
    if calibration and summary is not None:  # before the matrix and the cases
        sections.insert(len(sections) - 2, (CALIBRATION_SECTION, calibration_table(calibration)))
    nav = " ".join(f'<a href="#{anchor(name)}">{text(name)}</a>' for name, _ in sections)
    body = "".join(
        f'<section id="{anchor(name)}"><h2>{text(name)}</h2>{content}</section>'
        for name, content in sections
    )
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{text(heading)}</title><style>{_STYLE}{MATRIX_STYLE}{CONVERSATION_STYLE}</style>"
        "</head>"
        f"<body><main><h1>{text(heading)}</h1><nav>{nav}</nav>{body}</main>"
        f"<script>{MATRIX_SCRIPT}</script>{plotly_loader()}</body></html>\n"
    )


def _sections(
    summary: RunSummary | None, title: str, run_info: Mapping[str, Any]
) -> list[tuple[str, str]]:
    """(heading, inner HTML) of every section, in order."""
    # The summary's records are sorted (completion order differs under xdist): the same
    # records give the same charts every time.
    records = summary.records if summary is not None else ()
    facts = _facts(records, title, run_info)
    if summary is None:
        return [("Run", facts + '<p class="note">This run has no records.</p>')]
    latency = summary.latency_only
    data = ChartInput(summary.frame, summary.board, summary.models, latency_only=latency)
    charts = dict(build_sections(data))
    # Paired tests compare scores and pass rates: a latency run has neither.
    versus = "" if latency else comparisons(summary.comparisons)
    extra = {
        "Leaderboard": leaderboard_table(summary.board, latency=latency) + versus,
        "Scores": flaky_table(summary.verdicts),
        "Judges": agreement_table(summary.agreement) if summary.judged else "",
    }
    sections = [(name, extra.get(name, "") + _charts(found)) for name, found in charts.items()]
    pairwise = win_matrix_table(records)
    if pairwise:
        sections.insert(1, ("Pairwise", pairwise))  # right after the leaderboard
    variants = _variants(summary.grouped, latency)
    if variants:
        sections.insert(1, ("Variants", variants))  # right after the leaderboard
    if summary.efforts is not None:  # the effort axis: each model's efforts side by side
        sections.insert(1, ("Efforts", effort_table(summary.efforts)))
    if latency:
        facts = facts.replace("</dl>", _fact("Eval type", "latency only: no scores") + "</dl>")
    matrix = ("Matrix", case_matrix(records))
    return [("Run", facts), *sections, matrix, ("Cases", cases_table(records))]


def _variants(boards: Mapping[str, pd.DataFrame], latency: bool) -> str:
    """A table and a chart per axis with several values (profile, prompt, temperature, tag)."""
    from ..results import axis_column

    parts = []
    for axis, board in boards.items():
        table = leaderboard_table(board, key=axis_column(axis), latency=latency)
        parts.append(
            f"<h3>By {text(axis)}</h3>{table}{_chart(grouped_chart(board, axis, latency))}"
        )
    return "".join(parts)


# -- run facts ------------------------------------------------------------------------------


def _facts(records: Sequence[Mapping[str, Any]], title: str, info: Mapping[str, Any]) -> str:
    outcomes = [str(record.get("outcome")) for record in records]
    counts = ", ".join(
        f"{outcomes.count(name)} {name}" for name in ("passed", "failed", "error", "skipped")
    )
    models = sorted({model_of(record) for record in records})
    cases = {(record.get("suite"), record.get("case_id")) for record in records}
    suites = {record.get("suite") for record in records}
    rows: list[tuple[str, Any]] = [
        ("Title", title),
        ("Generated", utc_now()),
        ("Started", info.get("started_at")),
        ("Finished", info.get("finished_at")),
        ("Command", _command(info.get("args"))),
        ("Exit status", info.get("exitstatus")),
        ("Models", ", ".join(models) or None),
        ("Items", f"{len(records)} ({counts})"),
        ("Cases", f"{len(cases)} in {len(suites)} suite(s)"),
        ("Gate failures", "; ".join(map(str, info.get("gate_failures") or [])) or None),
        ("People's labels", _reviews(info.get("reviews"))),
        ("Versions", _versions(info.get("versions"))),
    ]
    items = "".join(_fact(name, value) for name, value in rows if value not in (None, ""))
    return f'<dl class="facts">{items}</dl>'


def _reviews(block: Any) -> str | None:
    """run.json's ``reviews`` block in words (None when no label was read)."""
    if not isinstance(block, Mapping):
        return None
    line = reviews_line(block)
    return line.removeprefix("reviews: ") if line else None


def _fact(name: str, value: Any) -> str:
    return f"<dt>{text(name)}</dt><dd>{text(value)}</dd>"


def _command(args: Any) -> str | None:
    if not isinstance(args, list):
        return None
    return "pytest " + shlex.join(str(arg) for arg in args)


def plotly_loader() -> str:
    """The inlined plotly.js (a partial bundle, gzipped, base64) and the script that inflates
    it in the browser and draws every chart; a browser that cannot says so in the page."""
    return (
        f'<script type="application/gzip;base64" id="llmbench-plotly">{_plotly_bundle()}</script>'
        f"<script>{_LOADER}</script>"
    )


@functools.lru_cache(maxsize=1)
def _plotly_bundle() -> str:
    from importlib import resources

    packed = resources.files(__package__).joinpath("assets", PLOTLY_BUNDLE).read_bytes()
    return base64.b64encode(packed).decode("ascii")


#: plotly.js core and the trace types the report draws (tools/plotly-bundle builds it).
PLOTLY_BUNDLE = "plotly-llmbench.min.js.gz"
_LOADER = """
(async () => {
  const charts = document.querySelectorAll("script.llmbench-chart");
  if (!charts.length) return;
  try {
    const packed = document.getElementById("llmbench-plotly").textContent;
    const bytes = Uint8Array.from(atob(packed), (c) => c.charCodeAt(0));
    const inflated = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
    const code = document.createElement("script");
    code.text = await new Response(inflated).text();
    document.head.appendChild(code);
  } catch (error) {
    for (const chart of charts) {
      const note = document.createElement("p");
      note.className = "note";
      note.textContent = "Charts need a browser that inflates gzip (DecompressionStream): "
        + "Chrome 80+, Firefox 113+, Safari 16.4+.";
      chart.replaceWith(note);
    }
    return;
  }
  const config = {displaylogo: false, responsive: true};
  for (const chart of charts) {
    const figure = JSON.parse(chart.textContent);
    Plotly.newPlot(chart.dataset.target, figure.data, figure.layout, config);
  }
})();
"""


def _versions(versions: Any) -> str | None:
    if not isinstance(versions, Mapping):
        return None
    return ", ".join(f"{name} {value}" for name, value in versions.items() if value)


# -- charts ---------------------------------------------------------------------------------


def _charts(charts: Sequence[Chart]) -> str:
    return "".join(_chart(chart) for chart in charts)


def _chart(chart: Chart) -> str:
    """A chart's heading and plotly div, or the note that says why it is left out."""
    heading = f"<h3>{text(chart.title)}</h3>"
    if chart.figure is None:
        return f'<figure class="chart">{heading}<p class="note">{text(chart.note)}</p></figure>'
    # The figure as data: drawn by the loader once the inlined plotly.js is inflated.
    figure = json.dumps(chart.figure, separators=(",", ":")).replace("<", "\\u003c")
    height = chart.figure["layout"]["height"]
    div = (
        f'<div id="chart-{chart.name}" class="plotly-graph-div" '
        f'style="height:{height}px; width:100%;"></div>'
        f'<script type="application/json" class="llmbench-chart" data-target="chart-{chart.name}">'
        f"{figure}</script>"
    )
    return f'<figure class="chart">{heading}{div}</figure>'
