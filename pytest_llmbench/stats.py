"""Statistics over records: repeat verdicts, clustered confidence intervals, paired comparisons.

Pure functions over wire records (see :mod:`pytest_llmbench.record`); nothing here touches
pytest, the network or the clock. A *case* is ``(suite, case_id)``; its repeats for one model are
the records with the same ``(model, suite, case_id)``. Answered repeats (``passed``/``failed``)
count; ``error`` repeats are counted apart; ``skipped`` repeats are ignored.

Everything is deterministic: cases are processed in sorted order, sums are exactly rounded
(:func:`math.fsum`), so the order of the records never changes a result, and the bootstrap is
seeded. numpy is imported inside the bootstrap only; there is no scipy: the t quantile and the
binomial tail are computed here.
"""

from __future__ import annotations

import functools
import math
import numbers
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

#: The model label of records from tests that called no model.
NO_MODEL = "(no model)"
#: The verdicts of :class:`CaseVerdict`, in report order.
VERDICTS: tuple[str, ...] = ("passed", "failed", "flaky", "error")
_SIGNIFICANCE = 0.05

CaseKey = tuple[str, str, str]  # (model, suite, case_id)


# --- intervals -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Interval:
    """A point estimate and its confidence interval."""

    #: The estimate (a mean).
    estimate: float
    #: Lower bound of the interval.
    low: float
    #: Upper bound of the interval.
    high: float


def clustered_mean(
    clusters: Sequence[Sequence[float]], confidence: float = 0.95
) -> Interval | None:
    """The mean of all values with a cluster-robust (CR1) confidence interval.

    Repeats of one case are not independent samples: the standard error treats each cluster
    (case) as one unit. With ``G`` non-empty clusters, ``N`` values and mean ``m``::

        var = G / (G - 1) * sum_g (sum_i (y_gi - m))**2 / N**2
        CI  = m -/+ t(1 - (1 - confidence) / 2, G - 1) * sqrt(var)

    For values in [0, 1] (scores, pass/fail) the interval is clamped to [0, 1] and never
    narrower than the Wilson score interval of the mean with one observation per case: CR1
    alone gives a zero-width interval when every case has the same mean (10 cases that all
    pass, or 20 that each pass 2 of 3), which would read as certainty. Returns None without
    values. For other values, a single cluster gives the range of its values.
    """
    groups = [[float(value) for value in cluster] for cluster in clusters if len(cluster)]
    values = [value for group in groups for value in group]
    if not values:
        return None
    count = len(values)
    mean = math.fsum(values) / count
    unit = all(0.0 <= value <= 1.0 for value in values)
    g = len(groups)
    if g == 1:
        if unit:
            return Interval(mean, *wilson(mean, 1, confidence))
        return Interval(mean, min(values), max(values))
    squares = math.fsum(math.fsum(value - mean for value in group) ** 2 for group in groups)
    half = t_quantile(1 - (1 - confidence) / 2, g - 1) * math.sqrt(g / (g - 1) * squares) / count
    low, high = mean - half, mean + half
    if unit:
        floor_low, floor_high = wilson(mean, g, confidence)
        low, high = max(min(low, floor_low), 0.0), min(max(high, floor_high), 1.0)
    return Interval(mean, low, high)


