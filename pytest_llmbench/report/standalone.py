"""The standalone report: one self-contained ``report.html`` with interactive plotly charts.

The file inlines plotly.js once and loads nothing at view time (no CDN, no fetch): it opens
from disk, offline, years later. Every text that comes from a record is escaped, so a model
answer holding ``<script>`` shows as text. The same records give the same file apart from the
generation time: rows and charts are sorted, chart ids are fixed, the bootstrap is seeded.

:class:`ReportWriter` writes it at the end of a run, on the controller; ``llmbench report DIR``
rebuilds it from a results folder with :func:`write_report`.
"""

from __future__ import annotations

import html
import json
import shlex
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_llmbench.record import utc_now

from ..baseline import model_of
from ..tables import is_missing
from .charts import Chart, ChartInput, build_sections, grouped_chart, task_type

if TYPE_CHECKING:
    import pandas as pd

REPORT_FILE = "report.html"
DEFAULT_TITLE = "pytest-llmbench report"
#: The per-case table shows at most this many rows: 2,000 transcripts are already a big page.
CASE_ROWS_LIMIT = 2000
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
) -> Path:
    """Write ``out_dir/report.html`` for ``records`` and return its path.

    ``run_info`` is the run's ``run.json`` (start and finish time, arguments, versions).
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / REPORT_FILE
    path.write_text(render_report(records, title=title, run_info=run_info), encoding="utf-8")
    return path


def render_report(
    records: Sequence[Mapping[str, Any]],
    *,
    title: str | None = None,
    run_info: Mapping[str, Any] | None = None,
) -> str:
    """The report's HTML text (see :func:`write_report`)."""
    from plotly.offline import get_plotlyjs

    heading = title or DEFAULT_TITLE
    # Records arrive in completion order (xdist): sorted, they give the same charts every time.
    ordered = sorted(records, key=_case_sort_key)
    sections = _sections(ordered, heading, run_info or {})
    nav = " ".join(f'<a href="#{_anchor(name)}">{_text(name)}</a>' for name, _ in sections)
    body = "".join(
        f'<section id="{_anchor(name)}"><h2>{_text(name)}</h2>{content}</section>'
        for name, content in sections
    )
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{_text(heading)}</title><style>{_STYLE}</style>"
        f'<script type="text/javascript">{get_plotlyjs()}</script></head>'
        f"<body><main><h1>{_text(heading)}</h1><nav>{nav}</nav>{body}</main></body></html>\n"
    )


def _sections(
    records: Sequence[Mapping[str, Any]], title: str, run_info: Mapping[str, Any]
) -> list[tuple[str, str]]:
    """(heading, inner HTML) of every section, in order."""
    facts = _facts(records, title, run_info)
    if not records:
        return [("Run", facts + '<p class="note">This run has no records.</p>')]
    from pytest_llmbench.leaderboard import is_latency_only, leaderboard, records_frame

    frame = records_frame(records)
    board = leaderboard(frame)
    latency = is_latency_only(frame)
    models = tuple(str(model) for model in board["model"])
    data = ChartInput(frame, board, models, latency_only=latency)
    charts = dict(build_sections(data))
    # Paired tests compare scores and pass rates: a latency run has neither.
    versus = "" if latency else _comparisons(records, data.models)
    extra = {
        "Leaderboard": _leaderboard_table(board, latency=latency) + versus,
        "Scores": _flaky_table(records),
        "Judges": _agreement_table(records),
    }
    sections = [(name, extra.get(name, "") + _charts(found)) for name, found in charts.items()]
    variants = _variants(frame, latency)
    if variants:
        sections.insert(1, ("Variants", variants))  # right after the leaderboard
    if latency:
        facts = facts.replace("</dl>", _fact("Eval type", "latency only: no scores") + "</dl>")
    return [("Run", facts), *sections, ("Cases", _cases_table(records))]


def _variants(frame: pd.DataFrame, latency: bool) -> str:
    """A table and a chart per axis with several values (profile, prompt, temperature, tag)."""
    from pytest_llmbench.leaderboard import axis_column, grouped, varied_axes

    parts = []
    for axis in varied_axes(frame):
        board = grouped(frame, axis)
        table = _leaderboard_table(board, key=axis_column(axis), latency=latency)
        parts.append(
            f"<h3>By {_text(axis)}</h3>{table}{_chart(grouped_chart(board, axis, latency))}"
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
        ("Versions", _versions(info.get("versions"))),
    ]
    items = "".join(_fact(name, value) for name, value in rows if value not in (None, ""))
    return f'<dl class="facts">{items}</dl>'


