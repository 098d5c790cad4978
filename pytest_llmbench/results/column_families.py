"""The aggregate's column families that depend on the records: ``dim_<key>_mean`` per judged
dimension, ``metric_<name>_mean`` per named metric, and the conversation latency columns.

Each family has its names (found in the answered records), its columns and its values for one
group; :mod:`.aggregation` puts them after :data:`~.aggregation.METRIC_COLUMNS`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .stats.agreement import dimension_order, judge_entries

if TYPE_CHECKING:
    import pandas as pd


#: The columns of a frame with conversations: per-reply and per-conversation latency, and the
#: time to the first token of each streamed reply.
CONVERSATION_COLUMNS: tuple[str, ...] = (
    "turn_latency_s_p50",
    "turn_latency_s_p95",
    "conversation_latency_s_p50",
    "conversation_latency_s_p95",
    "turn_ttft_s_p50",
    "turn_ttft_s_p95",
)
#: Outcomes of the items that answered: the ones means and the pass rate are over.
ANSWERED = ("passed", "failed")


def has_conversations(frame: pd.DataFrame) -> bool:
    """Whether an answered record of ``frame`` is a conversation (has a ``conversation``)."""
    return bool(_conversations(frame[frame["outcome"].isin(ANSWERED)]))


def conversation_columns(conversations: bool) -> list[str]:
    """The :data:`CONVERSATION_COLUMNS` of a frame with conversations, else none."""
    return list(CONVERSATION_COLUMNS) if conversations else []


def _conversations(answered: pd.DataFrame) -> list[list[Any]]:
    if "conversation" not in answered.columns:
        return []
    return [talk for talk in answered["conversation"] if isinstance(talk, list)]


def conversation_latency(answered: pd.DataFrame) -> dict[str, float]:
    """The :data:`CONVERSATION_COLUMNS` of a group: percentiles of each reply's latency and
    TTFT (streamed replies only) and of each conversation's latency (NaN without any)."""
    import pandas as pd

    replies = [
        entry
        for talk in _conversations(answered)
        for entry in talk
        if isinstance(entry, dict) and entry.get("generated") and entry.get("role") == "assistant"
    ]

    def measured(name: str) -> pd.Series:
        values = [entry.get(name) for entry in replies]
        return pd.Series([value for value in values if value is not None], dtype="float64")

    turns, ttfts = measured("latency_s"), measured("ttft_s")
    whole = answered["latency_s"][[isinstance(t, list) for t in answered["conversation"]]]
    return {
        "turn_latency_s_p50": float(turns.quantile(0.5)),
        "turn_latency_s_p95": float(turns.quantile(0.95)),
        "conversation_latency_s_p50": float(whole.quantile(0.5)),
        "conversation_latency_s_p95": float(whole.quantile(0.95)),
        "turn_ttft_s_p50": float(ttfts.quantile(0.5)),
        "turn_ttft_s_p95": float(ttfts.quantile(0.95)),
    }


def custom_metrics(frame: pd.DataFrame) -> list[str]:
    """The names in the ``metrics`` of answered records (an eval's ``post_process``, a plain
    test's ``record_score(value, name=...)``), sorted."""
    if "metrics" not in frame.columns:
        return []
    answered = frame[frame["outcome"].isin(ANSWERED)]
    return sorted({str(name) for values in answered["metrics"] for name in as_dict(values)})


def custom_columns(names: Iterable[str]) -> list[str]:
    """The aggregate column of each named metric: ``metric_<name>_mean``."""
    return [f"metric_{name}_mean" for name in names]


def custom_means(answered: pd.DataFrame, names: Sequence[str]) -> dict[str, float]:
    """``metric_<name>_mean`` of each named metric over the answered items that have it."""
    known: dict[str, list[float]] = {name: [] for name in names}
    for values in answered["metrics"] if "metrics" in answered.columns else ():
        for name, value in as_dict(values).items():
            if name in known and isinstance(value, (int, float)) and math.isfinite(value):
                known[name].append(float(value))
    return {
        column: math.fsum(values) / len(values) if values else math.nan
        for column, values in zip(custom_columns(names), known.values(), strict=True)
    }


def judged_dimensions(frame: pd.DataFrame) -> list[str]:
    """The dimension keys in the ``dimensions`` of answered records, in report order."""
    answered = frame[frame["outcome"].isin(ANSWERED)]
    return dimension_order(key for scores in answered["dimensions"] for key in as_dict(scores))


def dimension_columns(dimensions: Iterable[str]) -> list[str]:
    """The aggregate column of each dimension key: ``dim_<key>_mean``."""
    return [f"dim_{key}_mean" for key in dimensions]


def has_judges(records: Iterable[Mapping[str, Any]]) -> bool:
    """Whether any record has a judge entry (failed judges included)."""
    return any(judge_entries(record.get("judges")) for record in records)


def dimension_means(answered: pd.DataFrame, dimensions: Sequence[str]) -> dict[str, float]:
    """``dim_<key>_mean`` of each dimension over the answered items that have it (NaN if none)."""
    known: dict[str, list[float]] = {key: [] for key in dimensions}
    for scores in answered["dimensions"]:
        for key, value in as_dict(scores).items():
            if key in known and value is not None:
                known[key].append(float(value))
    return {
        column: math.fsum(values) / len(values) if values else math.nan
        for column, values in zip(dimension_columns(dimensions), known.values(), strict=True)
    }


def as_dict(value: Any) -> dict[str, Any]:
    """``value`` when it is a dict, else an empty one."""
    # Older records have no ``dimensions``/``judges``: the frame holds NaN in their place.
    return value if isinstance(value, dict) else {}
