"""The metric columns of an aggregate row, and how a group of records gets them.

:func:`aggregate` turns a records frame (:func:`pytest_llmbench.results.summary.records_frame`) into
one row of :data:`METRIC_COLUMNS` per group; :mod:`pytest_llmbench.results.summary` builds its
tables and files on it.

Counting rules:

- ``skipped`` items count in ``n_items`` and ``n_skipped`` and nowhere else, but for what an
  answered item with nothing to check (``error_kind: unchecked``) spent: its tokens and cost
  count in the totals. ``n_stopped_early`` counts the skipped repeats ``--stop-early`` spared
  (their case's verdict was settled): every other statistic is then over the samples taken.
- ``human_verdicts`` counts the items whose verdict a person's label decided
  (``verdict_source: human``, :mod:`.effective`): every other column counts their effective
  verdict.
- ``error`` items count in ``n_errors`` and ``error_rate``. They are *graded* (the ``graded_*``
  columns of the records frame, see :func:`grade_errors`) as ``--errors-count-as`` says: by
  default as failures scored 0, so ``pass_rate``, ``score_mean``/``score_std``, their CIs,
  ``n_flaky`` and pass@k count them; with ``skip`` they are left out of those. Timings, token
  and cost means and judged dimensions are over answered items only either way, while the
  tokens, cost, tool calls and transport retries an error spent still count in the totals.
- ``coverage`` is answered / (items run): the share of the non-skipped items that got an
  answer. ``incomplete`` is true when more than :data:`INCOMPLETE_ERROR_RATE` of them errored.
- Means and percentiles are over the answered (passed or failed) items that have the value.
  A batched answer (``batched``) has no ``latency_s``, ``ttft_s`` or ``tokens_per_s``: the
  timing columns leave it out, and ``batched_items`` counts the batched items (answered or
  errored, as ``n_cached`` counts the cached ones), so a reader sees why they have fewer values.
- Confidence intervals (``*_ci_low``/``*_ci_high``, 95%) treat the repeats of a case as one
  cluster (:func:`pytest_llmbench.results.stats.clustered_mean`); the pass rate's is over the answered
  items as 0/1 values. ``n_flaky`` counts the cases whose answered repeats disagree;
  ``pass_at_k``/``pass_hat_k`` are averaged over the answered cases for ``k``, the fewest
  answered repeats of any of them.
- Judges: cost, tokens and failed judges count over every non-skipped item; the per-dimension
  means (``dim_<key>_mean``, one column per judged dimension after :data:`METRIC_COLUMNS`) are
  over the answered items that have the dimension.
- Multiple choice: ``mc_n`` counts the answered items with a ``choice``; ``mc_accuracy`` is the
  share of them whose choice is correct (NaN without any).
- Conversations: a frame with an answered conversation record (a case's ``turns:``) gets the
  :data:`CONVERSATION_COLUMNS` after the named metrics: the median and 95th percentile of the
  latency of each reply of the model (over the replies of the answered conversations) and of a
  whole conversation (its record's ``latency_s``, the sum of its replies'); NaN in a row
  without conversations. A frame without any has none of these columns.

pandas is imported inside the functions: importing this module must stay cheap.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

# Moved to .column_families; still importable from here (summary.py imports them).
from .column_families import ANSWERED as ANSWERED
from .column_families import CONVERSATION_COLUMNS as CONVERSATION_COLUMNS
from .column_families import as_dict as as_dict
from .column_families import conversation_columns as conversation_columns
from .column_families import conversation_latency as conversation_latency
from .column_families import custom_columns as custom_columns
from .column_families import custom_means as custom_means
from .column_families import custom_metrics as custom_metrics
from .column_families import dimension_columns as dimension_columns
from .column_families import dimension_means as dimension_means
from .column_families import has_conversations as has_conversations
from .column_families import has_judges as has_judges
from .column_families import judged_dimensions as judged_dimensions
from .stats import summarize_repeats
from .stats.agreement import judge_entries

if TYPE_CHECKING:
    import pandas as pd

#: The record's token counts that aggregate rows sum (``<field>_total``, over what was paid
#: for) and average (``<field>_mean``, over answers): the one list of token columns. Reasoning
#: and cached input tokens are parts of the output and input tokens, not added to them; a model
#: that reports none has them empty, not 0.
TOKEN_FIELDS: tuple[str, ...] = (
    "input_tokens",
    "output_tokens",
    "reasoning_tokens",
    "cached_input_tokens",
)
TOKEN_TOTALS: tuple[str, ...] = tuple(f"{field}_total" for field in TOKEN_FIELDS)
TOKEN_MEANS: tuple[str, ...] = tuple(f"{field}_mean" for field in TOKEN_FIELDS)

#: Metric columns of every aggregate row, in order, after the group key columns.
METRIC_COLUMNS: tuple[str, ...] = (
    "n_items",
    "n_cases",
    "n_repeats",
    "n_passed",
    "n_failed",
    "n_errors",
    "n_skipped",
    "n_stopped_early",
    # Items whose verdict a person's label decided (``verdict_source: human``).
    "human_verdicts",
    "error_rate",
    "pass_rate",
    # Answered / items run, and whether too many errored for the row's numbers to compare.
    "coverage",
    "incomplete",
    # Multiple choice: answered items with a choice, and the share of them chosen right.
    "mc_n",
    "mc_accuracy",
    "score_mean",
    "score_std",
    *TOKEN_TOTALS,
    *TOKEN_MEANS,
    "cost_usd_total",
    "cost_usd_mean",
    "latency_s_mean",
    "latency_s_p50",
    "latency_s_p95",
    "ttft_s_mean",
    "ttft_s_p50",
    "ttft_s_p95",
    "ttft_n",
    "tokens_per_s_mean",
    "tool_call_count_total",
    "transport_retries_total",
    "rate_limit_wait_s_total",
    "n_cached",
    # Answers through a batch API: their timings are not in the latency and TTFT columns.
    "batched_items",
    "judge_cost_usd_total",
    "judge_tokens_total",
    "judge_errors",
    # Repeat-aware statistics (see pytest_llmbench.results.stats): 95% CIs clustered by case.
    "score_ci_low",
    "score_ci_high",
    "pass_rate_ci_low",
    "pass_rate_ci_high",
    "n_flaky",
    "pass_at_k",
    "pass_hat_k",
    "k",
)

# Counts stay integers (nullable, so a missing total is empty in the CSV rather than "0.0").
_INT_COLUMNS: tuple[str, ...] = (
    "n_items",
    "n_cases",
    "n_repeats",
    "n_passed",
    "n_failed",
    "n_errors",
    "n_skipped",
    "n_stopped_early",
    "human_verdicts",
    *TOKEN_TOTALS,
    "ttft_n",
    "tool_call_count_total",
    "transport_retries_total",
    "n_cached",
    "batched_items",
    "judge_tokens_total",
    "judge_errors",
    "n_flaky",
    "k",
    "mc_n",
)
_OUTCOME_COUNTS: tuple[tuple[str, str], ...] = (
    ("n_passed", "passed"),
    ("n_failed", "failed"),
    ("n_errors", "error"),
    ("n_skipped", "skipped"),
)
#: Columns of the records frame with each item's outcome and score as the rates count them.
GRADED_OUTCOME, GRADED_SCORE = "graded_outcome", "graded_score"
#: A row whose error rate is above this is ``incomplete``: its rates rest on too few answers.
INCOMPLETE_ERROR_RATE = 0.10


def grade_errors(frame: pd.DataFrame, errors_count_as: str) -> None:
    """Add the :data:`GRADED_OUTCOME` and :data:`GRADED_SCORE` columns to a records frame.

    ``fail``: an errored item is a failure scored 0 (a latency-only record keeps no score).
    ``skip``: graded columns equal ``outcome`` and ``score``, so errors stay out of the rates.
    """
    errored = frame["outcome"] == "error"
    outcome, score = frame["outcome"].copy(), frame["score"].copy()
    if errors_count_as == "fail":
        outcome[errored] = "failed"
        scored = errored & (frame["eval_type"] != "latency")  # NaN: a quality record
        score[scored] = 0.0
    frame[GRADED_OUTCOME], frame[GRADED_SCORE] = outcome, score


def aggregate(frame: pd.DataFrame, by: Sequence[str]) -> pd.DataFrame:
    """Return the metrics per group of ``by``, key columns first, rows sorted by key.

    The metrics are :data:`METRIC_COLUMNS`, then ``dim_<key>_mean`` for each dimension judged
    in ``frame`` (see :func:`judged_dimensions`), then ``metric_<name>_mean`` for each named
    metric of the records (``post_process``, ``record_score(name=...)``: :func:`custom_metrics`),
    then the :data:`CONVERSATION_COLUMNS` when ``frame`` has conversations.
    """
    keys, dimensions, custom = list(by), judged_dimensions(frame), custom_metrics(frame)
    talks = has_conversations(frame)
    rows = [
        {**dict(zip(keys, key, strict=False)), **metrics(group, dimensions, custom, talks)}
        for key, group in frame.groupby(keys, sort=True, dropna=False)
    ]
    return metrics_frame(rows, keys, dimensions, custom, talks)


def metrics(
    group: pd.DataFrame,
    dimensions: Sequence[str],
    custom: Sequence[str] = (),
    conversations: bool = False,
) -> dict[str, Any]:
    """Return the value of every metric column for one group of records (and the
    :data:`CONVERSATION_COLUMNS` when ``conversations``)."""
    outcomes = group["outcome"].value_counts()
    counts = {column: int(outcomes.get(outcome, 0)) for column, outcome in _OUTCOME_COUNTS}
    spent = group[group["outcome"] != "skipped"]
    # What was paid for: items run, and answered items skipped for having nothing to check.
    unchecked = (group["outcome"] == "skipped") & (group["error_kind"] == "unchecked")
    paid = group[(group["outcome"] != "skipped") | unchecked]
    answered = group[group["outcome"].isin(ANSWERED)]
    graded = group[group[GRADED_OUTCOME].isin(ANSWERED)]
    repeats = group["repeat"].max()
    error_rate = _ratio(counts["n_errors"], len(spent))
    return {
        "n_items": len(group),
        "n_cases": len(group[["suite", "case_id"]].drop_duplicates()),
        "n_repeats": None if math.isnan(repeats) else int(repeats) + 1,
        **counts,
        "n_stopped_early": _stopped_early(group),
        "human_verdicts": _human_verdicts(group),
        "error_rate": error_rate,
        "pass_rate": _ratio(int((graded[GRADED_OUTCOME] == "passed").sum()), len(graded)),
        "coverage": _ratio(len(answered), len(spent)),
        "incomplete": bool(error_rate > INCOMPLETE_ERROR_RATE),
        "score_mean": graded[GRADED_SCORE].mean(),
        "score_std": graded[GRADED_SCORE].std(),
        **_usage(paid, answered),
        **_timing(answered),
        **judge_usage(paid),
        **_repeat_stats(group),
        **_choice_stats(answered),
        **dimension_means(answered, dimensions),
        **custom_means(answered, custom),
        **(conversation_latency(answered) if conversations else {}),
    }


def _stopped_early(group: pd.DataFrame) -> int:
    """The repeats ``--stop-early`` skipped (among ``n_skipped``)."""
    if "stopped_early" not in group:
        return 0
    return int((group["stopped_early"] == True).sum())  # noqa: E712  (None in old records)


def _human_verdicts(group: pd.DataFrame) -> int:
    """The items whose verdict a person's label decided."""
    if "verdict_source" not in group:
        return 0
    return int((group["verdict_source"] == "human").sum())


