"""The compare and launch pages of `llmbench view`."""

from __future__ import annotations

from collections.abc import Sequence

from ..report import text
from . import pages
from .queue import Job
from .runs import Run


def compare_page(baseline: Run, new: Run, switch: str) -> str:
    """Two runs case by case, per model (regressions first); ``switch`` ``OLD=NEW`` compares
    one model of the baseline with another of the new run, as ``llmbench compare --model``."""
    from ..results import compare_runs, models_of, pairing_note, switch_models
    from ..results_folder import ResultsError

    old, fresh = list(baseline.records), list(new.records)
    models: list[str] | None = None
    error = ""
    if "=" in switch:
        try:
            old, fresh, label = switch_models(old, fresh, switch)
            models = [label]
        except ResultsError as exc:
            error = f'<p class="bad">{text(exc)}</p>'
    results = compare_runs(old, fresh, models)
    form = (
        '<form class="filters" method="get" action="/compare">'
        f'<input type="hidden" name="a" value="{text(baseline.key)}">'
        f'<input type="hidden" name="b" value="{text(new.key)}">'
        f'<input name="model" value="{text(switch)}" placeholder="OLD=NEW model switch">'
        '<button type="submit">compare</button></form>'
    )
    head = (
        f"<p>baseline <a href='/run/{text(baseline.key)}'>{text(baseline.key)}</a> "
        f"({len(baseline.records)} records), new <a href='/run/{text(new.key)}'>"
        f"{text(new.key)}</a> ({len(new.records)} records)</p>"
    )
    note = pairing_note(results)
    warning = f'<p class="bad" id="pairing">Warning: {text(note)}.</p>' if note else ""
    sections = [warning, *(_model_section(result) for result in results)]
    if not results:
        both = f"baseline: {', '.join(models_of(old))}; new: {', '.join(models_of(fresh))}"
        sections.append(f'<p class="bad">No model is in both runs ({text(both)}).</p>')
    return pages.layout("Compare runs", form + error + head + "".join(sections))


def _model_section(result: object) -> str:
    from ..results import ModelComparison

    assert isinstance(result, ModelComparison)
    stats = "".join(
        f"<tr><td>{text(item.metric)}</td><td>{item.n_cases}</td><td>{item.diff:+.3f}</td>"
        f"<td>[{item.low:+.3f}, {item.high:+.3f}]</td><td>{'yes' if item.significant else 'no'}"
        "</td></tr>"
        for item in result.comparisons
    )
    changes = sorted(result.changes, key=lambda c: ({"regressed": 0, "improved": 1}.get(c.change, 2),
                                                    c.suite, c.case_id))  # fmt: skip
    rows = "".join(
        f'<tr class="{change.change}"><td>{text(change.change)}</td><td>{text(change.suite)}</td>'
        f"<td>{text(change.case_id)}</td><td>{_score(change.score_a)}</td>"
        f"<td>{_score(change.score_b)}</td>"
        f"<td>{'pass' if change.pass_a else 'fail'} -> {'pass' if change.pass_b else 'fail'}</td>"
        "</tr>"
        for change in changes
    )
    lost = "".join(f"<li>{text(case)}</li>" for case in result.lost)
    verdict = (
        "significant regression" if result.significant_regression else "no significant regression"
    )
    return (
        f"<h2>{text(result.model)}</h2><p class='{'bad' if result.significant_regression else ''}'>"
        f"{verdict}: {len(result.regressed)} regressed, {len(result.improved)} improved</p>"
        "<table><tr><th>metric</th><th>cases</th><th>new - baseline</th><th>95% CI</th>"
        f"<th>significant</th></tr>{stats}</table>"
        + (f"<p>Not answered now:</p><ul>{lost}</ul>" if lost else "")
        + _unpaired(result)
        + '<table class="changes"><tr><th>change</th><th>suite</th><th>case</th>'
        f"<th>baseline score</th><th>new score</th><th>pass</th></tr>{rows}</table>"
    )


#: The cases left out of the comparison, by kind: the field and what the page says of them.
_UNPAIRED = (
    ("changed", "changed since the baseline (edited under the same id): not compared"),
    ("added", "added since the baseline: not compared"),
    ("removed", "not in the new run (removed or not selected): not compared"),
)


def _unpaired(result: object) -> str:
    """The changed, added and removed cases of one model, each kind as a counted list."""
    parts = []
    for field, words in _UNPAIRED:
        cases: tuple[str, ...] = getattr(result, field)
        if cases:
            items = "".join(f"<li>{text(case)}</li>" for case in cases)
            count = f"{len(cases)} {'case' if len(cases) == 1 else 'cases'}"
            parts.append(f'<p class="{field}">{count} {words}:</p><ul class="{field}">{items}</ul>')
    return "".join(parts)


def _score(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def launch_page(files: Sequence[str], jobs: Sequence[Job], error: str) -> str:
    """The launch form and the queue."""
    boxes = (
        "".join(
            f'<label><input type="checkbox" name="files" value="{text(name)}"> {text(name)}</label><br>'
            for name in files
        )
        or '<p class="note">No *.eval.yaml files under the project.</p>'
    )
    form = (
        '<form method="post" action="/launch" id="launch">'
        f"<fieldset><legend>Eval files</legend>{boxes}</fieldset>"
        '<p><label>Models <input name="models" placeholder="default: the embedded model" size="40">'
        "</label> (comma list of litellm ids, profiles, @sets)</p>"
        '<p><label>Repeats <input name="repeat" value="1" size="3"></label> '
        '<label>xdist workers <input name="workers" value="0" size="4"></label> '
        '<label>Concurrency <input name="concurrency" size="4"></label> '
        '<label>-k <input name="keyword" size="20"></label></p>'
        '<button type="submit">queue the run</button></form>'
    )
    shown_error = f'<p class="bad" id="error">{text(error)}</p>' if error else ""
    rows = "".join(_job_row(job) for job in reversed(jobs))
    queue = (
        '<h2>Queue</h2><table class="jobs"><tr><th>#</th><th>state</th><th>files</th>'
        f"<th>models</th><th>results</th><th></th></tr>{rows}</table>"
    )
    live = any(job.state in ("queued", "running") for job in jobs)
    return pages.layout("Launch", shown_error + form + queue, refresh_s=3 if live else None)


def _job_row(job: Job) -> str:
    cancel = ""
    if job.state in ("queued", "running"):
        cancel = (
            f'<form method="post" action="/launch/{job.id}/cancel">'
            '<button type="submit">cancel</button></form>'
        )
    code = f" (exit {job.exit_code})" if job.exit_code is not None else ""
    return (
        f'<tr data-job="{job.id}"><td>{job.id}</td><td class="{text(job.state)}">'
        f"{text(job.state)}{code}</td><td>{text(', '.join(job.launch.files))}</td>"
        f"<td>{text(', '.join(job.launch.models) or 'default')}</td>"
        f"<td>{text(job.results_dir)}</td><td>{cancel}</td></tr>"
    )
