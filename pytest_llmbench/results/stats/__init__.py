"""Statistics over records: repeat verdicts, clustered confidence intervals, paired comparisons.

Pure functions over wire records (see :mod:`pytest_llmbench.results.record`); nothing here touches
pytest, the network or the clock. A *case* is ``(suite, case_id)``; its repeats for one model are
the records with the same ``(model, suite, case_id)``. Answered repeats (``passed``/``failed``)
count; ``error`` repeats are counted apart; ``skipped`` repeats are ignored.

Everything is deterministic: cases are processed in sorted order, sums are exactly rounded
(:func:`math.fsum`), so the order of the records never changes a result, and the bootstrap is
seeded. numpy is imported inside the bootstrap only; there is no scipy: the t quantile and the
binomial tail are computed here.

The code lives in :mod:`~pytest_llmbench.results.stats.intervals` (intervals and the t distribution),
:mod:`~pytest_llmbench.results.stats.repeats` (verdicts per case, pass@k),
:mod:`~pytest_llmbench.results.stats.comparisons` (paired comparisons) and
:mod:`~pytest_llmbench.results.stats.drift` (the trend's Page-Hinkley drift test); callers import
it from here.
"""

from __future__ import annotations

from .comparisons import (
    CaseChange,
    Comparison,
    case_changes,
    compare,
    mcnemar_exact,
    paired_bootstrap,
)
from .drift import DEFAULT_PARAMS, PAGE_HINKLEY, DriftParams, page_hinkley
from .intervals import Interval, clustered_mean, t_cdf, t_quantile, wilson
from .repeats import (
    NO_MODEL,
    VERDICTS,
    CaseKey,
    CaseVerdict,
    PassAtK,
    RepeatSummary,
    case_key,
    case_verdicts,
    mean_pass_at_k,
    pass_at_k,
    pass_clusters,
    pass_hat_k,
    policy_passes,
    score_clusters,
    summarize_repeats,
)

__all__ = [
    "DEFAULT_PARAMS",
    "NO_MODEL",
    "PAGE_HINKLEY",
    "VERDICTS",
    "CaseChange",
    "CaseKey",
    "CaseVerdict",
    "Comparison",
    "DriftParams",
    "Interval",
    "PassAtK",
    "RepeatSummary",
    "case_changes",
    "case_key",
    "case_verdicts",
    "clustered_mean",
    "compare",
    "mcnemar_exact",
    "mean_pass_at_k",
    "page_hinkley",
    "paired_bootstrap",
    "pass_at_k",
    "pass_clusters",
    "pass_hat_k",
    "policy_passes",
    "score_clusters",
    "summarize_repeats",
    "t_cdf",
    "t_quantile",
    "wilson",
]
