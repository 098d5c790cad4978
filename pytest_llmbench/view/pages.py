"""The pages of `llmbench view`, rendered on the server: runs, a run, an item, a comparison.

Every text from a record is escaped. Filters and sorts are query parameters, so every view is a
link; a run still going reloads itself every few seconds, as its records arrive.
"""

from __future__ import annotations

import datetime as dt
import urllib.parse
from collections.abc import Mapping, Sequence
from typing import Any

from ..report import (
    CONVERSATION_STYLE,
    Cells,
    batch_note,
    case_flags,
    cell_status,
    first_failing_turn,
    group_cases,
    leaderboard_table,
    searched_text,
    shown_answer,
    text,
    transcript,
)
from ..results_folder import REPORT_FILE, ResultsFolder
from .runs import Run

Record = Mapping[str, Any]
_STYLE = """
body { font-family: system-ui, sans-serif; margin: 0; color: #202124; }
header { background: #202124; color: white; padding: 0.6em 1.2em; }
header a { color: white; margin-right: 1.2em; text-decoration: none; font-weight: 600; }
main { padding: 1em 1.5em; }
table { border-collapse: collapse; margin: 0.5em 0; }
th, td { border: 1px solid #dadce0; padding: 0.25em 0.5em; text-align: left; vertical-align: top; }
td.passed, span.passed { background: #e6f4ea; } td.failed, span.failed { background: #fce8e6; }
td.error, span.error { background: #fef7e0; } td.mixed { background: #fff3cd; }
td.running { background: #e8f0fe; } td.interrupted { background: #f1f3f4; }
table.matrix td { max-width: 22em; font-size: 0.85em; }
pre { white-space: pre-wrap; background: #f8f9fa; padding: 0.5em; }
form.filters { display: flex; gap: 0.5em; flex-wrap: wrap; margin: 0.5em 0; }
.progress { background: #e8f0fe; padding: 0.6em; border-radius: 4px; }
.note { color: #5f6368; } .bad { color: #c5221f; }
ol.timeline li { margin-bottom: 0.6em; }
span.turn { font-weight: 600; }
"""


def layout(title: str, body: str, *, refresh_s: int | None = None) -> str:
    """A whole page; ``refresh_s``: reload itself (a run in progress)."""
    refresh = f'<meta http-equiv="refresh" content="{refresh_s}">' if refresh_s else ""
    return (
        f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">{refresh}'
        f"<title>{text(title)} - llmbench view</title><style>{_STYLE}{CONVERSATION_STYLE}</style>"
        "</head><body>"
        '<header><a href="/">Runs</a><a href="/review">Review</a><a href="/calibration">Calibration</a>'
        '<a href="/trends">Trends</a><a href="/launch">Launch</a></header>'
        f"<main><h1>{text(title)}</h1>{body}</main></body></html>"
    )


def link(path: str, **query: Any) -> str:
    shown = {name: value for name, value in query.items() if value not in (None, "")}
    return path + ("?" + urllib.parse.urlencode(shown) if shown else "")


# -- runs ----------------------------------------------------------------------------------------


def runs_page(runs: Sequence[Run]) -> str:
    if not runs:
        return layout("Runs", '<p class="note">No results folders yet: run pytest, or launch a '
                      'run.</p>')  # fmt: skip
    rows = "".join(_run_row(run) for run in runs)
    body = (
        '<form action="/compare" method="get"><p>Pick two runs (baseline, then new) and '
        '<button type="submit">compare</button></p><table class="runs"><tr><th>a</th><th>b</th>'
        "<th>started</th><th>status</th><th>models</th><th>suites</th><th>items</th>"
        "<th>pass rate</th><th>errors</th><th>cost USD</th><th>folder</th></tr>"
        f"{rows}</table></form>"
    )
    return layout("Runs", body, refresh_s=5 if any(r.status == "running" for r in runs) else None)


