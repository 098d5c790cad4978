"""Paired comparisons of two models on the cases both answered.

:func:`compare` tests model b against model a: a paired bootstrap over cases
(:func:`paired_bootstrap`) for the mean score, McNemar's exact test (:func:`mcnemar_exact`) for
the per-case majority pass; :func:`case_changes` lists the cases that regressed or improved.
The bootstrap is seeded, and numpy is imported inside it only.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .repeats import repeats_by_case

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

_SIGNIFICANCE = 0.05


@dataclass(frozen=True)
class Comparison:
    """Model b against model a on the cases both answered."""

    model_a: str
    model_b: str
    #: ``score`` (paired bootstrap on per-case mean scores) or ``pass_rate`` (McNemar exact on
    #: per-case majority pass).
    metric: str
    #: Cases both models answered (with a score, for ``score``).
    n_cases: int
    #: ``b - a``: mean of the per-case differences (NaN without cases).
    diff: float
    #: 95% percentile bootstrap interval of ``diff`` (NaN without cases).
    low: float
    high: float
    p_value: float
    #: ``p_value < 0.05``.
    significant: bool


@dataclass(frozen=True)
class CaseChange:
    """One case answered by both sides: its mean score and majority pass on each."""

    suite: str
    case_id: str
    score_a: float | None
    score_b: float | None
    pass_a: bool
    pass_b: bool
    #: ``regressed`` (a passed, b does not), ``improved`` (the reverse) or ``same``.
    change: str


@dataclass(frozen=True)
class _CaseSummary:
    score: float | None  # mean score over answered repeats that have one
    passed: bool  # a strict majority of the answered repeats passed


def compare(
    records_a: Iterable[Mapping[str, Any]],
    records_b: Iterable[Mapping[str, Any]],
    model_a: str,
    model_b: str,
    *,
    seed: int = 0,
    resamples: int = 2000,
) -> list[Comparison]:
    """Compare b with a on their common cases: ``[score comparison, pass_rate comparison]``.

    ``records_a`` and ``records_b`` are one model's records each (filter them first); cases
    pair by ``(suite, case_id)``; ``model_a``/``model_b`` label the result. Score: paired
    bootstrap over cases of the per-case mean score difference. Pass rate: McNemar's exact test
    on the per-case majority verdicts, with a bootstrap interval of the paired difference.
    """
    side_a, side_b = _case_summaries(records_a), _case_summaries(records_b)
    common = sorted(set(side_a) & set(side_b))
    scored = [key for key in common if None not in (side_a[key].score, side_b[key].score)]
    score_diffs = [_diff(side_b[key].score, side_a[key].score) for key in scored]
    pairs = [(side_a[key].passed, side_b[key].passed) for key in common]
    pass_diffs = [float(b) - float(a) for a, b in pairs]
    return [
        _score_comparison(model_a, model_b, score_diffs, seed, resamples),
        _pass_comparison(model_a, model_b, pairs, pass_diffs, seed, resamples),
    ]


def case_changes(
    records_a: Iterable[Mapping[str, Any]],
    records_b: Iterable[Mapping[str, Any]],
    model_a: str,
    model_b: str,
) -> list[CaseChange]:
    """Per case answered on both sides: regressed cases first, then improved, then the same.

    A case passes on a side when a strict majority of its answered repeats passed (as in
    :func:`compare`). ``model_a``/``model_b`` name the sides; records are one model's each.
    """
    del model_a, model_b  # the sides' names; the changes are per case
    side_a, side_b = _case_summaries(records_a), _case_summaries(records_b)
    changes = [
        _change(suite, case_id, side_a[suite, case_id], side_b[suite, case_id])
        for suite, case_id in sorted(set(side_a) & set(side_b))
    ]
    rank = {"regressed": 0, "improved": 1, "same": 2}
    return sorted(changes, key=lambda change: rank[change.change])


def _change(suite: str, case_id: str, a: _CaseSummary, b: _CaseSummary) -> CaseChange:
    change = "same" if a.passed == b.passed else ("regressed" if a.passed else "improved")
    return CaseChange(suite, case_id, a.score, b.score, a.passed, b.passed, change)


def _case_summaries(records: Iterable[Mapping[str, Any]]) -> dict[tuple[str, str], _CaseSummary]:
    """Per answered case ``(suite, case_id)``: its mean score and its majority pass.

    Raises :class:`ValueError` when two models answered the same case: a side is one model.
    """
    summaries: dict[tuple[str, str], _CaseSummary] = {}
    for (model, suite, case_id), repeats in repeats_by_case(records).items():
        if not repeats.passes:
            continue
        if (suite, case_id) in summaries:
            raise ValueError(f"compare one model per side: {model!r} repeats {suite}::{case_id}")
        scores = repeats.scores
        summaries[suite, case_id] = _CaseSummary(
            math.fsum(scores) / len(scores) if scores else None,
            2 * sum(repeats.passes) > len(repeats.passes),
        )
    return summaries


def _diff(b: float | None, a: float | None) -> float:
    assert a is not None and b is not None
    return b - a


def _score_comparison(
    model_a: str, model_b: str, diffs: Sequence[float], seed: int, resamples: int
) -> Comparison:
    if not diffs:
        return Comparison(model_a, model_b, "score", 0, math.nan, math.nan, math.nan, 1.0, False)
    low, high, p_value = paired_bootstrap(diffs, seed=seed, resamples=resamples)
    diff = math.fsum(diffs) / len(diffs)
    return Comparison(
        model_a, model_b, "score", len(diffs), diff, low, high, p_value, p_value < _SIGNIFICANCE
    )


def _pass_comparison(
    model_a: str,
    model_b: str,
    pairs: Sequence[tuple[bool, bool]],
    diffs: Sequence[float],
    seed: int,
    resamples: int,
) -> Comparison:
    if not pairs:
        return Comparison(
            model_a, model_b, "pass_rate", 0, math.nan, math.nan, math.nan, 1.0, False
        )
    only_a = sum(1 for a, b in pairs if a and not b)
    only_b = sum(1 for a, b in pairs if b and not a)
    p_value = mcnemar_exact(only_a, only_b)
    low, high, _ = paired_bootstrap(diffs, seed=seed, resamples=resamples)
    diff = (only_b - only_a) / len(pairs)
    return Comparison(
        model_a, model_b, "pass_rate", len(pairs), diff, low, high, p_value, p_value < _SIGNIFICANCE
    )


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar p-value for ``b`` and ``c`` discordant pairs.

    ``min(1, 2 * P(X <= min(b, c)))`` for ``X ~ Binomial(b + c, 1/2)``; 1 without discordant
    pairs. Computed in integers, so it is exact for any count.
    """
    n = b + c
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(min(b, c) + 1))
    return min(1.0, 2 * tail / (1 << n))


