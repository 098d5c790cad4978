"""The pull request comment: ``llmbench compare BASELINE NEW --format github-comment``.

One Markdown document for a PR comment, made from two results folders and what
:func:`~pytest_llmbench.results.baseline.compare_runs` says of them:

- a hidden :data:`MARKER` line, by which the CI workflow finds its own comment to update it;
- a headline verdict: pass, significant regression, failed gates;
- the leaderboard of both runs per model (score, pass rate, p95 latency, cost per item, errors)
  with the deltas; the boards are the leaderboard code's (:func:`~pytest_llmbench.results.leaderboard`),
  as ``llmbench leaderboard`` shows them;
- the paired statistics with their p-values, the flipped cases (capped), the cases not compared
  (changed since the baseline, added, removed), the gates of the new run (``gate_failures`` of
  its run.json), and every compared case in a collapsed ``<details>``.

User text (model names, suites, case ids, folder names) is escaped by :func:`md_text`, so it
cannot end a table cell, open a code span or write HTML. The document is cut to
:data:`COMMENT_LIMIT` characters, GitHub's limit for a comment, with a note saying so.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..results import is_missing
from ..results_folder import RUN_FILE
from .markup import md_cell

if TYPE_CHECKING:
    import pandas as pd

    from ..results import CaseChange, Comparison, ModelComparison

#: The first line of every comment: invisible on GitHub, found by the workflow's update step.
MARKER = "<!-- llmbench-pr-comment -->"
#: GitHub refuses a comment body longer than this many characters.
COMMENT_LIMIT = 65_536
#: Flipped cases listed per model and direction before "... and N more".
SHOWN_FLIPS = 10
#: The note that ends a cut comment.
TRUNCATED_NOTE = (
    "*Cut to GitHub's {limit:,}-character comment limit: {left} more lines not shown. "
    "`llmbench compare` prints every case.*"
)
# ASCII punctuation that Markdown reads as syntax in running text and table cells; escaped
# with a backslash (md_cell has escaped the backslash and `|` already).
_SYNTAX = "`*_[]<>~&!#"


@dataclass(frozen=True)
class SavedRun:
    """One side of the comparison: a results folder as given, its records and run.json."""

    #: The folder as given on the command line (shown in the comment).
    folder: Path
    #: The records of its results.jsonl (relabelled for a model switch).
    records: Sequence[Mapping[str, Any]]
    #: Its run.json, or None when the run wrote none.
    info: Mapping[str, Any] | None


def md_text(text: str) -> str:
    """``text`` as inert Markdown: one line, ``\\`` and ``|`` escaped (:func:`.md_cell`), and
    every character that could start a code span, emphasis, a link or HTML escaped too."""
    cell = md_cell(text)
    return "".join(f"\\{char}" if char in _SYNTAX else char for char in cell)


def pull_request_comment(
    baseline: SavedRun,
    new: SavedRun,
    results: Sequence[ModelComparison],
    *,
    limit: int = COMMENT_LIMIT,
) -> str:
    """The comment's Markdown for ``new`` against ``baseline`` (``results`` is
    :func:`compare_runs` of their records), at most ``limit`` characters."""
    gates = gate_failures(new.info)
    lines = [
        MARKER,
        f"## llmbench: {verdict(results, gates)}",
        "",
        f"Baseline {run_label(baseline)}, new {run_label(new)}.",
        "",
        *leaderboard_lines(run_board(baseline), run_board(new)),
        "",
        *statistics_lines(results),
        "",
        *flip_lines(results),
        "",
        *unpaired_lines(results),
        "",
        *gate_lines(gates),
        "",
        *case_details(results),
    ]
    return fit(lines, limit)


def run_label(run: SavedRun) -> str:
    """``folder (N records, commit abc1234)``: the commit (``+dirty`` when tracked files had
    changes) from run.json's ``source``, when the run was made in a git repository."""
    facts = [f"{len(run.records)} {_plural(len(run.records), 'record')}"]
    git = _mapping(_mapping(_mapping(run.info).get("source")).get("git"))
    if git.get("commit"):
        dirty = "+dirty" if git.get("dirty") else ""
        facts.append(f"commit {md_text(str(git['commit'])[:7])}{dirty}")
    return f"{md_text(str(run.folder))} ({', '.join(facts)})"


