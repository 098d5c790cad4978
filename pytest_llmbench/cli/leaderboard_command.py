"""``llmbench leaderboard DIR...``: the runs of several results folders as one leaderboard."""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..config import ERRORS_COUNT_AS, OPTIONS
from ..render import board_html, board_markdown
from ..results import load_labelled, model_of, models_of
from ..spec import UsageFailure
from .merge_command import add_review_options
from .output import emit

if TYPE_CHECKING:
    import pandas as pd

FORMATS = ("markdown", "csv", "html")
_CSV_DECIMALS = 6


def add_leaderboard_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    board = commands.add_parser("leaderboard", help="Merge runs into one leaderboard")
    board.add_argument("dirs", nargs="+", type=Path, metavar="DIR", help="Results folders")
    board.add_argument("--format", choices=FORMATS, default="markdown", help="Output format")
    board.add_argument("--output", type=Path, metavar="FILE", help="Write here, not to stdout")
    board.add_argument(
        "--group-by",
        default="model",
        metavar="AXIS",
        help="Rank by model (default), profile, prompt_variant, temperature, eval_type or "
        "tag:<name> (a profile tag such as tag:region)",
    )
    board.add_argument(
        OPTIONS["errors_count_as"].flag,
        choices=ERRORS_COUNT_AS,
        default="fail",
        help="An errored item is a failure scored 0 (fail, the default) or left out (skip)",
    )
    add_review_options(board)
    board.set_defaults(command=_leaderboard_command)


def _leaderboard_command(args: argparse.Namespace) -> int:
    from ..results import axis_column, grouped, leaderboard, records_frame

    try:
        key = axis_column(args.group_by)
    except ValueError as exc:
        raise UsageFailure(f"--group-by: {exc}") from None
    runs = [
        (folder, load_labelled(folder, args.reviews_dir, args.ignore_reviews))
        for folder in args.dirs
    ]
    records = merge_runs(runs)
    if args.group_by.startswith("tag:"):
        _check_tag(args.group_by.removeprefix("tag:"), records)
    frame = records_frame(records, args.errors_count_as)
    board = leaderboard(frame) if key == "model" else grouped(frame, args.group_by)
    emit(_render_board(board, args.format, key), args.output)
    return 0


def _check_tag(tag: str, records: Sequence[Mapping[str, Any]]) -> None:
    """``--group-by tag:<tag>`` names a tag some record's profile carries."""
    tags = {name for record in records for name in (record.get("model_tags") or {})}
    if tag not in tags:
        known = ", ".join(sorted(tags)) or "none"
        raise UsageFailure(f"--group-by: no record has the tag {tag!r} (tags: {known})")


def _render_board(board: pd.DataFrame, fmt: str, key: str) -> str:
    """``board`` in ``fmt``, ``key`` its key column."""
    if fmt == "csv":
        return board_csv(board)
    render = board_markdown if fmt == "markdown" else board_html
    return render(board, key)


def merge_runs(runs: Sequence[tuple[Path, Sequence[Mapping[str, Any]]]]) -> list[dict[str, Any]]:
    """All records of ``runs``; a model found in several runs becomes ``model@<run>`` in each.

    ``<run>`` is the folder's name, or the folder as given when two runs share a name.
    """
    labels = _run_labels([folder for folder, _ in runs])
    seen_in: dict[str, int] = {}
    for _, records in runs:
        for model in models_of(records):
            seen_in[model] = seen_in.get(model, 0) + 1
    merged: list[dict[str, Any]] = []
    for label, (_, records) in zip(labels, runs, strict=True):
        for record in records:
            model = model_of(record)
            merged.append({**record, "model": f"{model}@{label}" if seen_in[model] > 1 else model})
    return merged


def _run_labels(folders: Sequence[Path]) -> list[str]:
    resolved = [folder.resolve() for folder in folders]
    for index, folder in enumerate(resolved):
        if folder in resolved[:index]:
            raise UsageFailure(f"{folders[index]}: results folder given twice")
    names = [folder.name or str(folder) for folder in resolved]
    if len(set(names)) == len(names):
        return names
    return [str(folder) for folder in folders]


def board_csv(board: pd.DataFrame) -> str:
    """The leaderboard as CSV, every column (like ``leaderboard.csv``)."""
    return str(board.round(_CSV_DECIMALS).to_csv(index=False))
