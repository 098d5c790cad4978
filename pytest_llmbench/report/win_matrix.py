"""The report's win matrix of judged pairs: one row per model, its win rate over all its pairs
with the 95% interval, then one column per opponent (a model of this run, from ``select-best``
contests, or a baseline run's model, marked ``(baseline)``), each cell the win rate against that
opponent and the number of pairs. Ties count half (:mod:`pytest_llmbench.results.winrates`).
Every text is escaped.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..results import BASELINE, SELECT_BEST, Pair, WinRate, model_win_rates, pairs, win_matrix
from .html_tables import text

#: How the pairs of each source were formed: the section's note, one sentence per source.
_SOURCE_NOTES = {
    BASELINE: (
        "Pairwise judging against the baseline run (columns marked (baseline)): each answer "
        "is judged against the baseline's answer to the same case in both orders, and a "
        "disagreement between the orders is a tie."
    ),
    SELECT_BEST: (
        "select-best contests within this run: the judge saw every contestant's answer to "
        "the same case and repeat and picked one, which beat each other answered contestant "
        "(a pair won by the pick, lost by the other); contestants not picked made no pair "
        "with each other."
    ),
}


def win_matrix_table(records: Sequence[Mapping[str, Any]]) -> str:
    """The win matrix of ``records``, or "" when no pair was judged."""
    found = pairs(records)
    if not found:
        return ""
    overall, matrix = model_win_rates(found), win_matrix(found)
    opponents = sorted({pair.opponent_label for pair in found})
    head = "".join(f'<th class="num">vs {text(name)}</th>' for name in opponents)
    rows = []
    for model, row in matrix.items():
        cells = "".join(_cell(row.get(name)) for name in opponents)
        rows.append(f"<tr><td>{text(model)}</td>{_cell(overall[model], ci=True)}{cells}</tr>")
    table = (
        '<table class="win-matrix"><thead><tr><th>model</th><th class="num">win rate [95% CI]'
        f"</th>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"
    )
    return _note(found) + table


def _note(found: Sequence[Pair]) -> str:
    """What a cell is, then how the pairs of each source present were formed."""
    sources = [
        _SOURCE_NOTES[source]
        for source in _SOURCE_NOTES
        if any(pair.source == source for pair in found)
    ]
    return (
        '<p class="note">Each cell is the share of pairs the row\'s model won against the '
        "column's opponent (a tie counts half) and the number of pairs; the win rate is over "
        f"all the row's pairs. {text(' '.join(sources))}</p>"
    )


def _cell(rate: WinRate | None, ci: bool = False) -> str:
    if rate is None or rate.n == 0:
        return '<td class="num">-</td>'
    shown = f"{rate.rate:.2f}"
    if ci:
        shown += f" [{rate.low:.2f}, {rate.high:.2f}]"
    return f'<td class="num">{text(shown)} (n={rate.n})</td>'
