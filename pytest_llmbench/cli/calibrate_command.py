"""``llmbench calibrate RUN_DIR...``: each judge group against people's labels (Cohen's kappa, true
and false positive rates, the confusion matrix, the judge's leaning, each with n and a 95% CI).

The labels are those of the runs' folders (``reviews.jsonl``) and of ``--reviews-dir``, the later
line winning. Each label keeps the machine verdict it was given beside; one that keeps none (an
import without a run) takes it from the runs' record of the same key and answer (or node id),
and the command says how many found none.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..results import (
    GROUP_PARTS,
    MIN_LABELS,
    RecordIndex,
    calibrate,
    calibration_rows,
    load_results,
    pair_with_records,
    read_labels,
    regroup,
    review_paths,
)
from ..results_folder import REVIEWS_FILE
from ..spec import UsageFailure
from .output import emit

#: ``llmbench calibrate --format``.
CALIBRATE_FORMATS = ("table", "csv", "json")


def add_calibrate_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    calibrate_parser = commands.add_parser(
        "calibrate", help="Judges against people's labels: kappa, rates, confusion matrix"
    )
    calibrate_parser.add_argument("runs", type=Path, nargs="+", metavar="RUN_DIR",
                                  help="Results folders (their labels, and their records)")  # fmt: skip
    calibrate_parser.add_argument("--reviews-dir", type=Path, metavar="DIR",
                                  help=f"A shared folder of labels (its {REVIEWS_FILE}), read after the runs'")  # fmt: skip
    calibrate_parser.add_argument("--format", choices=CALIBRATE_FORMATS, default="table",
                                  help="table (the default), csv or json")  # fmt: skip
    calibrate_parser.add_argument("--output", "-o", type=Path, metavar="FILE",
                                  help="Write here, not to stdout")  # fmt: skip
    calibrate_parser.add_argument(
        "--by", default=",".join(GROUP_PARTS), metavar="PARTS",
        help="What a row is: a comma-separated subset of judge,type,criterion "
        "(default: all three; 'judge' pools a judge's rubrics)",
    )  # fmt: skip
    calibrate_parser.add_argument("--min-labels", type=int, default=MIN_LABELS, metavar="N",
                                  help=f"Fewer paired labels say 'too few labels' (default {MIN_LABELS})")  # fmt: skip
    calibrate_parser.set_defaults(command=_calibrate_command)


def _calibrate_command(args: argparse.Namespace) -> int:
    by = [part.strip() for part in str(args.by).split(",") if part.strip()]
    unknown = [part for part in by if part not in GROUP_PARTS]
    if unknown or not by:
        raise UsageFailure(f"--by {args.by!r}: give some of {', '.join(GROUP_PARTS)}")
    if args.min_labels < 1:
        raise UsageFailure(f"--min-labels {args.min_labels}: give a whole number >= 1")
    runs = [(str(run), load_results(run)) for run in args.runs]
    read = read_labels(args.runs, args.reviews_dir, False)
    labels = read.labels
    if not len(labels):
        paths = [
            *(review_paths(run, None) for run in args.runs),
            review_paths(None, args.reviews_dir),
        ]
        raise UsageFailure(f"no labels in {', '.join(str(p) for ps in paths for p in ps)}")
    reviews, unpaired = pair_with_records(labels.current.values(), RecordIndex.of(runs))
    rows = calibration_rows(calibrate(regroup(reviews, by)).values(), args.min_labels)
    unjudged = len(reviews) - unpaired - sum(int(r["n"]) + int(r["unsure"]) for r in rows)
    notes = _notes(len(reviews), unpaired, unjudged)
    for note in notes:
        print(f"llmbench: {note}", file=sys.stderr)
    emit(_render(rows, args.format, args.min_labels, notes), args.output)
    return 0


def _notes(labels: int, unpaired: int, unjudged: int) -> list[str]:
    notes = [f"{labels} label(s) in force"]
    if unpaired:
        notes.append(
            f"{unpaired} label(s) keep no machine verdict and match no record of the runs "
            "given (same key and answer, or node id): not calibrated"
        )
    if unjudged:
        notes.append(
            f"{unjudged} label(s) are on verdicts no single judged assertion decided "
            "(a plain check, or an item with several checks): not calibrated"
        )
    return notes


def _render(rows: Sequence[Mapping[str, Any]], fmt: str, min_labels: int, notes: list[str]) -> str:
    if fmt == "json":
        data = {"min_labels": min_labels, "notes": notes, "groups": list(rows)}
        return json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    if fmt == "csv":
        out = io.StringIO()
        if rows:
            writer = csv.DictWriter(out, fieldnames=list(rows[0]), lineterminator="\n")
            writer.writeheader()
            writer.writerows({k: "" if v is None else v for k, v in r.items()} for r in rows)
        return out.getvalue()
    return calibration_table(rows, min_labels)


def calibration_table(rows: Sequence[Mapping[str, Any]], min_labels: int) -> str:
    """The terminal's table: one line per judge group."""
    if not rows:
        return "no label is on a judged verdict: nothing to calibrate\n"
    head = ("judge group", "n", "kappa [95% CI]", "TPR [95% CI]", "FPR [95% CI]",
            "tp", "fp", "fn", "tn", "leaning", "unsure", "note")  # fmt: skip
    lines = [
        (
            _group(row),
            str(row["n"]),
            _figure(row, "kappa", signed=True),
            _figure(row, "tpr"),
            _figure(row, "fpr"),
            *(str(row[cell]) for cell in ("tp", "fp", "fn", "tn")),
            str(row["leaning"]),
            str(row["unsure"]),
            f"too few labels (< {min_labels})" if row["note"] else "",
        )
        for row in rows
    ]
    widths = [max(len(line[i]) for line in [head, *lines]) for i in range(len(head))]
    text = [
        "  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip()
        for line in [head, *lines]
    ]
    return "\n".join(text) + "\n"


def _group(row: Mapping[str, Any]) -> str:
    criterion = row.get("criterion")
    who = f"{row['judges']} {row['type']}"
    if not criterion:
        return who
    words = " ".join(str(criterion).split())
    return f'{who} "{words if len(words) <= 40 else words[:39] + "…"}"'


def _figure(row: Mapping[str, Any], name: str, signed: bool = False) -> str:
    value, low, high = row.get(name), row.get(f"{name}_low"), row.get(f"{name}_high")
    if value is None:
        return "-"
    shape = "{:+.2f}" if signed else "{:.2f}"
    if low is None or high is None:
        return shape.format(value)
    return f"{shape.format(value)} [{shape.format(low)}, {shape.format(high)}]"