def _choice_stats(answered: pd.DataFrame) -> dict[str, Any]:
    """``mc_n`` and ``mc_accuracy`` over the answered multiple-choice items."""
    choices = [as_dict(value) for value in answered["choice"]] if "choice" in answered else []
    correct = [bool(choice.get("correct")) for choice in choices if choice]
    return {"mc_n": len(correct), "mc_accuracy": _ratio(sum(correct), len(correct))}


_CASE_FIELDS = ["model", "suite", "case_id", GRADED_OUTCOME, GRADED_SCORE]
_CASE_KEYS = ["model", "suite", "case_id", "outcome", "score"]


def _repeat_stats(group: pd.DataFrame) -> dict[str, Any]:
    """Clustered CIs of the score and pass rate, flaky cases, pass@k and pass^k (graded)."""
    columns = [group[name].tolist() for name in _CASE_FIELDS]
    records = [dict(zip(_CASE_KEYS, values, strict=True)) for values in zip(*columns, strict=True)]
    summary = summarize_repeats(records)
    score, passing, at_k = summary.score, summary.pass_rate, summary.at_k
    return {
        "score_ci_low": math.nan if score is None else score.low,
        "score_ci_high": math.nan if score is None else score.high,
        "pass_rate_ci_low": math.nan if passing is None else passing.low,
        "pass_rate_ci_high": math.nan if passing is None else passing.high,
        "n_flaky": summary.n_flaky,
        "pass_at_k": math.nan if at_k is None else at_k.pass_at_k,
        "pass_hat_k": math.nan if at_k is None else at_k.pass_hat_k,
        "k": None if at_k is None else at_k.k,
    }