def wilson(share: float, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """The Wilson score interval of a proportion ``share`` observed on ``n`` units."""
    z = _normal_quantile(1 - (1 - confidence) / 2)
    denominator = 1 + z * z / n
    centre = (share + z * z / (2 * n)) / denominator
    half = z * math.sqrt(share * (1 - share) / n + z * z / (4 * n * n)) / denominator
    return max(centre - half, 0.0), min(centre + half, 1.0)


def _normal_quantile(p: float) -> float:
    """The standard normal quantile."""
    return statistics.NormalDist().inv_cdf(p)


@functools.lru_cache(maxsize=256)
def t_quantile(p: float, df: float) -> float:
    """The ``p`` quantile of Student's t distribution with ``df`` degrees of freedom."""
    if not 0.0 < p < 1.0 or df <= 0:
        raise ValueError(f"t_quantile needs 0 < p < 1 and df > 0, got p={p}, df={df}")
    if p < 0.5:
        return -t_quantile(1 - p, df)
    if p == 0.5:
        return 0.0
    low, high = 0.0, 1.0
    while t_cdf(high, df) < p:
        low, high = high, high * 2
    # Newton steps on the monotonic CDF, kept inside the bracket by bisection when they leave it.
    t = (low + high) / 2
    for _ in range(100):
        error = t_cdf(t, df) - p
        if error < 0:
            low = t
        else:
            high = t
        step = t - error / _t_pdf(t, df)
        t_next = step if low < step < high else (low + high) / 2
        if abs(t_next - t) <= 1e-14 * max(1.0, t):
            return t_next
        t = t_next
    return t


def _t_pdf(t: float, df: float) -> float:
    log_density = (
        math.lgamma((df + 1) / 2)
        - math.lgamma(df / 2)
        - 0.5 * math.log(df * math.pi)
        - (df + 1) / 2 * math.log1p(t * t / df)
    )
    return math.exp(log_density)


def t_cdf(t: float, df: float) -> float:
    """The CDF of Student's t distribution with ``df`` degrees of freedom at ``t``."""
    tail = 0.5 * _incomplete_beta(df / 2, 0.5, df / (df + t * t))
    return 1 - tail if t >= 0 else tail


def _incomplete_beta(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function I_x(a, b) (continued fraction, Lentz)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    log_front = (
        math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    )
    # The fraction converges fast for x < (a + 1) / (a + b + 2); use the symmetry otherwise.
    if x < (a + 1) / (a + b + 2):
        return math.exp(log_front) * _beta_fraction(a, b, x) / a
    return 1 - math.exp(log_front) * _beta_fraction(b, a, 1 - x) / b


def _beta_fraction(a: float, b: float, x: float) -> float:
    tiny, eps = 1e-300, 1e-16
    c, d = 1.0, 1 - (a + b) * x / (a + 1)
    d = 1 / (d if abs(d) > tiny else tiny)
    result = d
    for m in range(1, 1000):
        for numerator in (
            m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
            -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1)),
        ):
            d = 1 + numerator * d
            d = 1 / (d if abs(d) > tiny else tiny)
            c = 1 + numerator / c
            c = c if abs(c) > tiny else tiny
            result *= c * d
        if abs(c * d - 1) < eps:
            break
    return result


# --- pass@k --------------------------------------------------------------------------------


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k: the chance that at least one of ``k`` of ``n`` repeats passes.

    ``c`` repeats passed: ``1 - C(n - c, k) / C(n, k)``.
    """
    _check_counts(n, c, k)
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def pass_hat_k(n: int, c: int, k: int) -> float:
    """pass^k: the chance that ``k`` repeats drawn from ``n`` all pass: ``C(c, k) / C(n, k)``."""
    _check_counts(n, c, k)
    return math.comb(c, k) / math.comb(n, k)


def _check_counts(n: int, c: int, k: int) -> None:
    if not (0 <= c <= n and 1 <= k <= n):
        raise ValueError(f"pass@k needs 0 <= c <= n and 1 <= k <= n, got n={n}, c={c}, k={k}")


# --- verdicts per case ---------------------------------------------------------------------


@dataclass(frozen=True)
class CaseVerdict:
    """One case of one model across its repeats."""

    model: str
    suite: str
    case_id: str
    #: Answered (passed or failed) repeats.
    n: int
    #: Passed repeats.
    passed: int
    #: Error repeats (not answered).
    errors: int
    #: ``passed / n``; None without an answered repeat.
    pass_rate: float | None
    #: ``passed`` (every answered repeat passed), ``failed`` (none), ``flaky`` (some),
    #: ``error`` (no answered repeat, only errors).
    verdict: str


def case_verdicts(records: Iterable[Mapping[str, Any]]) -> list[CaseVerdict]:
    """The verdict of every case of every model, sorted by model, suite, case_id.

    A case whose repeats were all skipped has no verdict (it is left out).
    """
    return _verdicts(_repeats_by_case(records))


def _verdicts(cases: Mapping[CaseKey, _Repeats]) -> list[CaseVerdict]:
    return [_verdict(key, cases[key]) for key in sorted(cases)]


def _verdict(key: CaseKey, repeats: _Repeats) -> CaseVerdict:
    n, errors = len(repeats.passes), repeats.errors
    passed = int(sum(repeats.passes))
    if n == 0:
        verdict = "error"
    elif passed == n:
        verdict = "passed"
    else:
        verdict = "failed" if passed == 0 else "flaky"
    return CaseVerdict(*key, n, passed, errors, passed / n if n else None, verdict)


def case_key(record: Mapping[str, Any]) -> CaseKey:
    """``(model, suite, case_id)`` of a record; no model is :data:`NO_MODEL`."""
    model = record.get("model")
    return (
        NO_MODEL if model is None else str(model),
        str(record.get("suite")),
        str(record.get("case_id")),
    )


def policy_passes(verdict: CaseVerdict, policy: str) -> bool:
    """Whether a case passes under a ``--repeat-policy``: all | majority | any | at-least:K.

    ``majority`` is a strict majority of the answered repeats; a case with no answered repeat
    passes under no policy.
    """
    if verdict.n == 0:
        return False
    if policy == "all":
        return verdict.passed == verdict.n
    if policy == "majority":
        return 2 * verdict.passed > verdict.n
    if policy == "any":
        return verdict.passed >= 1
    if policy.startswith("at-least:") and policy.removeprefix("at-least:").isdigit():
        return verdict.passed >= int(policy.removeprefix("at-least:"))
    raise ValueError(f"unknown repeat policy {policy!r}: all, majority, any or at-least:K")


class _Repeats:
    """What a case's repeats gave: scores and 1.0/0.0 passes of the answered ones, errors."""

    __slots__ = ("errors", "passes", "scores")

    def __init__(self) -> None:
        self.scores: list[float] = []
        self.passes: list[float] = []
        self.errors = 0