def _fact(name: str, value: Any) -> str:
    return f"<dt>{_text(name)}</dt><dd>{_text(value)}</dd>"


def _command(args: Any) -> str | None:
    if not isinstance(args, list):
        return None
    return "pytest " + shlex.join(str(arg) for arg in args)


def _versions(versions: Any) -> str | None:
    if not isinstance(versions, Mapping):
        return None
    return ", ".join(f"{name} {value}" for name, value in versions.items() if value)


# -- tables ---------------------------------------------------------------------------------

#: (header, board column, format); a column the board lacks is left out.
_BOARD_COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("rank", "rank", "d"),
    ("model", "model", "s"),
    ("score", "score_mean", ".3f"),
    ("pass rate", "pass_rate", ".1%"),
    ("MC accuracy", "mc_accuracy", ".1%"),
    ("flaky", "n_flaky", "d"),
    ("pass@k", "pass_at_k", ".3f"),
    ("pass^k", "pass_hat_k", ".3f"),
    ("k", "k", "d"),
    ("items", "n_items", "d"),
    ("errors", "n_errors", "d"),
    ("cost $", "cost_usd_total", ".4f"),
    ("judge $", "judge_cost_total", ".4f"),
    ("latency p50 s", "latency_s_p50", ".2f"),
    ("TTFT p50 s", "ttft_s_p50", ".2f"),
    ("tokens/s", "tokens_per_s_mean", ".1f"),
)
#: The columns of a latency-only board: timings instead of scores.
_LATENCY_COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("rank", "rank", "d"),
    ("model", "model", "s"),
    ("items", "n_items", "d"),
    ("errors", "n_errors", "d"),
    ("TTFT p50 s", "ttft_s_p50", ".2f"),
    ("TTFT n", "ttft_n", "d"),
    ("latency p50 s", "latency_s_p50", ".2f"),
    ("latency p95 s", "latency_s_p95", ".2f"),
    ("tokens/s", "tokens_per_s_mean", ".1f"),
    ("cost $", "cost_usd_total", ".4f"),
)
#: Columns shown with their 95% CI: column -> (low column, high column).
_CI_COLUMNS = {
    "score_mean": ("score_ci_low", "score_ci_high"),
    "pass_rate": ("pass_rate_ci_low", "pass_rate_ci_high"),
}


def _leaderboard_table(board: pd.DataFrame, key: str = "model", latency: bool = False) -> str:
    """The leaderboard, with ``[low, high]`` 95% CIs where the board has them.

    ``key`` is the board's group column (``model``, or a :func:`grouped` axis column). A
    latency-only board shows timings instead of scores; multiple-choice accuracy shows only when
    some item was multiple choice.
    """
    shown = _LATENCY_COLUMNS if latency else _BOARD_COLUMNS
    columns = [
        (key, key, spec) if column == "model" else (name, column, spec)
        for name, column, spec in shown
        if column == "model" or column in board.columns
    ]
    if "mc_n" not in board.columns or not (board["mc_n"].fillna(0) > 0).any():
        columns = [column for column in columns if column[1] != "mc_accuracy"]
    header = "".join(
        _th(name + (" (95% CI)" if column in _CI_COLUMNS and _has_ci(board, column) else ""), spec)
        for name, column, spec in columns
    )
    rows = "".join(
        "<tr>" + "".join(_board_cell(row, column, spec) for _, column, spec in columns) + "</tr>"
        for _, row in board.iterrows()
    )
    css = "leaderboard" if key == "model" else f"grouped by-{_text(_anchor(key))}"
    return f'<table class="{css}"><tr>{header}</tr>{rows}</table>'


def _has_ci(board: pd.DataFrame, column: str) -> bool:
    return all(name in board.columns for name in _CI_COLUMNS[column])


def _board_cell(row: pd.Series, column: str, spec: str) -> str:
    text = _format(row[column], spec)
    low, high = _CI_COLUMNS.get(column, ("", ""))
    if low in row.index and high in row.index and not is_missing(row[low]):
        text += f" [{_format(row[low], spec)}, {_format(row[high], spec)}]"
    return _td(text, spec)