def _usage(spent: pd.DataFrame, answered: pd.DataFrame) -> dict[str, Any]:
    """Totals over every non-skipped item (errors spent them too) and the earlier attempts of
    rerun items (``attempts``: pytest-rerunfailures paid for those calls too); means over
    answers."""
    totals = {
        f"{field}_total": _plus(_int_total(spent[field]), spent, field) for field in TOKEN_FIELDS
    }
    means = {f"{field}_mean": answered[field].mean() for field in TOKEN_FIELDS}
    return {
        **totals,
        **means,
        "cost_usd_total": _plus(spent["cost_usd"].sum(min_count=1), spent, "cost_usd"),
        "cost_usd_mean": answered["cost_usd"].mean(),
        "tool_call_count_total": int(spent["tool_call_count"].sum()),
        "transport_retries_total": int(spent["transport_retries"].sum()),
        "rate_limit_wait_s_total": float(spent["rate_limit_wait_s"].sum()),
        "n_cached": int(spent["cached"].fillna(False).astype(bool).sum()),
        "batched_items": int(spent["batched"].isin([True]).sum()),  # NaN: an older record
    }


def _plus(total: Any, spent: pd.DataFrame, field: str) -> Any:
    """``total`` plus what the earlier attempts of ``spent``'s items spent on ``field``."""
    earlier: list[float] = [
        float(attempt[field])
        for attempts in spent.get("attempts", ())
        if isinstance(attempts, list)
        for attempt in attempts
        if isinstance(attempt, dict) and attempt.get(field) is not None
    ]
    if not earlier:
        return total
    return (0 if is_missing(total) else total) + math.fsum(earlier)