def _run_row(run: Run) -> str:
    key = text(run.key)
    rate = "-" if run.pass_rate is None else f"{100 * run.pass_rate:.1f}%"
    return (
        f'<tr data-run="{key}"><td><input type="radio" name="a" value="{key}"></td>'
        f'<td><input type="radio" name="b" value="{key}"></td>'
        f'<td><a href="{text(link("/run/" + run.key))}">{text(run.started_at or "?")}</a></td>'
        f'<td class="{run.status}">{run.status}</td><td>{text(", ".join(run.models))}</td>'
        f"<td>{text(', '.join(run.suites))}</td><td>{len(run.records)}</td><td>{rate}</td>"
        f"<td>{run.count('error')}</td><td>{run.cost:.4f}</td><td>{text(run.folder)}</td></tr>"
    )


# -- a run ---------------------------------------------------------------------------------------


def run_page(run: Run, params: Mapping[str, str]) -> str:
    from ..results import summarize

    parts = [_facts(run)]
    if run.status == "running" and run.progress:
        parts.append(f'<p class="progress" id="progress">{text(run.progress.get("line", ""))}</p>')
        parts.append(batches_table(run.progress.get("batches")))
    if run.records:
        summary = summarize(run.records)
        parts.append("<h2>Leaderboard</h2>" + leaderboard_table(summary.board))
    if ResultsFolder(run.folder).report.is_file():
        report = f"/file/{text(run.key)}/{REPORT_FILE}"
        parts.append(
            f'<details class="charts"><summary>Charts (the run\'s <a href="{report}">{REPORT_FILE}'
            f'</a>)</summary><iframe src="{report}" loading="lazy" title="{REPORT_FILE}" '
            'style="width:100%;height:80vh;border:1px solid #dadce0"></iframe></details>'
        )
    parts.append("<h2>Cases</h2>" + matrix(run, params))
    refresh = 3 if run.status == "running" else None
    return layout(f"Run {run.key}", "".join(parts), refresh_s=refresh)


def _facts(run: Run) -> str:
    facts = {
        "status": run.status,
        "started": run.started_at,
        "folder": str(run.folder),
        "models": ", ".join(run.models),
        "items": str(len(run.records)),
        "passed / failed / errors": f"{run.count('passed')} / {run.count('failed')} / "
        f"{run.count('error')}",
        "cost USD": f"{run.cost:.4f}",
    }
    if run.info and run.info.get("args"):
        facts["command"] = "pytest " + " ".join(str(arg) for arg in run.info["args"])
    rows = "".join(f"<tr><th>{text(k)}</th><td>{text(v)}</td></tr>" for k, v in facts.items())
    return f'<table class="facts">{rows}</table>'


#: progress.json's ``batches`` block: each count's key and how the page heads it
_BATCH_COUNTS = (
    ("submitted", "batches submitted"),
    ("in_progress", "in progress"),
    ("done", "done"),
    ("failed", "failed"),
    ("lines", "calls sent"),
    ("items_written", "answers read"),
)


def batches_table(batches: Any) -> str:
    """progress.json's ``batches`` block while a run waits on batch APIs (empty without one):
    the batches by state, the calls sent and answered, and when the oldest was created."""
    if not isinstance(batches, Mapping):
        return ""
    head = "".join(f"<th>{label}</th>" for _, label in _BATCH_COUNTS)
    cells = "".join(f"<td>{text(batches.get(key, '-'))}</td>" for key, _ in _BATCH_COUNTS)
    oldest = batches.get("oldest_created_at")
    since = "-"
    if isinstance(oldest, (int, float)) and not isinstance(oldest, bool):
        created = dt.datetime.fromtimestamp(float(oldest), dt.timezone.utc)
        since = created.strftime("%Y-%m-%d %H:%M:%S UTC")
    return (
        f'<table class="batches" id="batches"><tr>{head}<th>oldest created</th></tr>'
        f"<tr>{cells}<td>{text(since)}</td></tr></table>"
    )