def _comparisons(records: Sequence[Mapping[str, Any]], models: Sequence[str]) -> str:
    """The leader against every other model on their common cases: paired tests."""
    if len(models) < 2:
        return ""
    from pytest_llmbench.leaderboard import top_comparisons

    rows = [_comparison_row(result) for result in top_comparisons(records, models)]
    header = "".join(
        _th(name, spec)
        for name, spec in (
            ("comparison", "s"),
            ("metric", "s"),
            ("cases", "d"),
            ("difference", "f"),
            ("95% CI", "f"),
            ("p", "f"),
            ("at 0.05", "s"),
        )
    )
    return (
        "<h3>Paired comparisons with the leader</h3>"
        '<p class="note">Score: paired bootstrap over cases; pass rate: exact McNemar test on '
        "each case's majority verdict.</p>"
        f'<table class="comparisons"><tr>{header}</tr>{"".join(rows)}</table>'
    )


def _comparison_row(result: Any) -> str:
    """One :class:`pytest_llmbench.stats.Comparison` as a table row."""
    verdict = "significant" if result.significant else "not significant"
    interval = f"[{_format(result.low, '+.3f')}, {_format(result.high, '+.3f')}]"
    return (
        f'<tr class="{verdict.replace(" ", "-")}">'
        f"<td>{_text(result.model_b)} vs {_text(result.model_a)}</td>"
        f"<td>{_text(result.metric)}</td>{_td(str(result.n_cases), 'd')}"
        f"{_td(_format(result.diff, '+.3f'), 'f')}{_td(interval, 'f')}"
        f"{_td(_format(result.p_value, '.3g'), 'f')}<td>{verdict}</td></tr>"
    )


def _flaky_table(records: Sequence[Mapping[str, Any]]) -> str:
    """Cases whose repeats disagree (some passed, some failed)."""
    from pytest_llmbench.stats import case_verdicts

    flaky = [verdict for verdict in case_verdicts(records) if verdict.verdict == "flaky"]
    if not flaky:
        return '<p class="note">No flaky case: every case passed or failed in all its repeats.</p>'
    rows = "".join(
        f"<tr><td>{_text(v.model)}</td><td>{_text(v.suite)}</td><td>{_text(v.case_id)}</td>"
        f"{_td(f'{v.passed}/{v.n}', 'd')}</tr>"
        for v in flaky
    )
    return (
        f'<h3>Flaky cases ({len(flaky)})</h3><table class="flaky"><tr><th>model</th>'
        f'<th>suite</th><th>case</th><th class="num">passed</th></tr>{rows}</table>'
    )


def _agreement_table(records: Sequence[Mapping[str, Any]]) -> str:
    """Krippendorff's alpha between the judges, per dimension."""
    from pytest_llmbench.judging.agreement import dimension_agreement
    from pytest_llmbench.leaderboard import has_judges

    if not has_judges(records):
        return ""
    rows = "".join(
        f"<tr><td>{_text(row.dimension)}</td>"
        f"{_td('n/a' if row.alpha is None else f'{row.alpha:.3f}', 'f')}"
        f"{_td(str(row.units), 'd')}{_td(str(row.judges), 'd')}</tr>"
        for row in dimension_agreement(records)
    )
    return (
        '<h3>Judge agreement</h3><table class="agreement"><tr><th>dimension</th>'
        '<th class="num">alpha</th><th class="num">units</th><th class="num">judges</th></tr>'
        f"{rows}</table>"
    )


def _cases_table(records: Sequence[Mapping[str, Any]]) -> str:
    """One row per item (``records`` are sorted), its transcript folded in a ``<details>``."""
    shown = records[:CASE_ROWS_LIMIT]
    note = ""
    if len(records) > len(shown):
        note = (
            f'<p class="note">Showing the first {len(shown):,} of {len(records):,} items '
            "(by suite, case, model, repeat); results.jsonl has them all.</p>"
        )
    header = "".join(
        _th(name, spec)
        for name, spec in (
            ("suite", "s"),
            ("case", "s"),
            ("model", "s"),
            ("repeat", "d"),
            ("task type", "s"),
            ("outcome", "s"),
            ("score", "f"),
            ("transcript", "s"),
        )
    )
    rows = "".join(_case_row(record) for record in shown)
    return f'{note}<table class="cases"><tr>{header}</tr>{rows}</table>'


def _case_sort_key(record: Mapping[str, Any]) -> tuple[str, str, str, int, str]:
    repeat = record.get("repeat")
    return (
        str(record.get("suite")),
        str(record.get("case_id")),
        model_of(record),
        repeat if isinstance(repeat, int) else -1,
        str(record.get("nodeid")),
    )