def verdict(results: Sequence[ModelComparison], gates: Sequence[str] | None) -> str:
    """The headline: pass, or what failed (significant regressions, gates)."""
    regressed = [result.model for result in results if result.significant_regression]
    problems = []
    if regressed:
        problems.append("significant regression in " + ", ".join(map(md_text, regressed)))
    if gates:
        problems.append(f"{len(gates)} failed {_plural(len(gates), 'gate')}")
    if problems:
        return "❌ " + "; ".join(problems)
    if gates is None:
        return "✅ no significant regression (the new run's gates are unknown)"
    return "✅ pass: no significant regression, all gates passed"


def gate_failures(info: Mapping[str, Any] | None) -> list[str] | None:
    """The failed gates a run's run.json lists; None when it lists none (no run.json, or one
    without a list of them): the gates are unknown."""
    failures = _mapping(info).get("gate_failures")
    return [str(failure) for failure in failures] if isinstance(failures, list) else None


def run_board(run: SavedRun) -> pd.DataFrame:
    """The run's leaderboard, as ``llmbench leaderboard`` ranks it, errors counted as the run
    counted them (run.json's ``config.errors_count_as``)."""
    from ..results import leaderboard, records_frame

    errors_count_as = _mapping(_mapping(run.info).get("config")).get("errors_count_as")
    return leaderboard(records_frame(run.records, str(errors_count_as or "fail")))


def _mapping(value: Any) -> Mapping[str, Any]:
    """``value`` when it is a JSON object, else an empty one (run.json edited by hand)."""
    return value if isinstance(value, Mapping) else {}


# -- the leaderboard -----------------------------------------------------------------------------


@dataclass(frozen=True)
class BoardColumn:
    """A column of the comment's leaderboard: a leaderboard column shown as ``old → new (delta)``."""

    column: str  #: the leaderboard's column
    title: str  #: its header in the comment
    value: str  #: format of a value
    delta: str  #: format of the difference, new - baseline


BOARD_COLUMNS = (
    BoardColumn("score_mean", "score", "{:.3f}", "{:+.3f}"),
    BoardColumn("pass_rate", "pass rate", "{:.1%}", "{:+.1%}"),
    BoardColumn("latency_s_p95", "latency p95 s", "{:.2f}", "{:+.2f}"),
    BoardColumn("cost_usd_mean", "cost per item USD", "{:.6f}", "{:+.6f}"),
    BoardColumn("n_errors", "errors", "{:.0f}", "{:+.0f}"),
)


def leaderboard_lines(old: pd.DataFrame, new: pd.DataFrame) -> list[str]:
    """Per model (the new run's order, then models only the baseline has): each column as
    ``baseline → new (delta)``."""
    old_rows = _rows_by_model(old)
    new_rows = _rows_by_model(new)
    models = [*new_rows, *(model for model in old_rows if model not in new_rows)]
    lines = ["### Leaderboard (baseline → new)", ""]
    lines += [_row(["model", *(spec.title for spec in BOARD_COLUMNS)])]
    lines += ["| :--- |" + " ---: |" * len(BOARD_COLUMNS)]
    for model in models:
        before, after = old_rows.get(model), new_rows.get(model)
        cells = [_delta_cell(before, after, spec) for spec in BOARD_COLUMNS]
        lines.append(_row([md_text(model) + _presence(before, after), *cells]))
    return lines


def _rows_by_model(board: pd.DataFrame) -> dict[str, dict[str, Any]]:
    rows = board.to_dict("records")
    return {str(row["model"]): {str(key): value for key, value in row.items()} for row in rows}


def _presence(before: Mapping[str, Any] | None, after: Mapping[str, Any] | None) -> str:
    if before is None:
        return " (new model)"
    return " (not in the new run)" if after is None else ""


def _delta_cell(
    before: Mapping[str, Any] | None, after: Mapping[str, Any] | None, spec: BoardColumn
) -> str:
    old = None if before is None else _number(before.get(spec.column))
    now = None if after is None else _number(after.get(spec.column))
    shown = f"{_format(old, spec.value)} → {_format(now, spec.value)}"
    if old is None or now is None:
        return shown
    return f"{shown} ({spec.delta.format(now - old)})"


