"""Early stopping of repeats: whether a case's verdict under its repeat policy is settled.

A case has ``N`` planned repeats (``--repeat N``). After some of them, ``c`` passed, ``f`` failed
and ``e`` ended in an error; ``n = c + f`` are answered and ``r = N - c - f - e`` remain. The
policy judges the answered repeats only (:func:`~.repeats.policy_passes`): ``all`` passes when
``f = 0`` (and ``n >= 1``), ``majority`` when ``c > f``, ``any`` when ``c >= 1``, ``at-least:K``
when ``c >= K``; a case without an answered repeat passes under none. Each policy passes more
with more passes and less with more fails, so the extreme futures decide.

**Exact curtailment** (``confidence = 1``, the default of ``--stop-early``): stop when no outcome
of the ``r`` remaining repeats (each a pass, a fail or an error) can change the verdict::

    pass settled  <=>  passes(c, f + r)        (every remaining repeat fails)
    fail settled  <=>  not passes(c + r, f)    (every remaining repeat passes)

that is: ``all``: fail when ``f >= 1``; pass only when ``r = 0``. ``any``: pass when ``c >= 1``;
fail when ``r = 0``. ``at-least:K``: pass when ``c >= K``; fail when ``c + r < K``.
``majority``: pass when ``c > f + r``; fail when ``c + r <= f``. The verdict equals the one of
all ``N`` repeats on the same outcomes, always (Armitage 1975; Jennison & Turnbull 2000, ch. 10).

**Robust predictive curtailment** (``confidence = 1 - δ < 1``): let ``q`` be a repeat's chance to
pass when it is answered, ``[q_L, q_U]`` the two-sided Clopper-Pearson interval of ``q`` from
``c`` passes in ``n`` answered repeats at level ``1 - δ/(2N)``, and ``m`` (``0 <= m <= r``) the
remaining repeats that will be answered (the others are errors). With ``X ~ Bin(m, q)`` future
passes and ``P_q(m) = P(passes(c + X, f + m - X))``::

    pass settled  <=>  min over m of P_{q_L}(m) >= 1 - δ/2
    fail settled  <=>  max over m of P_{q_U}(m) <= δ/2

``P_q(m)`` grows with ``q``, so the interval's ends are its worst cases. Why the stated rate
holds per case: the interval misses ``q`` at one look with chance at most ``δ/(2N)``, and a case
has at most ``N`` looks (Bonferroni: ``δ/2`` for all of them); while it holds, the verdict
declared at the stop flips with chance at most ``δ/2``. So the verdict differs from the one of
all ``N`` repeats with chance at most ``δ``, for any true ``q`` (repeats independent, with one
chance to pass). Clopper & Pearson (1934); stochastic curtailment: Lan, Simon & Halperin (1982).
Both rules wait for ``min_repeats`` answered repeats before any stop, so that pass@k keeps its
``k``.

Pure and stdlib only: the Clopper-Pearson ends (Beta quantiles) are found by bisection on the
binomial tail.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

Settled = Literal["pass", "fail"]

#: ``--stop-early`` given without a value: exact curtailment.
EXACT = 1.0
#: Answered repeats a case takes before any stop (``--stop-early-min``), unless told otherwise.
DEFAULT_MIN_REPEATS = 2

_BISECTIONS = 60


def settled(
    policy: str,
    planned: int,
    passed: int,
    failed: int,
    errors: int,
    *,
    confidence: float = EXACT,
    min_repeats: int = DEFAULT_MIN_REPEATS,
) -> Settled | None:
    """The verdict (``"pass"``/``"fail"``) of a case that no further repeat can change at
    ``confidence`` (1: exact curtailment; below 1: robust predictive), or None: sample on.

    ``planned`` is ``N``; ``passed``, ``failed`` and ``errors`` count the repeats taken. When no
    repeat remains the verdict is the policy's. Before ``min_repeats`` answered repeats nothing
    is settled (unless none remains). A repeat that ended in an error counts as still open, as
    one not run yet: ``--retry-errors`` may run it again and it may pass or fail then, so a
    verdict settled here stays that of all ``N`` repeats after any retry.
    """
    remaining = planned - passed - failed - errors
    if min(passed, failed, errors) < 0 or remaining < 0:
        raise ValueError(
            f"repeat counts must be >= 0 and sum to at most N={planned}: "
            f"passed={passed}, failed={failed}, errors={errors}"
        )
    if not 0.0 < confidence <= 1.0:
        raise ValueError(f"confidence must be in (0, 1], got {confidence}")
    passes = policy_rule(policy)
    if remaining == 0:
        return "pass" if passes(passed, failed) else "fail"
    if passed + failed < min_repeats:
        return None
    unsettled = remaining + errors  # an errored repeat may yet pass or fail on a retry
    if passes(passed, failed + unsettled):
        return "pass"
    if not passes(passed + unsettled, failed):
        return "fail"
    if confidence >= EXACT:
        return None
    return _predictive(policy.lower(), planned, passed, failed, unsettled, 1.0 - confidence)


@dataclass(frozen=True)
class StopRule:
    """:func:`settled` for the cases of one run: its policy, ``N``, confidence and floor."""

    policy: str
    planned: int
    confidence: float = EXACT
    min_repeats: int = DEFAULT_MIN_REPEATS

    @property
    def name(self) -> str:
        """How it decides, in words (:func:`rule_name`)."""
        return rule_name(self.confidence)

    def __call__(self, passed: int, failed: int, errors: int) -> Settled | None:
        """The settled verdict of a case after these repeats, or None."""
        return settled(
            self.policy,
            self.planned,
            passed,
            failed,
            errors,
            confidence=self.confidence,
            min_repeats=self.min_repeats,
        )


def rule_name(confidence: float) -> str:
    """How a stop was decided, in words: ``exact`` or ``95% predictive``."""
    if confidence >= EXACT:
        return "exact"
    return f"{confidence * 100:g}% predictive"


def policy_rule(policy: str) -> Callable[[int, int], bool]:
    """``passes(passed, failed)`` of a repeat policy (all, majority, any, at-least:K), as
    :func:`~.repeats.policy_passes` judges a case: no answered repeat passes under none."""
    return _rule(policy.lower())


@functools.lru_cache(maxsize=32)
def _rule(policy: str) -> Callable[[int, int], bool]:
    if policy == "all":
        return lambda c, f: f == 0 and c >= 1
    if policy == "majority":
        return lambda c, f: c > f
    if policy == "any":
        return lambda c, f: c >= 1
    count = policy.removeprefix("at-least:")
    if policy.startswith("at-least:") and count.isdigit():
        k = int(count)
        return lambda c, f: c >= k and c + f >= 1
    raise ValueError(f"unknown repeat policy {policy!r}: all, majority, any or at-least:K")


@functools.lru_cache(maxsize=4096)
def _predictive(
    policy: str,
    planned: int,
    passed: int,
    failed: int,
    remaining: int,
    delta: float,
) -> Settled | None:
    passes = _rule(policy)
    low, high = clopper_pearson(passed, passed + failed, 1.0 - delta / (2 * planned))
    futures = range(remaining + 1)  # m: how many of the remaining repeats are answered
    if min(_chance(passes, passed, failed, m, low) for m in futures) >= 1.0 - delta / 2:
        return "pass"
    if max(_chance(passes, passed, failed, m, high) for m in futures) <= delta / 2:
        return "fail"
    return None


def _chance(passes: Callable[[int, int], bool], c: int, f: int, m: int, q: float) -> float:
    """P(the policy passes after ``m`` more answered repeats, each passing with chance ``q``)."""
    return math.fsum(_pmf(m, x, q) for x in range(m + 1) if passes(c + x, f + m - x))


def _pmf(n: int, x: int, p: float) -> float:
    if p <= 0.0:
        return 1.0 if x == 0 else 0.0
    if p >= 1.0:
        return 1.0 if x == n else 0.0
    return math.comb(n, x) * p**x * (1.0 - p) ** (n - x)


def binomial_cdf(x: int, n: int, p: float) -> float:
    """P(Bin(n, p) <= x)."""
    if x < 0:
        return 0.0
    if x >= n:
        return 1.0
    return min(1.0, math.fsum(_pmf(n, k, p) for k in range(x + 1)))


def clopper_pearson(passed: int, n: int, level: float) -> tuple[float, float]:
    """The two-sided Clopper-Pearson interval of a chance from ``passed`` of ``n`` at ``level``:
    ``q_L`` with ``P(Bin(n, q_L) >= passed) = alpha/2`` (0 when ``passed = 0``) and ``q_U`` with
    ``P(Bin(n, q_U) <= passed) = alpha/2`` (1 when ``passed = n``), ``alpha = 1 - level``: the Beta
    quantiles ``B(alpha/2; c, n-c+1)`` and ``B(1-alpha/2; c+1, n-c)``, found by bisection."""
    if not 0 <= passed <= n or n < 1:
        raise ValueError(f"Clopper-Pearson needs 0 <= passed <= n and n >= 1, got {passed}/{n}")
    tail = (1.0 - level) / 2
    low = 0.0
    if passed > 0:  # P(X >= c) grows with p
        low = _bisect(lambda p: 1.0 - binomial_cdf(passed - 1, n, p) >= tail)
    high = 1.0
    if passed < n:  # P(X <= c) falls with p
        high = _bisect(lambda p: binomial_cdf(passed, n, p) <= tail)
    return low, high


def _bisect(reached: Callable[[float], bool]) -> float:
    """The smallest p in [0, 1] where the monotone ``reached`` turns true (to 2^-60)."""
    lo, hi = 0.0, 1.0
    for _ in range(_BISECTIONS):
        mid = (lo + hi) / 2
        if reached(mid):
            hi = mid
        else:
            lo = mid
    return (lo + hi) / 2


@dataclass(frozen=True)
class Expected:
    """What a stopping rule does to a case whose repeats pass with chance ``p`` (no errors)."""

    #: expected repeats taken, of ``N``
    samples: float
    #: chance that the stopped verdict differs from the one of all ``N`` repeats
    disagreement: float


def expected(
    policy: str,
    planned: int,
    p: float,
    *,
    confidence: float = EXACT,
    min_repeats: int = DEFAULT_MIN_REPEATS,
) -> Expected:
    """Expected repeats taken and the chance of a different verdict, exactly (a sum over every
    sequence of outcomes, grouped by their counts), for repeats that pass with chance ``p``."""
    passes = policy_rule(policy)
    states = {(0, 0): 1.0}  # (passed, failed) not yet stopped -> chance
    samples = wrong = 0.0
    for taken in range(planned + 1):
        following: dict[tuple[int, int], float] = {}
        for (c, f), chance in states.items():
            verdict = settled(
                policy, planned, c, f, 0, confidence=confidence, min_repeats=min_repeats
            )
            if verdict is not None:
                samples += taken * chance
                wrong += chance * _flip_chance(passes, verdict, c, f, planned - taken, p)
                continue
            for (dc, df), step in (((1, 0), p), ((0, 1), 1.0 - p)):
                if step > 0:
                    key = (c + dc, f + df)
                    following[key] = following.get(key, 0.0) + chance * step
        states = following
    return Expected(samples, wrong)


def _flip_chance(
    passes: Callable[[int, int], bool], verdict: Settled, c: int, f: int, r: int, p: float
) -> float:
    """P(all N repeats give another verdict than ``verdict``, declared after c passes, f fails)."""
    full_pass = _chance(passes, c, f, r, p)
    return max(0.0, 1.0 - full_pass) if verdict == "pass" else full_pass


#: What pass@k, pass^k and the CIs mean under ``--stop-early``, said wherever they are shown.
STOPPED_NOTE = (
    "pass@k, pass^k and CIs computed on the samples taken "
    "(early stopping: conditional on the stopping rule)"
)


@dataclass(frozen=True)
class StoppedSummary:
    """What ``--stop-early`` spared a run: repeats not run of those planned, and their cost."""

    #: repeats planned over the repeated cases (their records)
    planned: int
    #: repeats skipped by early stopping
    not_run: int
    #: the estimated cost of those: each one at the mean cost (answer and judges) of its case's
    #: repeats taken; None when none of them had a known cost
    saved_usd: float | None

    def line(self) -> str:
        """``early stopping: 2 of 9 repeats not run, ≈ $0.0012 saved``."""
        saved = "" if self.saved_usd is None else f", ≈ ${self.saved_usd:.4g} saved"
        return f"early stopping: {self.not_run} of {self.planned} repeats not run{saved}"


def stopped_summary(records: Iterable[Mapping[str, Any]]) -> StoppedSummary:
    """Count the repeats planned and stopped early in ``records``, and estimate the saving."""
    planned = stopped = 0
    costs: dict[tuple[str, str, str], list[float]] = {}
    skipped: dict[tuple[str, str, str], int] = {}
    for record in records:
        if record.get("samples_planned") is None:
            continue
        planned += 1
        key = (str(record.get("model")), str(record.get("suite")), str(record.get("case_id")))
        if record.get("stopped_early"):
            stopped += 1
            skipped[key] = skipped.get(key, 0) + 1
            continue
        cost = record.get("cost_usd")
        if record.get("outcome") != "skipped" and isinstance(cost, (int, float)):
            judges = record.get("judge_cost_usd")
            extra = judges if isinstance(judges, (int, float)) else 0.0
            costs.setdefault(key, []).append(float(cost) + float(extra))
    saved = [count * math.fsum(costs[key]) / len(costs[key]) for key, count in skipped.items()
             if costs.get(key)]  # fmt: skip
    return StoppedSummary(planned, stopped, math.fsum(saved) if saved else None)
