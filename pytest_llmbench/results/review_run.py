"""People's labels during a run: read once at configure, applied to each item's report.

The controller finds the labels files of the run (its results folder's ``reviews.jsonl``, which
``--retry-errors DIR`` and a reused ``--results-dir`` may hold, then ``--reviews-dir``'s) and
hands their paths to the xdist workers, which read the same files: every process applies the
same labels. A broken file is a usage error naming ``path:line``. ``--ignore-reviews`` reads
none.

When a label holds for an item's answer (:mod:`.effective`), its record gets the effective
verdict and the ``TestReport`` follows it: a failure a person passed passes, a pass a person
failed fails (``failed by a person's label (reviewer: comment)``), so the terminal, the exit
status, JUnit XML and ``--lf`` see the person's verdict.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from .effective import HUMAN, RunLabels, effective_record, labels_for_run
from .reviews import ReviewsError

#: The run's labels, on every process that read them.
LABELS_KEY = pytest.StashKey[RunLabels]()
#: The xdist worker input naming the labels files the controller found.
FILES_INPUT = "llmbench_review_files"
#: The flag telling the workers that ``--ignore-reviews`` holds.
IGNORED_INPUT = "llmbench_reviews_ignored"


def load_run_labels(config: pytest.Config, folder: Path | None, reviews_dir: Path | None,
                    ignore: bool) -> RunLabels:  # fmt: skip
    """Read the run's labels once (the controller: from ``folder`` and ``reviews_dir``; a
    worker: the files the controller named) and keep them on ``config``."""
    workerinput = getattr(config, "workerinput", None)
    try:
        if workerinput is not None and FILES_INPUT in workerinput:
            files = [Path(path) for path in workerinput[FILES_INPUT]]
            ignored = bool(workerinput.get(IGNORED_INPUT))
            labels = labels_for_run([], None, ignored)
            if not ignored:
                from .reviews import load_labels

                labels = RunLabels(load_labels(files), tuple(map(str, files)), False)
        else:
            labels = labels_for_run([folder], reviews_dir, ignore)
    except ReviewsError as exc:
        raise pytest.UsageError(f"llmbench: people's labels: {exc}") from None
    config.stash[LABELS_KEY] = labels
    return labels


def labels_worker_input(config: pytest.Config) -> dict[str, Any]:
    """What a worker needs to read the same labels as the controller."""
    labels = config.stash.get(LABELS_KEY, None)
    if labels is None:
        return {}
    return {FILES_INPUT: list(labels.files), IGNORED_INPUT: labels.ignored}


def apply_labels(
    config: pytest.Config, record: dict[str, Any], report: pytest.TestReport
) -> dict[str, Any]:
    """``record`` with the run's labels applied, and ``report`` following its verdict."""
    labels = config.stash.get(LABELS_KEY, None)
    if labels is None or not len(labels.labels):
        return record
    effective = effective_record(record, labels.labels)
    if effective.get("verdict_source") != HUMAN:
        return record
    outcome = effective["outcome"]
    if outcome != report.outcome and outcome in ("passed", "failed"):
        report.outcome = outcome
        if outcome == "passed":
            report.longrepr = None
        else:
            report.longrepr = person_failure(effective)
            # A verdict, not a crash: counted as a failed eval, not another failure.
            report.llmbench_score_failure = True  # type: ignore[attr-defined]
    return effective


def person_failure(record: dict[str, Any]) -> str:
    """The failure text of an item a person failed."""
    review = record.get("review") or {}
    who = review.get("reviewer") or "reviewer unnamed"
    comment = review.get("comment") or "no comment"
    where = f" on assertion {review['assertion']}" if review.get("assertion") is not None else ""
    machine = record.get("machine_outcome")
    return (
        f"{record.get('nodeid')}: failed by a person's label{where} ({who}: {comment}); "
        f"the machine's verdict: {machine}"
    )