def _number(value: Any) -> float | None:
    return None if is_missing(value) else float(value)


def _format(value: float | None, spec: str) -> str:
    return "-" if value is None else spec.format(value)


def _row(cells: Iterable[str]) -> str:
    """A table row of cells that are Markdown already (escaped where they hold user text)."""
    return "| " + " | ".join(cells) + " |"


# -- paired statistics, flipped cases ------------------------------------------------------------


def statistics_lines(results: Sequence[ModelComparison]) -> list[str]:
    """The paired comparisons (new - baseline) per model, with p-values and verdicts, and the
    cases the new run no longer answers."""
    lines = ["### Paired comparisons (new - baseline)", ""]
    if not results:
        return [*lines, "No model is in both runs."]
    lines += [_row(["model", "metric", "difference [95% CI]", "p", "cases", "verdict"])]
    lines += ["| :--- | :--- | ---: | ---: | ---: | :--- |"]
    for result in results:
        lines += [_statistic_row(result.model, item) for item in result.comparisons]
    for result in results:
        if result.lost:
            lines += ["", _lost_line(result)]
    return lines


def _statistic_row(model: str, item: Comparison) -> str:
    metric = "pass rate" if item.metric == "pass_rate" else item.metric
    if not item.n_cases:
        return _row([md_text(model), metric, "-", "-", "0", "no case answered in both runs"])
    interval = f"{item.diff:+.3f} [{item.low:+.3f}, {item.high:+.3f}]"
    return _row(
        [md_text(model), metric, interval, f"{item.p_value:.3g}", str(item.n_cases), _verdict(item)]
    )


def _verdict(item: Comparison) -> str:
    if not item.significant:
        return "not significant"
    return "**significant regression**" if item.diff < 0 else "significant improvement"


def _lost_line(result: ModelComparison) -> str:
    shown = ", ".join(md_text(case) for case in result.lost[:SHOWN_FLIPS])
    more = len(result.lost) - SHOWN_FLIPS
    rest = f" and {more} more" if more > 0 else ""
    return (
        f"**{md_text(result.model)}**: {len(result.lost)} case(s) the baseline answered are not "
        f"answered now (every repeat an error, or the case gone): {shown}{rest}."
    )


def flip_lines(results: Sequence[ModelComparison]) -> list[str]:
    """The cases that flipped, per model and direction: regressed first, at most
    :data:`SHOWN_FLIPS` of each, then ``... and N more``."""
    lines = ["### Flipped cases", ""]
    flips = [
        (result.model, title, changes)
        for result in results
        for title, changes in (("regressed", result.regressed), ("improved", result.improved))
        if changes
    ]
    if not flips:
        return [*lines, "No case changed between passing and failing."]
    lines += [_row(["model", "case", "change", "score"]), "| :--- | :--- | :--- | ---: |"]
    for model, title, changes in flips:
        lines += [_change_row(model, change, title) for change in changes[:SHOWN_FLIPS]]
        if len(changes) > SHOWN_FLIPS:
            more = f"… and {len(changes) - SHOWN_FLIPS} more {title}"
            lines.append(_row([md_text(model), more, "", ""]))
    return lines


def _change_row(model: str, change: CaseChange, title: str) -> str:
    case = md_text(f"{change.suite}::{change.case_id}")
    scores = f"{_score(change.score_a)} → {_score(change.score_b)}"
    return _row([md_text(model), case, title, scores])


def _score(value: float | None) -> str:
    return "-" if value is None or is_missing(value) else f"{value:.2f}"


# -- cases not compared -------------------------------------------------------------------------

#: The kinds of cases left out of the comparison (:class:`ModelComparison`'s fields), and how
#: the comment names them.
UNPAIRED = (
    ("changed", "changed since the baseline"),
    ("added", "added since the baseline"),
    ("removed", "not in the new run (removed or not selected)"),
)