def _repeats_by_case(records: Iterable[Mapping[str, Any]]) -> dict[CaseKey, _Repeats]:
    """One pass over the records: each case's answered values and error count (skips ignored)."""
    cases: dict[CaseKey, _Repeats] = {}
    for record in records:
        outcome = record.get("outcome")
        if outcome not in ("passed", "failed", "error"):
            continue
        repeats = cases.get(key := case_key(record))
        if repeats is None:
            repeats = cases[key] = _Repeats()
        if outcome == "error":
            repeats.errors += 1
            continue
        repeats.passes.append(1.0 if outcome == "passed" else 0.0)
        score = _number(record.get("score"))
        if score is not None:
            repeats.scores.append(score)
    return cases


def score_clusters(records: Iterable[Mapping[str, Any]]) -> list[list[float]]:
    """The scores of the answered repeats, one list per case (sorted), for a clustered CI."""
    return _clusters(_repeats_by_case(records), "scores")


def pass_clusters(records: Iterable[Mapping[str, Any]]) -> list[list[float]]:
    """1.0 / 0.0 per answered repeat (passed / failed), one list per case (sorted)."""
    return _clusters(_repeats_by_case(records), "passes")


def _clusters(cases: Mapping[CaseKey, _Repeats], field: str) -> list[list[float]]:
    # Sorted cases and values: the result, and every sum over it, ignores record order.
    lists = (getattr(cases[key], field) for key in sorted(cases))
    return [sorted(values) for values in lists if values]


@dataclass(frozen=True)
class RepeatSummary:
    """A group of records summarised across repeats (see :func:`summarize_repeats`)."""

    #: Mean score of the answered items with its clustered CI; None without a score.
    score: Interval | None
    #: Pass rate of the answered items (0/1 values) with its clustered CI; None without answers.
    pass_rate: Interval | None
    #: Every case's verdict, sorted by model, suite, case_id.
    verdicts: tuple[CaseVerdict, ...]
    #: pass@k / pass^k over the answered cases; None without answers.
    at_k: PassAtK | None

    @property
    def n_flaky(self) -> int:
        """Cases whose answered repeats disagree."""
        return sum(1 for verdict in self.verdicts if verdict.verdict == "flaky")


def summarize_repeats(
    records: Iterable[Mapping[str, Any]], confidence: float = 0.95
) -> RepeatSummary:
    """Clustered CIs of the score and pass rate, verdicts and pass@k, in one pass."""
    cases = _repeats_by_case(records)
    verdicts = tuple(_verdicts(cases))
    return RepeatSummary(
        score=clustered_mean(_clusters(cases, "scores"), confidence),
        pass_rate=clustered_mean(_clusters(cases, "passes"), confidence),
        verdicts=verdicts,
        at_k=mean_pass_at_k(verdicts),
    )


@dataclass(frozen=True)
class PassAtK:
    """pass@k and pass^k averaged over the cases, with the ``k`` they are computed for."""

    #: The smallest number of answered repeats over the cases.
    k: int
    pass_at_k: float
    pass_hat_k: float


def mean_pass_at_k(verdicts: Iterable[CaseVerdict]) -> PassAtK | None:
    """pass@k and pass^k over the answered cases, ``k`` = their fewest answered repeats.

    None when no case has an answered repeat.
    """
    answered = [verdict for verdict in verdicts if verdict.n]
    if not answered:
        return None
    k = min(verdict.n for verdict in answered)
    at = math.fsum(pass_at_k(v.n, v.passed, k) for v in answered) / len(answered)
    hat = math.fsum(pass_hat_k(v.n, v.passed, k) for v in answered) / len(answered)
    return PassAtK(k, at, hat)


# --- paired comparisons --------------------------------------------------------------------


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
    for (model, suite, case_id), repeats in _repeats_by_case(records).items():
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
    return min(1.0, 2 * tail / 2**n)


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


def _number(value: Any) -> float | None:
    """A finite float, or None for None, NaN (pandas' missing) and non-numbers."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return None
    return float(value) if math.isfinite(value) else None