_SHOW = {"": "all cases", "failures": "with a failure", "errors": "with an error",
         "flaky": "flaky (passed and failed)"}  # fmt: skip
_SORT = {"": "suite, case", "score": "score (worst first)", "latency": "latency (slowest first)",
         "cost": "cost (dearest first)"}  # fmt: skip


def matrix(run: Run, params: Mapping[str, str]) -> str:
    """The case x model matrix of ``run``, filtered and sorted by ``params``."""
    records = run.records
    models = sorted({str(r.get("model")) for r in records})
    suites = sorted({str(r.get("suite")) for r in records})
    tags = sorted({str(tag) for r in records for tag in r.get("tags") or []})
    shown_models = [m for m in models if not params.get("model") or m == params["model"]]
    cases = group_cases(records)
    keys = [key for key in cases if _keep(cases[key], key, params)]
    keys = _sorted(keys, cases, params.get("sort", ""))
    form = _filters(params, suites, tags, models)
    head = "".join(f"<th>{text(m)}</th>" for m in shown_models)
    rows = "".join(_row(run, key, cases[key], shown_models) for key in keys)
    count = f'<p class="note" id="count">{len(keys)} of {len(cases)} cases</p>'
    return (
        f'{form}{count}<table class="matrix" id="matrix"><tr><th>suite</th><th>case</th>{head}'
        f"</tr>{rows}</table>"
    )


def select_field(name: str, choices: Mapping[str, str], params: Mapping[str, str]) -> str:
    """A ``<select>`` of a filter form: ``choices`` (value -> label), the one in ``params``
    (the page's query) selected."""
    chosen = params.get(name, "")
    options = "".join(
        f'<option value="{text(value)}"{" selected" if value == chosen else ""}>'
        f"{text(label)}</option>"
        for value, label in choices.items()
    )
    return f'<select name="{name}">{options}</select>'


def _filters(
    params: Mapping[str, str], suites: list[str], tags: list[str], models: list[str]
) -> str:
    def select(name: str, choices: Mapping[str, str]) -> str:
        return select_field(name, choices, params)

    every = {"": "every suite", **{s: s for s in suites}}
    all_tags = {"": "every tag", **{t: t for t in tags}}
    all_models = {"": "every model", **{m: m for m in models}}
    q = text(params.get("q", ""))
    return (
        '<form class="filters" method="get">'
        f'<input type="search" name="q" value="{q}" placeholder="search prompts and answers">'
        f"{select('show', _SHOW)}{select('suite', every)}{select('tag', all_tags)}"
        f"{select('model', all_models)}{select('sort', _SORT)}"
        '<button type="submit">apply</button></form>'
    )


def _keep(cells: Cells, key: tuple[str, str], params: Mapping[str, str]) -> bool:
    groups = list(cells.values())
    if params.get("model"):
        groups = [cells[params["model"]]] if params["model"] in cells else []
        if not groups:
            return False
    found = [record for group in groups for record in group]
    if params.get("suite") and key[0] != params["suite"]:
        return False
    if params.get("tag") and not any(params["tag"] in (r.get("tags") or []) for r in found):
        return False
    show = params.get("show", "")
    if show and show not in case_flags(groups):
        return False
    query = params.get("q", "").strip().lower()
    return not query or query in searched_text(key[1], found).lower()


def _sorted(
    keys: list[tuple[str, str]],
    cases: Mapping[tuple[str, str], Mapping[str, list[Record]]],
    by: str,
) -> list[tuple[str, str]]:
    def values(key: tuple[str, str], name: str) -> list[float]:
        return [
            float(r[name])
            for group in cases[key].values()
            for r in group
            if isinstance(r.get(name), (int, float))
        ]

    if by == "score":
        return sorted(keys, key=lambda k: (_mean(values(k, "score"), 2.0), k))
    if by == "latency":
        return sorted(keys, key=lambda k: (-_mean(values(k, "latency_s"), 0.0), k))
    if by == "cost":
        return sorted(keys, key=lambda k: (-sum(values(k, "cost_usd")), k))
    return sorted(keys)