def unpaired_lines(results: Sequence[ModelComparison]) -> list[str]:
    """The changed, added and removed cases (not compared: an edited case is no regression),
    counted, then listed per model and kind up to :data:`SHOWN_FLIPS`; and the warning of a
    baseline paired by id alone."""
    from ..results import pairing_note

    lines = ["### Cases not compared", ""]
    note = pairing_note(results)
    if note:
        lines += [f"⚠️ Paired by id only: {md_text(note)}.", ""]
    kinds = [(kind, words, _cases_of(results, kind)) for kind, words in UNPAIRED]
    counts = [f"{len(cases)} {_plural(len(cases), 'case')} {words}" for _, words, cases in kinds
              if cases]  # fmt: skip
    if not counts:
        return [*lines, "None: every case is in both runs, unchanged."]
    lines += ["; ".join(counts) + ": not compared.", ""]
    lines += [_row(["model", "case", "since the baseline"]), "| :--- | :--- | :--- |"]
    for result in results:
        for kind, _ in UNPAIRED:
            cases = _unpaired(result, kind)
            lines += [_row([md_text(result.model), md_text(case), kind]) for case in
                      cases[:SHOWN_FLIPS]]  # fmt: skip
            if len(cases) > SHOWN_FLIPS:
                more = f"… and {len(cases) - SHOWN_FLIPS} more {kind}"
                lines.append(_row([md_text(result.model), more, ""]))
    return lines


def _unpaired(result: ModelComparison, kind: str) -> tuple[str, ...]:
    cases: tuple[str, ...] = getattr(result, kind)
    return cases


def _cases_of(results: Sequence[ModelComparison], kind: str) -> set[str]:
    """The distinct cases of ``kind`` over every model."""
    return {case for result in results for case in _unpaired(result, kind)}


def _plural(count: int, word: str) -> str:
    return word if count == 1 else f"{word}s"


# -- gates, every case ---------------------------------------------------------------------------


def gate_lines(gates: Sequence[str] | None) -> list[str]:
    """The new run's failed gates (run.json's ``gate_failures``), that all passed, or that
    they are unknown (``None``)."""
    lines = ["### Gates", ""]
    if gates is None:
        unknown = f"No gate_failures in the new run's {RUN_FILE} (none written, or malformed)"
        return [*lines, f"{unknown}: its gates are unknown."]
    if not gates:
        return [*lines, "All gates passed."]
    return [*lines, *(f"- ❌ {md_text(gate)}" for gate in gates)]


def case_details(results: Sequence[ModelComparison]) -> list[str]:
    """Every case both runs answered, per model, in a collapsed ``<details>`` block."""
    changes = [(result.model, change) for result in results for change in result.changes]
    lines = [
        "<details>",
        f"<summary>All {len(changes)} compared case results</summary>",
        "",
        _row(["model", "case", "baseline", "new", "change"]),
        "| :--- | :--- | :--- | :--- | :--- |",
    ]
    lines += [_case_row(model, change) for model, change in changes]
    return [*lines, "", "</details>"]


def _case_row(model: str, change: CaseChange) -> str:
    return _row(
        [
            md_text(model),
            md_text(f"{change.suite}::{change.case_id}"),
            _side(change.pass_a, change.score_a),
            _side(change.pass_b, change.score_b),
            change.change,
        ]
    )


def _side(passed: bool, score: float | None) -> str:
    return f"{'pass' if passed else 'fail'} ({_score(score)})"


# -- the length limit ----------------------------------------------------------------------------


def fit(lines: Sequence[str], limit: int = COMMENT_LIMIT) -> str:
    """``lines`` joined, or as many of them as fit in ``limit`` characters with a note saying
    how many were left out (an open ``<details>`` closed first)."""
    text = "\n".join(lines) + "\n"
    if len(text) <= limit:
        return text
    used, depth = 0, 0  # characters kept; <details> blocks open among the kept lines
    for index, line in enumerate(lines):
        note = _cut_note(limit, len(lines) - index, depth > 0)
        if used + len(line) + 1 + len(note) > limit:
            return "\n".join(lines[:index]) + "\n" + note
        used += len(line) + 1
        depth += (line == "<details>") - (line == "</details>")
    raise AssertionError("unreachable: the whole text did not fit")  # pragma: no cover


def _cut_note(limit: int, left: int, in_details: bool) -> str:
    close = "\n</details>\n" if in_details else ""
    return f"{close}\n{TRUNCATED_NOTE.format(limit=limit, left=left)}\n"
