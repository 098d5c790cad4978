"""Trends over many runs: the values ``llmbench trend`` prints and the viewer's Trends page draws.

A trend is read from ``trend.jsonl`` (:data:`pytest_llmbench.results_folder.TREND_FILE`), the
append-only index of the runs a folder holds: each run's per-case verdicts, its commit and the
model versions it called. Only cases whose hash did not change are compared: a series counts,
in every run, the cases whose ``case_hash`` equals the latest run's for that case, and says how
many it left out.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RunPoint:
    """One run's figures in one series (a model on one eval file)."""

    run_id: str  #: the run folder's name
    started_at: str | None  #: run.json's ``started_at`` (ISO-8601 UTC)
    commit: str | None  #: the git commit the run was made at, if known
    model_versions: tuple[str, ...]  #: the model ids the run called for this series
    n: int  #: verdicts counted: items of unchanged cases, errors and skips excluded
    passed: int  #: of ``n``, the passed ones
    pass_rate: float | None  #: passed / n; None when n is 0
    pass_low: float | None  #: Wilson 95% interval of the pass rate
    pass_high: float | None
    score: float | None  #: mean score of the counted items
    score_low: float | None  #: 95% interval of the mean score (t interval; None below 2 items)
    score_high: float | None
    left_out: int  #: items of this run left out because their case's hash changed since
    errors: int  #: items with an error outcome (not in ``n``)
    marks: tuple[str, ...]  #: what changed since the previous point: ``commit``, ``model``


@dataclass(frozen=True)
class Drift:
    """The drift test's finding on one series' per-run pass rates."""

    method: str  #: ``page-hinkley``
    detected: bool
    direction: str | None  #: ``down`` or ``up`` when detected
    at_run: str | None  #: the run at which the change was detected
    since_run: str | None  #: the run after which the mean most likely changed
    statistic: float  #: the test's statistic at its largest
    threshold: float  #: the statistic above which a drift is declared (``lambda``)


@dataclass(frozen=True)
class Series:
    """A model on an eval file, run after run (oldest first)."""

    model: str
    eval_file: str
    points: tuple[RunPoint, ...]
    drift: Drift


@dataclass(frozen=True)
class CaseHistory:
    """One case of one model, verdict by verdict (oldest run first)."""

    model: str
    eval_file: str
    case_id: str
    case_hash: str | None  #: the latest run's
    verdicts: tuple[
        tuple[str, str], ...
    ]  #: (run id, ``pass``/``fail``/``flaky``/``error``/``changed``)
    state: str  #: the latest: ``passing``, ``failing``, ``flaky``, ``error``
    since: str | None  #: the run from which ``state`` has held without a break
    flips: int  #: changes between pass and fail (flaky counting as a change) over the history


@dataclass(frozen=True)
class SkippedFolder:
    """A folder under the runs folder that is not a readable run: listed, never fatal."""

    path: str
    reason: str


@dataclass(frozen=True)
class TrendReport:
    """Everything a trend shows, computed once."""

    runs: tuple[str, ...]  #: run ids, oldest first
    series: tuple[Series, ...]
    cases: tuple[CaseHistory, ...]
    skipped: tuple[SkippedFolder, ...]
