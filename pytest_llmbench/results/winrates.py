"""Win rates of pairwise judging: per model (leaderboard columns) and model x opponent (the
report's win matrix).

Each checked ``pairwise`` verdict of an answered record is one pair: a win (1), a tie (0.5) or
a loss (0) of the record's model against the baseline's answer, whose model is the opponent
(:mod:`pytest_llmbench.scoring.pairwise`). A model's ``win_rate`` is the mean over its pairs, so
a tie counts half a win; its 95% interval is Wilson's for that share over ``n_pairs`` pairs.
Unchecked verdicts (no baseline answer) and errored items are not pairs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..scoring.pairwise import PAIRWISE_TYPE
from .stats.intervals import wilson

if TYPE_CHECKING:
    import pandas as pd

#: The leaderboard's win-rate columns, after its metric columns, when a run judged pairs.
WIN_RATE_COLUMNS: tuple[str, ...] = ("win_rate", "win_rate_ci_low", "win_rate_ci_high", "n_pairs")
_ANSWERED = ("passed", "failed")


@dataclass(frozen=True)
class Pair:
    """One judged pair: the model, the baseline's model it met, and the verdict's score."""

    model: str
    opponent: str
    score: float  #: 1 win, 0.5 tie, 0 loss


@dataclass(frozen=True)
class WinRate:
    """A share of wins (ties half) over ``n`` pairs, with its 95% Wilson interval."""

    rate: float
    low: float
    high: float
    n: int


def pairs(records: Iterable[Mapping[str, Any]]) -> list[Pair]:
    """The pairs of ``records``, in record order."""
    found = []
    for record in records:
        if record.get("outcome") not in _ANSWERED:
            continue
        scores = [
            float(verdict["score"])
            for verdict in record.get("assertions") or ()
            if verdict.get("type") == PAIRWISE_TYPE and not verdict.get("unchecked")
        ]
        if scores:
            model, opponent = str(record.get("model")), _opponent(record)
            found += [Pair(model, opponent, score) for score in scores]
    return found


def _opponent(record: Mapping[str, Any]) -> str:
    """The baseline's model named by the record's pairwise judge entries."""
    for entry in record.get("judges") or ():
        if entry.get("type") == PAIRWISE_TYPE:
            for detail in entry.get("details") or ():
                if detail.get("opponent") is not None:
                    return str(detail["opponent"])
    return "baseline"


def win_rate(scores: Iterable[float]) -> WinRate:
    """The mean of ``scores`` (1, 0.5, 0) with its Wilson interval; NaN without any."""
    values = list(scores)
    if not values:
        return WinRate(float("nan"), float("nan"), float("nan"), 0)
    rate = sum(values) / len(values)
    low, high = wilson(rate, len(values))
    return WinRate(rate, low, high, len(values))


def model_win_rates(found: Iterable[Pair]) -> dict[str, WinRate]:
    """Each model's win rate over all its pairs."""
    by_model: dict[str, list[float]] = {}
    for pair in found:
        by_model.setdefault(pair.model, []).append(pair.score)
    return {model: win_rate(scores) for model, scores in sorted(by_model.items())}


def win_matrix(found: Iterable[Pair]) -> dict[str, dict[str, WinRate]]:
    """model -> opponent -> the model's win rate against that opponent."""
    cells: dict[str, dict[str, list[float]]] = {}
    for pair in found:
        cells.setdefault(pair.model, {}).setdefault(pair.opponent, []).append(pair.score)
    return {
        model: {opponent: win_rate(scores) for opponent, scores in sorted(row.items())}
        for model, row in sorted(cells.items())
    }


def with_win_rates(board: pd.DataFrame, records: Iterable[Mapping[str, Any]]) -> pd.DataFrame:
    """``board`` with the :data:`WIN_RATE_COLUMNS` when ``records`` hold pairs (NaN, and
    ``n_pairs`` 0, for a model without any); unchanged otherwise."""
    rates = model_win_rates(pairs(records))
    if not rates:
        return board
    empty = win_rate(())
    rows = [rates.get(str(model), empty) for model in board["model"]]
    return board.assign(
        win_rate=[row.rate for row in rows],
        win_rate_ci_low=[row.low for row in rows],
        win_rate_ci_high=[row.high for row in rows],
        n_pairs=[row.n for row in rows],
    )
