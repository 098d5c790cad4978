"""Win rates of judged pairs: per model (leaderboard columns) and model x opponent (the
report's win matrix).

Pairs come from two sources:

- ``baseline``: each checked ``pairwise`` verdict of an answered record is one pair, a win (1),
  a tie (0.5) or a loss (0) of the record's model against the baseline's answer, whose model is
  the opponent (:mod:`pytest_llmbench.scoring.pairwise`).
- ``select-best``: the contestants (models and prompt variants) of one contest, the same
  eval file, case and repeat and the same ``select-best`` assertion, were shown to the judge
  together and one was picked. The pick beat every other contestant whose record is answered
  with a checked verdict: a pair (pick vs other, 1) and (other vs pick, 0). Contestants not
  picked never met each other, so they make no pair.

A model's ``win_rate`` is the mean over all its pairs, of both sources, so a tie counts half a
win; its 95% interval is Wilson's for that share over ``n_pairs`` pairs. Unchecked verdicts (no
baseline answer, an undecided contest) and errored items are not pairs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..scoring import PAIRWISE_TYPE, SELECT_BEST_TYPE
from .stats.intervals import wilson

if TYPE_CHECKING:
    import pandas as pd

#: The leaderboard's win-rate columns, after its metric columns, when a run judged pairs.
WIN_RATE_COLUMNS: tuple[str, ...] = ("win_rate", "win_rate_ci_low", "win_rate_ci_high", "n_pairs")
#: Where a pair comes from: a ``pairwise`` verdict against the baseline run's answer, or a
#: ``select-best`` contest between the contestants of this run.
BASELINE, SELECT_BEST = "baseline", SELECT_BEST_TYPE
_ANSWERED = ("passed", "failed")


@dataclass(frozen=True)
class Pair:
    """One judged pair: the model, the opponent it met, the score and where the pair comes
    from (:data:`BASELINE` or :data:`SELECT_BEST`)."""

    model: str
    opponent: str
    score: float  #: 1 win, 0.5 tie, 0 loss
    source: str = BASELINE

    @property
    def opponent_label(self) -> str:
        """The opponent as the win matrix names it: a baseline run's model is marked, since a
        model of this run may have the same name."""
        return f"{self.opponent} ({BASELINE})" if self.source == BASELINE else self.opponent


@dataclass(frozen=True)
class WinRate:
    """A share of wins (ties half) over ``n`` pairs, with its 95% Wilson interval."""

    rate: float
    low: float
    high: float
    n: int


def pairs(records: Iterable[Mapping[str, Any]]) -> list[Pair]:
    """The pairs of ``records``: the baseline pairs in record order, then the select-best
    pairs by contest."""
    listed = list(records)
    return baseline_pairs(listed) + select_best_pairs(listed)


def baseline_pairs(records: Iterable[Mapping[str, Any]]) -> list[Pair]:
    """The pairs of the records' checked ``pairwise`` verdicts, in record order."""
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


@dataclass(frozen=True)
class _Contestant:
    """A contestant of one select-best contest, answered with a checked verdict."""

    model: str
    picked: bool


#: A select-best contest: (eval file, case id, repeat, index of the assertion in the records).
_ContestKey = tuple[str, str, int, int]


def select_best_pairs(records: Iterable[Mapping[str, Any]]) -> list[Pair]:
    """The pairs of the records' decided ``select-best`` contests, by contest and model, so
    the records' order does not matter."""
    contests: dict[_ContestKey, list[_Contestant]] = {}
    for record in records:
        if record.get("outcome") not in _ANSWERED:
            continue
        for index, verdict in enumerate(record.get("assertions") or ()):
            if verdict.get("type") == SELECT_BEST_TYPE and not verdict.get("unchecked"):
                contestant = _Contestant(str(record.get("model")), float(verdict["score"]) == 1.0)
                contests.setdefault(_contest_key(record, index), []).append(contestant)
    found = []
    for key in sorted(contests):
        found += _contest_pairs(contests[key])
    return found


def _contest_key(record: Mapping[str, Any], index: int) -> _ContestKey:
    repeat = record.get("repeat")
    return (
        str(record.get("eval_file")),
        str(record.get("case_id")),
        repeat if isinstance(repeat, int) else -1,
        index,
    )


def _contest_pairs(contestants: Iterable[_Contestant]) -> list[Pair]:
    """The pick against each other answered contestant; none unless exactly one was picked
    (a contest whose pick errored, or an inconsistent one, is not decided)."""
    ordered = sorted(contestants, key=lambda contestant: (contestant.model, contestant.picked))
    picks = [contestant.model for contestant in ordered if contestant.picked]
    if len(picks) != 1:
        return []
    (pick,) = picks
    found = []
    for other in (contestant.model for contestant in ordered if not contestant.picked):
        found += [Pair(pick, other, 1.0, SELECT_BEST), Pair(other, pick, 0.0, SELECT_BEST)]
    return found


def win_rate(scores: Iterable[float]) -> WinRate:
    """The mean of ``scores`` (1, 0.5, 0) with its Wilson interval; NaN without any."""
    values = list(scores)
    if not values:
        return WinRate(float("nan"), float("nan"), float("nan"), 0)
    rate = sum(values) / len(values)
    low, high = wilson(rate, len(values))
    return WinRate(rate, low, high, len(values))


def model_win_rates(found: Iterable[Pair]) -> dict[str, WinRate]:
    """Each model's win rate over all its pairs, of both sources."""
    by_model: dict[str, list[float]] = {}
    for pair in found:
        by_model.setdefault(pair.model, []).append(pair.score)
    return {model: win_rate(scores) for model, scores in sorted(by_model.items())}


def win_matrix(found: Iterable[Pair]) -> dict[str, dict[str, WinRate]]:
    """model -> opponent (its :attr:`Pair.opponent_label`) -> the model's win rate against
    that opponent."""
    cells: dict[str, dict[str, list[float]]] = {}
    for pair in found:
        cells.setdefault(pair.model, {}).setdefault(pair.opponent_label, []).append(pair.score)
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