def paired_bootstrap(
    diffs: Sequence[float], *, seed: int = 0, resamples: int = 2000, confidence: float = 0.95
) -> tuple[float, float, float]:
    """Percentile interval of the mean of ``diffs`` and a two-sided p-value, by resampling cases.

    ``p = min(1, 2 * min(share of resampled means <= 0, share >= 0))``, each share counted with
    the usual +1 correction (``(count + 1) / (resamples + 1)``). The percentile p-value is too
    small when there are few cases (every resample of three positive differences is positive),
    so it is never below ``2 ** (1 - n)``, the smallest p an exact paired sign-flip test can
    reach with ``n`` non-zero differences: one differing case is never significant, six can be.
    """
    import numpy as np

    values = np.asarray(sorted(diffs), dtype="float64")
    means = _resampled_means(values, np.random.default_rng(seed), resamples)
    tail = (1 - confidence) / 2
    low, high = (float(q) for q in np.quantile(means, [tail, 1 - tail]))
    below = (int(np.count_nonzero(means <= 0)) + 1) / (resamples + 1)
    above = (int(np.count_nonzero(means >= 0)) + 1) / (resamples + 1)
    floor = 2.0 ** (1 - int(np.count_nonzero(values)))
    p_value = min(1.0, max(2 * min(below, above), floor))
    return low, high, p_value


def _resampled_means(
    values: npt.NDArray[np.float64], rng: np.random.Generator, resamples: int
) -> npt.NDArray[np.float64]:
    import numpy as np

    # In blocks of about a million draws: 2000 resamples of 10,000 cases stay small in memory.
    block = max(1, 1_000_000 // len(values))
    means = [
        values[
            rng.integers(0, len(values), size=(min(block, resamples - start), len(values)))
        ].mean(axis=1)
        for start in range(0, resamples, block)
    ]
    return np.concatenate(means)