def _mean(values: list[float], default: float) -> float:
    return sum(values) / len(values) if values else default


def _row(
    run: Run, key: tuple[str, str], cells: Mapping[str, list[Record]], models: list[str]
) -> str:
    tds = "".join(_cell(run, cells.get(model, [])) for model in models)
    return (
        f'<tr data-case="{text(key[1])}"><td>{text(key[0])}</td><td>{text(key[1])}</td>{tds}</tr>'
    )


def _cell(run: Run, group: Sequence[Record]) -> str:
    if not group:
        return '<td class="skipped">-</td>'
    status = cell_status(group)
    links = " ".join(
        f'<a href="{text(link("/run/" + run.key + "/item", nodeid=r.get("nodeid")))}">'
        f"{text(_short(r))}</a>"
        for r in group
    )
    turn = first_failing_turn(group)
    where = f'<span class="turn">{text(turn)}</span> ' if turn else ""
    return f'<td class="{status}">{where}{links}</td>'


def _short(record: Record) -> str:
    value = shown_answer(record) or "(empty)"
    return value[:120] + ("..." if len(value) > 120 else "")


# -- an item -------------------------------------------------------------------------------------


def item_page(run: Run, record: Record, panel: str = "", blind: bool = False) -> str:
    """An item: its facts, answer, verdicts and judges; ``panel`` (the review's) after its
    facts; ``blind``: ``record`` comes without its verdicts, and its judges are not shown."""
    batched = batch_note(record)
    untimed = ("latency_s", "ttft_s") if batched else ()  # a batch's wait, not the model's
    facts = {
        name: record.get(name)
        for name in (
            "suite",
            "case_id",
            "model",
            "repeat",
            "outcome",
            "score",
            "threshold",
            "latency_s",
            "ttft_s",
            "input_tokens",
            "output_tokens",
            "reasoning_tokens",
            "cached_input_tokens",
            "effort",
            "finish_reason",
            "cost_usd",
            "judge_cost_usd",
            "user_sim_cost_usd",
            "agent_steps",
            "agent_stopped",
            "conversation_stopped",
            "transport_retries",
            "error_kind",
            "error",
        )
        if record.get(name) is not None and name not in untimed
    }
    if batched:
        facts["answered"] = batched
    rows = "".join(
        f"<tr><th>{text(k)}</th><td>{text(f'{v:.4g}' if isinstance(v, float) else v)}</td></tr>"
        for k, v in facts.items()
    )
    parts = [
        f'<p><a href="{text(link("/run/" + run.key))}">back to the run</a></p>',
        f'<table class="facts">{rows}</table>',
        panel,
        _thinking(record),
        "<h2>Conversation and answer</h2>"
        if blind
        else "<h2>Conversation, answer and verdicts</h2>",
        # the judges once, in their own section: not again inside the transcript
        transcript({**record, "judges": None}),
        "" if blind else _judges(record),
        _timeline(record),
        _attempts(record),
    ]
    return layout(f"{record.get('suite')}::{record.get('case_id')} on {record.get('model')}",
                  "".join(parts))  # fmt: skip


def _thinking(record: Record) -> str:
    """A reasoning model's thinking, apart from its answer (folded: it may be long)."""
    reasoning = record.get("reasoning")
    if not reasoning:
        return ""
    return f"<details><summary>Thinking</summary><pre>{text(reasoning)}</pre></details>"


