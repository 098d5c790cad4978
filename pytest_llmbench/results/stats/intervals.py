"""Confidence intervals and the distributions behind them: clustered means, Wilson, Student's t.

:func:`clustered_mean` gives a mean with a cluster-robust (CR1) interval, where a cluster is
the repeats of one case; :func:`wilson` the score interval of a proportion. There is no scipy:
the t quantile and CDF (through the regularized incomplete beta function) are computed here.
Sums are exactly rounded (:func:`math.fsum`).
"""

from __future__ import annotations

import functools
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass


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
