"""The report's case x model matrix: one row per case, one column per contestant (model and
variant), each cell the outcome and the answer, coloured; filters and a search run in the page.

The filters are also read from the address (``report.html#q=paris&show=failures&suite=geo``),
so a link can open the report filtered. Every text is escaped; the page loads nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..results_folder import RESULTS_FILE
from .conversation_html import failing_turn_note
from .html_tables import text

#: Cases (rows) shown at most: a bigger run's matrix would be too big to open.
MATRIX_ROWS_LIMIT = 2000
_ANSWER_CHARS = 160
_SEARCH_CHARS = 4000

Record = Mapping[str, Any]
#: A case's records by contestant (model and variant).
Cells = dict[str, list[Record]]


def case_matrix(records: Sequence[Record]) -> str:
    """The matrix of ``records`` (sorted by suite, case, model, repeat) with its controls."""
    contestants = sorted({str(record.get("model")) for record in records})
    cases = group_cases(records)
    if not cases:
        return '<p class="note">No eval items.</p>'
    keys = sorted(cases)
    shown = keys[:MATRIX_ROWS_LIMIT]
    note = ""
    if len(keys) > len(shown):
        note = (
            f'<p class="note">Showing the first {len(shown):,} of {len(keys):,} cases; '
            f"{RESULTS_FILE} has them all.</p>"
        )
    head = "".join(f"<th>{text(name)}</th>" for name in contestants)
    rows = "".join(_row(key, cases[key], contestants) for key in shown)
    suites = sorted({suite for suite, _ in keys})
    return (
        _controls(suites)
        + note
        + '<div class="matrix-wrap"><table class="matrix" id="matrix">'
        + f"<tr><th>suite</th><th>case</th>{head}</tr>{rows}</table></div>"
        + f'<p class="note" id="matrix-count">{len(shown)} cases</p>'
    )


def _controls(suites: Sequence[str]) -> str:
    options = "".join(f'<option value="{text(s)}">{text(s)}</option>' for s in suites)
    return (
        '<form class="matrix-filter" id="matrix-filter" onsubmit="return false">'
        '<input type="search" name="q" placeholder="search prompts and answers" size="30">'
        '<select name="show"><option value="">all cases</option>'
        '<option value="failures">with a failure</option>'
        '<option value="errors">with an error</option>'
        '<option value="flaky">flaky (passed and failed)</option></select>'
        f'<select name="suite"><option value="">every suite</option>{options}</select>'
        "</form>"
    )


def group_cases(records: Sequence[Record]) -> dict[tuple[str, str], Cells]:
    """``(suite, case_id)`` -> the case's records by contestant, in the records' order."""
    cases: dict[tuple[str, str], Cells] = {}
    for record in records:
        key = (str(record.get("suite")), str(record.get("case_id")))
        cases.setdefault(key, {}).setdefault(str(record.get("model")), []).append(record)
    return cases


def case_flags(groups: Iterable[Sequence[Record]]) -> set[str]:
    """``failures``, ``errors`` and ``flaky`` (one contestant passed and failed) of a case."""
    return {flag for group in groups for flag in _flags(group)}


def searched_text(case_id: str, found: Sequence[Record]) -> str:
    """What a search of a case reads: its id, its prompt and every answer."""
    prompt = str(found[0].get("prompt") or "")
    return " ".join([case_id, prompt, *(str(r.get("response") or "") for r in found)])


def cell_status(group: Sequence[Record]) -> str:
    """A contestant's cell over its repeats: ``error`` if any errored, ``mixed`` if they
    disagree, else their outcome."""
    outcomes = {str(record.get("outcome")) for record in group}
    if "error" in outcomes:
        return "error"
    return "mixed" if len(outcomes) > 1 else outcomes.pop()


def shown_answer(record: Record) -> str:
    """An item's answer, or its error when it errored."""
    shown = record.get("error") if record.get("outcome") == "error" else record.get("response")
    return str(shown or "")


