"""The comparison of reasoning efforts: one row per model and effort (``by_effort.csv``).

A run with the effort axis (an eval file's ``effort:`` or ``--efforts``) has contestants
``model@low``, ``model@high``: :func:`effort_board` puts each model's efforts side by side, the
model being the contestant without its ``@<effort>`` (``gpt-5:concise@high`` is model
``gpt-5:concise``, effort ``high``). Its columns are :data:`EFFORT_COLUMNS`, counted as the
leaderboard counts them (:func:`.aggregation.aggregate`, reasoning tokens included). Rows: by model, then by effort, levels least first, then budgets.

pandas is imported inside the functions: importing this module stays cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .aggregation import aggregate, is_missing

if TYPE_CHECKING:
    import pandas as pd

#: The columns of ``by_effort.csv``, in order.
EFFORT_COLUMNS: tuple[str, ...] = (
    "model",
    "effort",
    "n_items",
    "n_errors",
    "pass_rate",
    "score_mean",
    "output_tokens_mean",
    "reasoning_tokens_mean",
    "output_tokens_total",
    "reasoning_tokens_total",
    "cost_usd_total",
    "cost_usd_mean",
    "latency_s_p50",
    "latency_s_p95",
)


def has_efforts(frame: pd.DataFrame) -> bool:
    """Whether some record of ``frame`` ran under an effort."""
    return "effort" in frame and any(not is_missing(value) for value in frame["effort"])


def effort_board(frame: pd.DataFrame) -> pd.DataFrame | None:
    """One row per model and effort of the records that ran under one (:data:`EFFORT_COLUMNS`);
    None when none did."""
    if not has_efforts(frame):
        return None
    rows = frame[[not is_missing(value) for value in frame["effort"]]]
    efforts = [str(value) for value in rows["effort"]]
    models = [
        str(label).removesuffix(f"@{effort}")
        for label, effort in zip(rows["model"], efforts, strict=True)
    ]
    board = aggregate(rows.assign(model=models, effort=efforts), ["model", "effort"])
    order = sorted(range(len(board)), key=lambda n: _order(board["model"][n], board["effort"][n]))
    return board.iloc[order][list(EFFORT_COLUMNS)].reset_index(drop=True)


def _order(model: Any, effort: str) -> tuple[str, int, int]:
    """Sort key: the model, then the levels least first, then the budgets, smallest first."""
    from ..models import EFFORT_LEVELS

    if effort in EFFORT_LEVELS:
        return str(model), 0, EFFORT_LEVELS.index(effort)
    return str(model), 1, int(effort) if effort.isdigit() else 0