def _case_row(record: Mapping[str, Any]) -> str:
    outcome = str(record.get("outcome"))
    cells = (
        f"<td>{_text(record.get('suite'))}</td><td>{_text(record.get('case_id'))}</td>"
        f"<td>{_text(record.get('model'))}</td>{_td(_text(record.get('repeat')), 'd')}"
        f"<td>{_text(task_type(record.get('task')))}</td>"
        f'<td class="{_text(outcome)}">{_text(outcome)}</td>'
        f"{_td(_format(record.get('score'), '.3f'), 'f')}"
    )
    return (
        f"<tr>{cells}<td><details><summary>show</summary>{transcript(record)}</details></td></tr>"
    )


def transcript(record: Mapping[str, Any]) -> str:
    """An item's messages, then (as in the pytest-html extras) its answer and every verdict."""
    from .html import render_extra

    messages = "".join(
        f"<h4>{_text(message.get('role', '?'))}</h4><pre>{_text(_content(message))}</pre>"
        for message in _messages(record.get("messages"))
    )
    # The messages include the prompt: render_extra need not show it a second time.
    extra = render_extra({**record, "prompt": None if messages else record.get("prompt")})
    return f'<div class="transcript">{messages}{extra}</div>'


def _messages(value: Any) -> Iterable[Mapping[str, Any]]:
    return [item for item in value if isinstance(item, Mapping)] if isinstance(value, list) else []


def _content(message: Mapping[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    # Multi-part content and tool calls: show their JSON rather than drop them.
    shown = {key: value for key, value in message.items() if key != "role"}
    return json.dumps(shown, ensure_ascii=False, indent=1, default=str)


# -- charts ---------------------------------------------------------------------------------


def _charts(charts: Sequence[Chart]) -> str:
    return "".join(_chart(chart) for chart in charts)


def _chart(chart: Chart) -> str:
    """A chart's heading and plotly div, or the note that says why it is left out."""
    heading = f"<h3>{_text(chart.title)}</h3>"
    if chart.figure is None:
        return f'<figure class="chart">{heading}<p class="note">{_text(chart.note)}</p></figure>'
    div = chart.figure.to_html(
        full_html=False,
        include_plotlyjs=False,
        div_id=f"chart-{chart.name}",
        default_height=f"{chart.figure.layout.height}px",
        config={"displaylogo": False, "responsive": True},
    )
    return f'<figure class="chart">{heading}{div}</figure>'


# -- formatting -----------------------------------------------------------------------------


def _th(name: str, spec: str) -> str:
    return f'<th class="num">{_text(name)}</th>' if spec != "s" else f"<th>{_text(name)}</th>"


def _td(text: str, spec: str) -> str:
    """A cell of already escaped (or numeric) ``text``."""
    return f'<td class="num">{text}</td>' if spec != "s" else f"<td>{text}</td>"


def _format(value: Any, spec: str) -> str:
    if is_missing(value):
        return "-"
    if spec == "s":
        return _text(value)
    return _text(format(int(value) if spec == "d" else float(value), spec))


def _anchor(name: str) -> str:
    return name.lower().replace(" ", "-")


def _text(value: Any) -> str:
    return html.escape(str(value))


# -- the plugin -----------------------------------------------------------------------------


class ReportWriter:
    """Writes ``report.html`` into the results folder at the end of a run (controller only)."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.path: Path | None = None
        self.error: str | None = None

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        """After the recorder wrote results.jsonl and run.json: write the report."""
        from pytest_llmbench.results import RECORDER_KEY

        recorder = self.config.stash.get(RECORDER_KEY, None)
        if recorder is None or not recorder.records or recorder.out_dir is None:
            return
        try:
            run_info = _read_run_info(recorder.out_dir / "run.json")
            self.path = write_report(recorder.records, recorder.out_dir, run_info=run_info)
        except Exception as exc:  # a broken report must not change the run's exit status
            self.error = f"{type(exc).__name__}: {exc}"

    @pytest.hookimpl(trylast=True)  # the report's path last, after the leaderboard
    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        """Say where the report is, or why it is missing."""
        if self.path is not None:
            terminalreporter.write_line(f"llmbench: report {self.path}")
        elif self.error is not None:
            terminalreporter.write_line(f"llmbench: report not written: {self.error}", red=True)


def _read_run_info(path: Path) -> dict[str, Any] | None:
    """``run.json``, or None when it is missing or unreadable (the report goes on without it)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None