def _row(key: tuple[str, str], cells: Cells, contestants: list[str]) -> str:
    suite, case_id = key
    found = [record for group in cells.values() for record in group]
    flags = sorted(case_flags(cells.values()))
    prompt = str(found[0].get("prompt") or "")
    searched = searched_text(case_id, found)
    attributes = (
        f'data-suite="{text(suite)}" data-flags="{" ".join(flags)}" '
        f'data-text="{text(searched[:_SEARCH_CHARS].lower())}"'
    )
    tds = "".join(_cell(cells.get(name, [])) for name in contestants)
    title = text(prompt[:_SEARCH_CHARS])
    return (
        f'<tr {attributes}><td>{text(suite)}</td><td title="{title}">{text(case_id)}</td>{tds}</tr>'
    )


def _flags(group: Sequence[Record]) -> set[str]:
    outcomes = {str(record.get("outcome")) for record in group}
    flags = set()
    if "failed" in outcomes:
        flags.add("failures")
    if "error" in outcomes:
        flags.add("errors")
    if {"passed", "failed"} <= outcomes:
        flags.add("flaky")
    return flags


def _cell(group: Sequence[Record]) -> str:
    """A contestant's answer to a case: coloured by outcome (all repeats), the first answer."""
    if not group:
        return '<td class="skipped">-</td>'
    status = cell_status(group)
    passed = sum(record.get("outcome") == "passed" for record in group)
    counts = f"<b>{passed}/{len(group)}</b> " if len(group) > 1 else ""
    errored = [record for record in group if record.get("outcome") == "error"]
    shown = shown_answer(errored[0] if errored else group[0])
    clipped = shown[:_ANSWER_CHARS] + ("..." if len(shown) > _ANSWER_CHARS else "")
    turn = first_failing_turn(group)
    where = f'<span class="turn">{text(turn)}:</span> ' if turn else ""
    return (
        f'<td class="{status}" title="{text(shown[:_SEARCH_CHARS])}">{counts}{where}'
        f"{text(clipped)}</td>"
    )


def first_failing_turn(group: Sequence[Record]) -> str:
    """Where the first failed conversation of a contestant's repeats failed
    (``failed at turn 2/3``), or an empty text."""
    failed = [record for record in group if record.get("outcome") == "failed"]
    return failing_turn_note(failed[0]) if failed else ""


#: The filter's script: reads the form (and the address at load), hides the other rows.
MATRIX_SCRIPT = """
(() => {
  const form = document.getElementById("matrix-filter");
  const table = document.getElementById("matrix");
  if (!form || !table) return;
  const rows = Array.from(table.querySelectorAll("tr[data-suite]"));
  const count = document.getElementById("matrix-count");
  const apply = () => {
    const q = form.q.value.trim().toLowerCase();
    const show = form.show.value;
    const suite = form.suite.value;
    let shown = 0;
    for (const row of rows) {
      const flags = row.dataset.flags.split(" ");
      const ok = (!q || row.dataset.text.includes(q)) && (!show || flags.includes(show))
        && (!suite || row.dataset.suite === suite);
      row.style.display = ok ? "" : "none";
      shown += ok ? 1 : 0;
    }
    count.textContent = shown + " of " + rows.length + " cases";
  };
  const params = new URLSearchParams(location.hash.slice(1));
  for (const name of ["q", "show", "suite"]) {
    if (params.has(name)) form[name].value = params.get(name);
  }
  form.addEventListener("input", apply);
  apply();
})();
"""

MATRIX_STYLE = """
.matrix-wrap { overflow-x: auto; }
table.matrix td { max-width: 22em; vertical-align: top; font-size: 0.85em; }
table.matrix td.passed { background: #e6f4ea; }
table.matrix td.failed { background: #fce8e6; }
table.matrix td.error { background: #fef7e0; }
table.matrix td.mixed { background: #fff3cd; }
table.matrix span.turn { font-weight: 600; }
form.matrix-filter { margin: 0.5em 0; display: flex; gap: 0.5em; flex-wrap: wrap; }
"""