def _judges(record: Record) -> str:
    judges = record.get("judges") or []
    if not judges:
        return ""
    rows = []
    for judge in judges:
        scores = judge.get("scores") or {}
        reasons = judge.get("reasons") or {}
        for dimension in sorted(set(scores) | set(reasons)):
            rows.append(
                f"<tr><td>{text(judge.get('judge'))}</td><td>{text(judge.get('assertion'))}</td>"
                f"<td>{text(judge.get('type'))}</td><td>{text(dimension)}</td>"
                f"<td>{text(scores.get(dimension))}</td><td>{text(reasons.get(dimension))}</td>"
                "</tr>"
            )
        if judge.get("error"):
            rows.append(f'<tr><td>{text(judge.get("judge"))}</td><td>{text(judge.get("assertion"))}'
                        f'</td><td colspan="4" class="bad">{text(judge["error"])}</td></tr>')  # fmt: skip
    return (
        '<h2>Judges</h2><table class="judges"><tr><th>judge</th><th>assertion</th><th>type</th>'
        f"<th>dimension</th><th>score</th><th>reasoning</th></tr>{''.join(rows)}</table>"
    )


def _timeline(record: Record) -> str:
    """An agent item's steps: each model call and the tool calls it asked for, with their
    timing, tokens and results; then its whole transcript."""
    steps = [step for step in record.get("timeline") or [] if isinstance(step, Mapping)]
    messages = [m for m in record.get("transcript") or [] if isinstance(m, Mapping)]
    if not steps and not messages:
        return ""
    items = "".join(f"<li>{_step(step)}</li>" for step in steps)
    talk = "".join(f"<li>{_message(message)}</li>" for message in messages)
    return (
        f'<h2>Agent timeline</h2><ol class="timeline">{items}</ol>'
        f'<details><summary>transcript</summary><ol class="transcript">{talk}</ol></details>'
    )


def _step(step: Mapping[str, Any]) -> str:
    if step.get("kind") == "tool":
        status = '<span class="error">error</span>' if step.get("error") else "ok"
        return (
            f"<b>tool {text(step.get('name'))}</b> (step {text(step.get('step'))}) "
            f"<span class='note'>{_seconds(step.get('seconds'))}, {status}</span>"
            f"<pre>{text(step.get('result'))}</pre>"
        )
    who = "model call" if step.get("role") == "step" else "shim interpreter call"
    figures = [
        _seconds(step.get("latency_s")),
        f"TTFT {_seconds(step.get('ttft_s'))}" if step.get("ttft_s") is not None else "",
        f"{step.get('input_tokens')} in / {step.get('output_tokens')} out tokens",
        f"{step['cost_usd']:.6f} USD" if isinstance(step.get("cost_usd"), (int, float)) else "",
        "cached" if step.get("cached") else "",
    ]
    shown = ", ".join(figure for figure in figures if figure)
    return f"<b>{who} {text(step.get('step'))}</b> <span class='note'>{text(shown)}</span>"


def _seconds(value: Any) -> str:
    return f"{float(value):.3f} s" if isinstance(value, (int, float)) else "-"


def _message(step: Mapping[str, Any]) -> str:
    role = str(step.get("role") or "step")
    calls = [c.get("function", c) for c in step.get("tool_calls") or [] if isinstance(c, Mapping)]
    called = "".join(
        f"<div>calls <b>{text(call.get('name'))}</b>({text(call.get('arguments'))})</div>"
        for call in calls
        if isinstance(call, Mapping)
    )
    content = step.get("content")
    body = f"<pre>{text(content)}</pre>" if content else ""
    return f"<b>{text(role)}</b>{called}{body}"


def _attempts(record: Record) -> str:
    attempts = record.get("attempts") or []
    if not attempts:
        return ""
    rows = "".join(
        f"<tr><td>{text(a.get('outcome'))}</td><td>{text(a.get('error'))}</td></tr>"
        for a in attempts
        if isinstance(a, Mapping)
    )
    return f"<h2>Earlier attempts</h2><table><tr><th>outcome</th><th>error</th></tr>{rows}</table>"
