"""``llmbench reviews export|import``: people's labels out to CSV or JSONL, and back in (from an
export, a spreadsheet or another tool), appended to a run's or a shared ``reviews.jsonl``."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..results import (
    REVIEW_FORMATS,
    RecordIndex,
    ReviewsError,
    append_reviews,
    export_text,
    format_of,
    import_reviews,
    load_results,
    read_labels,
    read_rows,
    review_paths,
)
from ..results_folder import REVIEWS_FILE
from ..spec import UsageFailure
from .output import emit


def add_reviews_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    reviews = commands.add_parser("reviews", help="Export or import people's labels (CSV, JSONL)")
    actions = reviews.add_subparsers(title="actions", required=True, metavar="ACTION")
    export = actions.add_parser("export", help="The labels in force, with the machine verdicts")
    export.add_argument("runs", type=Path, nargs="+", metavar="RUN_DIR", help="Results folders")
    export.add_argument("--reviews-dir", type=Path, metavar="DIR",
                        help="A shared folder of labels, read after the runs'")  # fmt: skip
    export.add_argument("--format", choices=REVIEW_FORMATS, required=True)
    export.add_argument("--output", "-o", type=Path, metavar="FILE", help="Not to stdout")
    export.set_defaults(command=_export_command)
    into = actions.add_parser("import", help="Append labels from a CSV or JSONL file")
    into.add_argument("file", type=Path, metavar="FILE", help="CSV or JSONL rows")
    where = into.add_mutually_exclusive_group(required=True)
    where.add_argument("--into", type=Path, metavar="RUN_DIR",
                       help=f"Into this run's {REVIEWS_FILE} (its records fill the rows)")  # fmt: skip
    where.add_argument("--reviews-dir", type=Path, metavar="DIR",
                       help=f"Into this shared folder's {REVIEWS_FILE}")  # fmt: skip
    into.add_argument("--run", type=Path, action="append", default=[], metavar="RUN_DIR",
                      help="A run whose records fill rows that give a node id only (repeatable)")  # fmt: skip
    into.add_argument("--format", choices=REVIEW_FORMATS,
                      help="Default: from the file's extension")  # fmt: skip
    into.set_defaults(command=_import_command)


def _export_command(args: argparse.Namespace) -> int:
    for run in args.runs:
        load_results(run)  # a folder that is no run is told now
    labels = read_labels(args.runs, args.reviews_dir, False).labels
    emit(export_text(labels.current.values(), args.format), args.output)
    return 0


def _import_command(args: argparse.Namespace) -> int:
    runs = [*([args.into] if args.into is not None else []), *args.run]
    index = RecordIndex.of((run.name, load_results(run)) for run in runs)
    if not args.file.is_file():
        raise UsageFailure(f"{args.file}: no such file")
    try:
        rows = read_rows(args.file, format_of(args.file, args.format))
        reviews = import_reviews(rows, index)
    except ReviewsError as exc:
        raise UsageFailure(str(exc)) from None
    target = review_paths(args.into, None) if args.into else review_paths(None, args.reviews_dir)
    try:
        append_reviews(target[0], reviews)
    except ReviewsError as exc:
        raise UsageFailure(f"nothing imported: {exc}") from None
    print(f"llmbench: imported {len(reviews)} label(s) into {target[0]}")
    return 0
