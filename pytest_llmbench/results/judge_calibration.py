"""The judges of a run against people: ``judge_calibration.csv`` at the end of a run, and the
rows the report's "Judges against people" section and ``llmbench calibrate`` show.

The labels are those that apply to the run (its folder's ``reviews.jsonl`` and ``--reviews-dir``'s,
none under ``--ignore-reviews``), calibrated per judge group from their machine snapshots
(:func:`~pytest_llmbench.results.stats.calibration.calibrate`); a label without one takes it
from this run's record of the same answer. A run shows the groups its own judged assertions
belong to: labels of judges it did not use are left to ``llmbench calibrate``.
"""

from __future__ import annotations

import csv
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..results_folder import JUDGE_CALIBRATION_FILE, ResultsFolder
from .effective import machine_record
from .review_io import RecordIndex, pair_with_records
from .reviews import Labels, MachineVerdict, Review, machine_verdict
from .stats.calibration import Calibration, JudgeGroup, calibrate, calibration_row

#: Fewer paired labels than this and a group's figures say "too few labels".
MIN_LABELS = 50
#: What ``--by`` may group on (the default: all three).
GROUP_PARTS = ("judge", "type", "criterion")


def run_groups(records: Iterable[Mapping[str, Any]]) -> set[JudgeGroup]:
    """The judge groups of ``records``' judged assertions."""
    groups = set()
    for record in records:
        machine = machine_record(record)
        for i in range(len(record.get("assertions") or [])):
            verdict = machine_verdict(machine, i)
            if verdict.judges and verdict.type is not None:
                groups.add(JudgeGroup(verdict.judges, verdict.type, verdict.criterion))
    return groups


def labelled_reviews(
    labels: Labels, runs: Sequence[tuple[str, Sequence[Mapping[str, Any]]]]
) -> list[Review]:
    """The labels in force as calibration counts them, each with its machine verdict: one
    that keeps none (imported without one) takes it from its record in ``runs`` (name,
    records), else calibrates nothing. The judge gate and ``judge_calibration.csv`` pair
    labels through it (``llmbench calibrate`` through the same ``pair_with_records``)."""
    reviews, _ = pair_with_records(labels.current.values(), RecordIndex.of(runs))
    return reviews


def regroup(reviews: Iterable[Review], by: Sequence[str]) -> list[Review]:
    """``reviews`` with their snapshots coarsened to the parts in ``by`` (the others read
    ``*``, or no criterion), so that :func:`calibrate` pools them."""
    if set(by) >= set(GROUP_PARTS):
        return list(reviews)
    coarse = []
    for review in reviews:
        m = review.machine
        if m is not None and m.judges and m.type is not None:
            m = MachineVerdict(
                m.passed,
                m.type if "type" in by else "*",
                m.judges if "judge" in by else ("*",),
                m.criterion if "criterion" in by else None,
            )
        coarse.append(replace(review, machine=m))
    return coarse


def calibration_rows(
    calibrations: Iterable[Calibration], min_labels: int = MIN_LABELS
) -> list[dict[str, Any]]:
    """Each calibration as a flat row, with ``note``: "too few labels" under ``min_labels``."""
    return [
        {**calibration_row(c), "note": "too few labels" if c.n < min_labels else ""}
        for c in calibrations
    ]


def run_calibration(
    records: Sequence[Mapping[str, Any]], labels: Labels, *, min_labels: int = MIN_LABELS
) -> list[dict[str, Any]]:
    """The rows of the run's judge groups that people labelled in ``labels`` (the labels the
    run read at configure); empty without such labels."""
    if not len(labels):
        return []
    groups = run_groups(records)
    found = calibrate(labelled_reviews(labels, [("", records)]))
    return calibration_rows([c for g, c in found.items() if g in groups], min_labels)


def write_calibration(rows: Sequence[Mapping[str, Any]], out_dir: Path) -> Path | None:
    """``judge_calibration.csv`` of ``rows``; none (None) without rows, and an earlier run's
    in a reused folder is removed, so the file always describes this run."""
    path = ResultsFolder(out_dir).file(JUDGE_CALIBRATION_FILE)
    if not rows:
        path.unlink(missing_ok=True)
        return None
    with path.open("w", encoding="utf-8", newline="") as stream:
        writer = csv.DictWriter(stream, fieldnames=list(rows[0]), lineterminator="\n")
        writer.writeheader()
        for row in rows:
            writer.writerow({k: "" if v is None else v for k, v in row.items()})
    return path