def _timing(answered: pd.DataFrame) -> dict[str, Any]:
    latency, ttft = answered["latency_s"], answered["ttft_s"]
    return {
        "latency_s_mean": latency.mean(),
        "latency_s_p50": latency.quantile(0.5),
        "latency_s_p95": latency.quantile(0.95),
        "ttft_s_mean": ttft.mean(),
        "ttft_s_p50": ttft.quantile(0.5),
        "ttft_s_p95": ttft.quantile(0.95),
        "ttft_n": int(ttft.count()),
        "tokens_per_s_mean": answered["tokens_per_s"].mean(),
    }


def judge_usage(spent: pd.DataFrame) -> dict[str, Any]:
    """Judge spending of the non-skipped items: cost (None if unknown), tokens, failed judges."""
    return {
        "judge_cost_usd_total": spent["judge_cost_usd"].sum(min_count=1),
        "judge_tokens_total": int(spent["judge_tokens"].sum()),
        "judge_errors": sum(
            1
            for entries in spent["judges"]
            for entry in judge_entries(entries)
            if entry.get("error")
        ),
    }


def _ratio(part: int, whole: int) -> float:
    return part / whole if whole else math.nan


def _int_total(values: pd.Series) -> int | None:
    """Sum of the known values, or None when no item has one (unknown is not zero)."""
    known = values.dropna()
    return int(known.sum()) if len(known) else None


def metrics_frame(
    rows: list[dict[str, Any]],
    keys: list[str],
    dimensions: Sequence[str],
    custom: Sequence[str] = (),
    conversations: bool = False,
) -> pd.DataFrame:
    """The aggregate rows as a frame: ``keys``, then the metric columns, with their dtypes."""
    import pandas as pd

    columns = [
        *METRIC_COLUMNS,
        *dimension_columns(dimensions),
        *custom_columns(custom),
        *conversation_columns(conversations),
    ]
    frame = pd.DataFrame(rows, columns=[*keys, *columns])
    dtypes = {name: _dtype(name) for name in columns}
    return frame.astype(dtypes)


def _dtype(column: str) -> str:
    if column == "incomplete":
        return "boolean"
    return "Int64" if column in _INT_COLUMNS else "float64"


def is_missing(value: Any) -> bool:
    """None, NaN or pandas' NA: a cell without a value."""
    if value is None:
        return True
    try:
        return bool(value != value)  # NaN and pandas' NA are not equal to themselves
    except TypeError:  # pandas.NA refuses bool()
        return True
