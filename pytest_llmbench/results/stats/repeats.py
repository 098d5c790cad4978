"""Repeat verdicts: each case's repeats for one model, its verdict, and pass@k over the cases.

A *case* is ``(suite, case_id)``; its repeats for one model are the records with the same
``(model, suite, case_id)`` (:func:`case_key`). Answered repeats (``passed``/``failed``) count;
``error`` repeats are counted apart; ``skipped`` repeats are ignored. Cases are processed in
sorted order, so the order of the records never changes a result.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ...config import parse_repeat_policy as parse_repeat_policy  # re-exported
from .intervals import Interval, clustered_mean

#: The model label of records from tests that called no model.
NO_MODEL = "(no model)"
#: The verdicts of :class:`CaseVerdict`, in report order.
VERDICTS: tuple[str, ...] = ("passed", "failed", "flaky", "error")

CaseKey = tuple[str, str, str]  # (model, suite, case_id)


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
    #: Answered repeats whose verdict a person's label decided (``verdict_source: human``).
    human_verdicts: int = 0


def case_verdicts(records: Iterable[Mapping[str, Any]]) -> list[CaseVerdict]:
    """The verdict of every case of every model, sorted by model, suite, case_id.

    A case whose repeats were all skipped has no verdict (it is left out).
    """
    return _verdicts(repeats_by_case(records))


def _verdicts(cases: Mapping[CaseKey, Repeats]) -> list[CaseVerdict]:
    return [_verdict(key, cases[key]) for key in sorted(cases)]


def _verdict(key: CaseKey, repeats: Repeats) -> CaseVerdict:
    n, errors = len(repeats.passes), repeats.errors
    passed = int(sum(repeats.passes))
    if n == 0:
        verdict = "error"
    elif passed == n:
        verdict = "passed"
    else:
        verdict = "failed" if passed == 0 else "flaky"
    rate = passed / n if n else None
    return CaseVerdict(*key, n, passed, errors, rate, verdict, repeats.humans)


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


class Repeats:
    """What a case's repeats gave: scores and 1.0/0.0 passes of the answered ones, errors."""

    __slots__ = ("errors", "humans", "passes", "scores")

    def __init__(self) -> None:
        self.scores: list[float] = []
        self.passes: list[float] = []
        self.errors = 0
        self.humans = 0  #: answered repeats a person's label decided


def repeats_by_case(records: Iterable[Mapping[str, Any]]) -> dict[CaseKey, Repeats]:
    """One pass over the records: each case's answered values and error count (skips ignored)."""
    cases: dict[CaseKey, Repeats] = {}
    for record in records:
        outcome = record.get("outcome")
        if outcome not in ("passed", "failed", "error"):
            continue
        repeats = cases.get(key := case_key(record))
        if repeats is None:
            repeats = cases[key] = Repeats()
        if outcome == "error":
            repeats.errors += 1
            continue
        repeats.passes.append(1.0 if outcome == "passed" else 0.0)
        if record.get("verdict_source") == "human":
            repeats.humans += 1
        score = _number(record.get("score"))
        if score is not None:
            repeats.scores.append(score)
    return cases


def score_clusters(records: Iterable[Mapping[str, Any]]) -> list[list[float]]:
    """The scores of the answered repeats, one list per case (sorted), for a clustered CI."""
    return _clusters(repeats_by_case(records), "scores")


def pass_clusters(records: Iterable[Mapping[str, Any]]) -> list[list[float]]:
    """1.0 / 0.0 per answered repeat (passed / failed), one list per case (sorted)."""
    return _clusters(repeats_by_case(records), "passes")


def _clusters(cases: Mapping[CaseKey, Repeats], field: str) -> list[list[float]]:
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
    cases = repeats_by_case(records)
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


def _number(value: Any) -> float | None:
    """A finite float, or None for None, NaN (pandas' missing) and non-numbers."""
    if type(value) is not float:  # the common case first: the ABC check costs a microsecond
        if value is None or isinstance(value, bool) or not isinstance(value, numbers.Real):
            return None
    return float(value) if math.isfinite(value) else None
