"""Boards grouped by one axis of the experiment matrix, and their ranking.

:func:`grouped` aggregates the records per value of an axis (:data:`GROUP_AXES` or
``tag:<name>``) and ranks the rows like the leaderboard (:func:`ranked`);
:func:`varied_axes` says which axes are worth a ``by_<axis>.csv`` (:func:`grouped_file_name`).
A latency-only run (every record ``eval_type == "latency"``) has no scores: its boards rank by
latency p50, fastest first (:func:`is_latency_only`).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from ..results_folder import grouped_csv_name
from .aggregation import aggregate, as_dict, is_missing

if TYPE_CHECKING:
    import pandas as pd

#: The axes :func:`grouped` groups by; ``tag:<name>`` reads ``model_tags[<name>]``.
GROUP_AXES: tuple[str, ...] = ("model", "profile", "prompt_variant", "temperature", "eval_type")
_TAG_AXIS = "tag:"
#: The key of records that lack the axis value (older runs, items without the variant).
NO_VALUE = "(none)"


def axis_column(axis: str) -> str:
    """The key column of ``axis`` in :func:`grouped`: the axis, or ``tag_<name>``.

    Raises :class:`ValueError` for an unknown axis, listing the known ones.
    """
    if axis in GROUP_AXES:
        return axis
    name = axis[len(_TAG_AXIS) :] if axis.startswith(_TAG_AXIS) else ""
    if not name.strip():
        known = ", ".join([*GROUP_AXES, "tag:<name>"])
        raise ValueError(f"unknown group axis {axis!r}; known: {known}")
    return f"tag_{name}"


def axis_values(frame: pd.DataFrame, axis: str) -> list[str]:
    """The value of ``axis`` for each row of ``frame``, as text; :data:`NO_VALUE` if missing."""
    axis_column(axis)  # validates
    if axis.startswith(_TAG_AXIS):
        name = axis[len(_TAG_AXIS) :]
        column = frame["model_tags"] if "model_tags" in frame else [None] * len(frame)
        return [_axis_text(as_dict(tags).get(name)) for tags in column]
    values = frame[axis] if axis in frame else [None] * len(frame)
    texts = [_axis_text(value) for value in values]
    if axis == "eval_type":  # records from before eval types were all quality evals
        return ["quality" if text == NO_VALUE else text for text in texts]
    return texts


def _axis_text(value: Any) -> str:
    if is_missing(value) or value == "":
        return NO_VALUE
    if isinstance(value, float):
        return f"{value:g}"  # temperatures: 0.2, not 0.20000000000000001
    return str(value)


def grouped(frame: pd.DataFrame, axis: str) -> pd.DataFrame:
    """Return one row per value of ``axis``, ranked like :func:`leaderboard`.

    ``axis`` is one of :data:`GROUP_AXES` or ``tag:<name>``; the key column is named by
    :func:`axis_column`, its values are text (:data:`NO_VALUE` when a record lacks one). The
    metric columns are those of :func:`aggregate`; a ``rank`` column comes first. Raises
    :class:`ValueError` for an unknown axis.
    """
    column = axis_column(axis)
    keyed = frame.assign(**{column: axis_values(frame, axis)})
    board = aggregate(keyed, [column])
    return ranked(board, column, is_latency_only(frame), agent=has_agent_runs(frame))


def is_latency_only(frame: pd.DataFrame) -> bool:
    """Whether every record is a latency measurement (``--latency-only``): no scores to rank."""
    if frame.empty or "eval_type" not in frame:
        return False
    return bool((frame["eval_type"] == "latency").all())


def has_agent_runs(frame: pd.DataFrame) -> bool:
    """Whether some record is an agent's run (its ``agent_steps`` set): such a run's boards
    put pass^k first (:func:`ranked`)."""
    return "agent_steps" in frame and bool(frame["agent_steps"].notna().any())


def ranked(board: pd.DataFrame, key: str, latency: bool, agent: bool = False) -> pd.DataFrame:
    """Sort ``board`` best first and put a 1-based ``rank`` column in front.

    Quality: score_mean desc, pass_rate desc, cost_usd_total asc, key. A run with agent items
    (``agent``): pass_hat_k desc (an agent is as good as it is reliable: tau-bench's pass^k),
    then pass_rate desc, score_mean desc, cost, key, with :data:`AGENT_FIRST` moved before
    pass_rate. Latency runs: latency_s_p50 asc, cost_usd_total asc, key. NaN sorts last.
    """
    agent = agent and not latency
    if latency:
        order, ascending = ["latency_s_p50", "cost_usd_total", key], [True, True, True]
    elif agent:
        order = ["pass_hat_k", "pass_rate", "score_mean", "cost_usd_total", key]
        ascending = [False, False, False, True, True]
    else:
        order = ["score_mean", "pass_rate", "cost_usd_total", key]
        ascending = [False, False, True, True]
    board = board.sort_values(order, ascending=ascending, na_position="last", kind="stable")
    board = board.reset_index(drop=True)
    if agent:
        board = board[agent_columns(list(board.columns))]
    board.insert(0, "rank", range(1, len(board) + 1))
    board.attrs[LATENCY_ONLY] = latency  # format_leaderboard reads it
    board.attrs[AGENT_BOARD] = agent  # so do format_leaderboard and the report's table
    return board


def agent_columns(columns: list[str]) -> list[str]:
    """``columns`` with :data:`AGENT_FIRST` moved before ``pass_rate`` (the first quality
    column); as they are when either is missing."""
    if "pass_rate" not in columns or not set(AGENT_FIRST) <= set(columns):
        return columns
    rest = [column for column in columns if column not in AGENT_FIRST]
    at = rest.index("pass_rate")
    return [*rest[:at], *AGENT_FIRST, *rest[at:]]


#: Axes of the experiment matrix a user varies on purpose: a table for them is always written.
REQUESTED_AXES = frozenset({"prompt_variant", "temperature"})

#: Key of a board's ``attrs`` that tells a latency-only board (see :func:`format_leaderboard`).
LATENCY_ONLY = "llmbench_latency_only"
#: Key of a board's ``attrs`` that tells a board of a run with agent items: ranked by pass^k.
AGENT_BOARD = "llmbench_agent_board"
#: The columns an agent board shows first among its quality columns.
AGENT_FIRST: tuple[str, ...] = ("pass_hat_k", "k")


def varied_axes(frame: pd.DataFrame) -> list[str]:
    """The axes besides ``model`` worth a :func:`grouped` table of their own, in order.

    :data:`GROUP_AXES` first, then ``tag:<name>`` for each name in ``model_tags``, sorted; an
    axis counts when it has at least 2 distinct values and does not merely rename the models
    (one value per model and one model per value, as ``profile`` in a run without prompt or
    temperature variants): that table would be the leaderboard again. The axes a run varies
    on purpose (:data:`REQUESTED_AXES`) count whenever one profile ran under several of their
    values: one model under ``--temperature-variations`` still gets its ``by_temperature.csv``.
    For those, a missing value (:data:`NO_VALUE`: a plain test that sent no temperature) is no
    value the run varied to: temperature 0 beside "(none)" is no temperature axis.
    """
    tags = sorted({name for value in frame.get("model_tags", ()) for name in as_dict(value)})
    axes = [axis for axis in GROUP_AXES if axis != "model"] + [f"tag:{name}" for name in tags]
    models = [str(model) for model in frame["model"]]
    found = []
    for axis in axes:
        values = axis_values(frame, axis)
        pairs = set(zip(models, values, strict=True))
        renames = len(pairs) == len(set(models)) == len(set(values))
        requested = axis in REQUESTED_AXES and _varied_per_profile(frame, values)
        # For the requested axes, a missing value is no value the run varied to.
        known = set(values) - ({NO_VALUE} if axis in REQUESTED_AXES else set())
        if len(known) >= 2 and (not renames or requested):
            found.append(axis)
    return found


def _varied_per_profile(frame: pd.DataFrame, values: list[str]) -> bool:
    """Whether one profile (one underlying model) ran under several of ``values``: a prompt or
    temperature axis the run varied on purpose, even when each contestant holds one value."""
    if "profile" not in frame.columns:
        return False
    per_profile: dict[str, set[str]] = {}
    for profile, value in zip(frame["profile"].astype(str), values, strict=True):
        if value != NO_VALUE:
            per_profile.setdefault(profile, set()).add(value)
    return any(len(seen) >= 2 for seen in per_profile.values())


def model_dir_name(model: str) -> str:
    """Return a safe, non-empty directory name for ``model`` (``openai/x`` -> ``openai-x``)."""
    name = re.sub(r"[^A-Za-z0-9._-]", "-", model)
    name = re.sub(r"-{2,}", "-", name).strip("-.")
    return name or "model"


def grouped_file_name(axis: str) -> str:
    """``by_<axis>.csv``; ``by_tag_<name>.csv`` for a tag (its name made safe for a file)."""
    return grouped_csv_name(model_dir_name(axis_column(axis)))
