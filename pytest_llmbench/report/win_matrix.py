"""The report's win matrix of pairwise judging: one row per model, its win rate over all its
pairs with the 95% interval, then one column per opponent (the baseline's model it met), each
cell the win rate against that opponent and the number of pairs. Ties count half
(:mod:`pytest_llmbench.results.winrates`). Every text is escaped.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..results.winrates import WinRate, model_win_rates, pairs, win_matrix
from .html_tables import text


def win_matrix_table(records: Sequence[Mapping[str, Any]]) -> str:
    """The win matrix of ``records``, or "" when no pair was judged."""
    found = pairs(records)
    if not found:
        return ""
    overall, matrix = model_win_rates(found), win_matrix(found)
    opponents = sorted({pair.opponent for pair in found})
    head = "".join(f'<th class="num">vs {text(name)}</th>' for name in opponents)
    rows = []
    for model, row in matrix.items():
        cells = "".join(_cell(row.get(name)) for name in opponents)
        rows.append(f"<tr><td>{text(model)}</td>{_cell(overall[model], ci=True)}{cells}</tr>")
    note = (
        '<p class="note">Pairwise judging against the baseline run: each cell is the share of '
        "pairs won (a tie counts half) and the number of pairs; both orders are judged and a "
        "disagreement is a tie.</p>"
    )
    table = (
        '<table class="win-matrix"><thead><tr><th>model</th><th class="num">win rate [95% CI]'
        f"</th>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"
    )
    return note + table


def _cell(rate: WinRate | None, ci: bool = False) -> str:
    if rate is None or rate.n == 0:
        return '<td class="num">-</td>'
    shown = f"{rate.rate:.2f}"
    if ci:
        shown += f" [{rate.low:.2f}, {rate.high:.2f}]"
    return f'<td class="num">{text(shown)} (n={rate.n})</td>'
