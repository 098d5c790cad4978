"""Inter-judge agreement: Krippendorff's alpha (interval metric) per judged dimension; for a
user's grader (``model-graded``, whose judges pick labels) the nominal metric over the labels.

A unit is one model-graded assertion of one item (record ``nodeid`` and the judge entry's
``assertion`` index); its raters are the judges of that assertion. Alpha says how much more the
judges agree than chance would: 1.0 is perfect agreement, 0.0 is chance, below 0 is systematic
disagreement. Pure code, no pandas: it runs on the controller at session end.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ...judging import CONVERSATION_DIMENSIONS, JURY_DIMENSIONS

_ANSWERED = ("passed", "failed")


def interval_alpha(units: Mapping[Hashable, Mapping[str, float]]) -> float | None:
    """Krippendorff's alpha with the interval metric ``(a - b) ** 2``.

    ``units`` maps a unit id to ``{rater: value}``. Units with fewer than two values cannot be
    paired and are dropped. Returns None when no unit is pairable or the pairable values do not
    vary (alpha is undefined then). Runs in O(n) over the values.
    """
    pairable = [list(ratings.values()) for ratings in units.values() if len(ratings) >= 2]
    values = [value for unit in pairable for value in unit]
    if not values or len(set(values)) < 2:
        return None
    # Sums over ordered pairs i != j of (v_i - v_j)^2 equal 2 * m * sum((v - mean)^2); the
    # centred form avoids the cancellation of n * sum(v^2) - sum(v)^2 on large runs.
    n = len(values)
    observed = math.fsum(
        2 * len(unit) * _squared_deviations(unit) / (len(unit) - 1) for unit in pairable
    )
    # D_o = observed / n; D_e = (sum over all ordered pairs) / (n * (n - 1)).
    expected = 2 * _squared_deviations(values) / (n - 1)
    return 1.0 - (observed / n) / expected


def nominal_alpha(units: Mapping[Hashable, Mapping[str, Hashable]]) -> float | None:
    """Krippendorff's alpha with the nominal metric (two values differ or they do not).

    ``units`` maps a unit id to ``{rater: label}``; as :func:`interval_alpha`, units with fewer
    than two labels are dropped and None means undefined (no pairable unit, one label only).
    ``1 - (n - 1) * sum_u(pairs_u / (m_u - 1)) / (n^2 - sum_c n_c^2)``, where ``pairs_u`` counts
    the ordered pairs of unit u's labels that differ and ``n_c`` the pairable values of label c.
    """
    from collections import Counter

    pairable = [Counter(ratings.values()) for ratings in units.values() if len(ratings) >= 2]
    totals: Counter[Hashable] = Counter()
    for unit in pairable:
        totals.update(unit)
    if len(totals) < 2:
        return None
    n = sum(totals.values())
    observed = math.fsum(_differing_pairs(unit) / (unit.total() - 1) for unit in pairable)
    expected = n * n - sum(count * count for count in totals.values())
    return 1.0 - (n - 1) * observed / expected


def _differing_pairs(unit: Mapping[Hashable, int]) -> int:
    m = sum(unit.values())
    return m * m - sum(count * count for count in unit.values())


def _squared_deviations(values: list[float]) -> float:
    mean = math.fsum(values) / len(values)
    return math.fsum((value - mean) ** 2 for value in values)


@dataclass(frozen=True)
class DimensionAgreement:
    """Agreement of the judges on one dimension across a run."""

    #: The dimension key (``correctness``, ``rubric``, ``brand_voice``, ...).
    dimension: str
    #: Krippendorff's alpha (interval; nominal over a grader's labels); None when undefined.
    alpha: float | None
    #: Units (item x assertion) scored by at least two judges.
    units: int
    #: Distinct judges among those units.
    judges: int
    #: Scores in those units.
    values: int


def dimension_order(keys: Iterable[str]) -> list[str]:
    """The distinct ``keys``: the six jury dimensions and the three of a conversation jury in
    their standard order, then the rest A-Z."""
    present = set(keys)
    order = (*JURY_DIMENSIONS, *CONVERSATION_DIMENSIONS)
    standard = [key for key in order if key in present]
    return standard + sorted(present - set(order))


def dimension_agreement(records: Iterable[Mapping[str, Any]]) -> list[DimensionAgreement]:
    """Agreement per dimension over the ``judges`` entries of wire records.

    Only answered items (passed or failed) count, and only judges without an ``error``. Every
    dimension that some judge scored gets a row, pairable or not.
    """
    by_dimension: dict[str, dict[Hashable, dict[str, float]]] = {}
    #: the labels of the judges that picked one (model-graded), by dimension, unit and judge
    labels: dict[str, dict[Hashable, dict[str, Hashable]]] = {}
    for record in records:
        if record.get("outcome") not in _ANSWERED:
            continue
        for entry in judge_entries(record.get("judges")):
            if entry.get("error"):
                continue  # a failed judge gave no scores to agree on
            unit = (record.get("nodeid"), entry.get("assertion"), _order(entry))
            for dimension, score in (entry.get("scores") or {}).items():
                ratings = by_dimension.setdefault(dimension, {}).setdefault(unit, {})
                ratings[str(entry.get("judge"))] = float(score)
                if entry.get("choice") is not None:
                    picked = labels.setdefault(dimension, {}).setdefault(unit, {})
                    picked[str(entry.get("judge"))] = str(entry["choice"])
    return [
        _agreement(key, by_dimension[key], labels.get(key)) for key in dimension_order(by_dimension)
    ]


def _order(entry: Mapping[str, Any]) -> Hashable:
    """Which of the orders an assertion was judged in a judge entry is (pairwise's two orders,
    select-best's rotations): each order is a unit of its own, so a judge's vote in one does not
    hide its vote in another. None for the judged types asked once."""
    details = entry.get("details")
    if isinstance(details, list) and details and isinstance(details[0], Mapping):
        order = details[0].get("order")
        return order if isinstance(order, (str, int)) else None
    return None


def judge_entries(judges: Any) -> list[Mapping[str, Any]]:
    """The entries of a record's ``judges`` field, failed judges included.

    Older results have no such field, and a records frame holds NaN in its place: both give [].
    """
    if not isinstance(judges, list):
        return []
    return [entry for entry in judges if isinstance(entry, Mapping)]


def _agreement(
    dimension: str,
    units: Mapping[Hashable, Mapping[str, float]],
    labels: Mapping[Hashable, Mapping[str, Hashable]] | None = None,
) -> DimensionAgreement:
    """A dimension's agreement: nominal over the ``labels`` the judges picked when they picked
    some (a user's grader), interval over the scores otherwise."""
    pairable = [ratings for ratings in units.values() if len(ratings) >= 2]
    return DimensionAgreement(
        dimension=dimension,
        alpha=nominal_alpha(labels) if labels else interval_alpha(units),
        units=len(pairable),
        judges=len({judge for ratings in pairable for judge in ratings}),
        values=sum(len(ratings) for ratings in pairable),
    )
