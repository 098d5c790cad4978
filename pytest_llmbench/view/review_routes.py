"""The review requests of `llmbench view`, between the app's routes and the pages: an item page
with its label panel, a label posted, the review queue and the calibration page.

Each returns HTML (and, for a post, where to go next); a broken labels file is shown on the page
(its ``path:line``), never a server error, and a label is not written while it is broken.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..report import text
from ..results import (
    Labels,
    RecordIndex,
    ReviewsError,
    calibrate,
    load_labels,
    pair_with_records,
    review_paths,
)
from . import pages, review_pages
from .review import (
    LabelFormError,
    QueueFilter,
    QueueItem,
    find_record,
    judged_records,
    navigation,
    queue_items,
    run_labels,
    save_label,
)
from .runs import Run, find_runs, load_run

Record = Mapping[str, Any]


def _labels(run: Run, reviews_dir: Path | None) -> tuple[Labels | None, str]:
    try:
        return run_labels(run, reviews_dir), ""
    except ReviewsError as exc:
        return None, str(exc)


def _scope(roots: Sequence[Path], reviews_dir: Path | None, chosen: QueueFilter) -> list[Run]:
    if chosen.run:
        try:
            return [load_run(roots, chosen.run, reviews_dir)]
        except KeyError:
            return []
    return find_runs(roots, reviews_dir)


def _queue(
    roots: Sequence[Path], reviews_dir: Path | None, chosen: QueueFilter
) -> tuple[list[QueueItem], list[tuple[Run, Labels]], str]:
    """Every item the filters keep (labelled ones too), the runs with their labels, and the
    first broken labels file's message (its run then counted as unlabelled)."""
    runs, error = [], ""
    for run in _scope(roots, reviews_dir, chosen):
        labels, broken = _labels(run, reviews_dir)
        error = error or broken
        runs.append((run, labels if labels is not None else Labels({})))
    every = dataclasses.replace(chosen, include_labelled=True)
    return queue_items(runs, every), runs, error


def item_page(
    roots: Sequence[Path],
    reviews_dir: Path | None,
    run: Run,
    record: Record,
    params: Mapping[str, str],
) -> str:
    """An item's page with its review panel; within the queue (``queue=1``), its place in it."""
    chosen = QueueFilter.of(params)
    labels, error = _labels(run, reviews_dir)
    nav: dict[str, str] | None = None
    left = None
    if params.get("queue") == "1":
        items, _, _ = _queue(roots, reviews_dir, chosen)
        following, before, left = navigation(items, chosen, run, record)
        nav = {"queue": pages.link("/review", **chosen.query())}
        if before is not None:
            nav["prev"] = review_pages.item_link(before, chosen)
        if following is not None:
            nav["next"] = review_pages.item_link(following, chosen)
    panel = review_pages.review_panel(
        run, record, labels, error=error, chosen=chosen, nav=nav, left=left
    )
    blind = chosen.blind and not review_pages.is_revealed(record, labels)
    shown = review_pages.blinded(record) if blind else record
    return pages.item_page(run, shown, panel, blind=blind)


def post_label(
    roots: Sequence[Path], reviews_dir: Path | None, run: Run, form: Mapping[str, str]
) -> tuple[str, str, int]:
    """Write the label ``form`` gives: (where to go next, "", 303), or ("", the error page,
    status) when it cannot be written."""
    record = find_record(run, form.get("nodeid", ""))
    if record is None:
        page = pages.layout("Not found", "<p>no such item in this run</p>")
        return "", page, 404
    try:
        save_label(run, reviews_dir, record, form)
    except ReviewsError as exc:
        page = pages.layout("Label not written", review_pages.labels_error(str(exc)))
        return "", page, 409
    except LabelFormError as exc:
        page = pages.layout("Label not written", f'<p class="bad">{text(str(exc))}</p>')
        return "", page, 400
    chosen = QueueFilter.of(form)
    here = pages.link(
        "/run/" + run.key + "/item",
        nodeid=record.get("nodeid"),
        queue=form.get("queue", ""),
        **chosen.query(),
    )
    if form.get("queue") != "1" or chosen.blind or form.get("label") == "clear":
        return here, "", 303  # blind: the same item, its verdict now revealed
    items, _, _ = _queue(roots, reviews_dir, chosen)
    following, _, _ = navigation(items, chosen, run, record)
    if following is None:
        return pages.link("/review", **chosen.query()), "", 303
    return review_pages.item_link(following, chosen), "", 303


def queue_page(roots: Sequence[Path], reviews_dir: Path | None, params: Mapping[str, str]) -> str:
    """The review queue under ``params``' filters."""
    chosen = QueueFilter.of(params)
    items, runs, error = _queue(roots, reviews_dir, chosen)
    shown = items if chosen.include_labelled else [item for item in items if not item.labelled]
    return review_pages.queue_page(
        "/review", shown, len(items), chosen, judged_records(runs), error
    )


def calibration_page(roots: Sequence[Path], reviews_dir: Path | None) -> str:
    """The judges' calibration over the labels of every run shown and ``--reviews-dir``; a
    label that keeps no machine verdict (an import) is paired with its record in the runs
    shown, as ``llmbench calibrate`` does."""
    runs = find_runs(roots, reviews_dir)
    files = [path for run in runs for path in review_paths(run.folder, None)]
    files += review_paths(None, reviews_dir)
    try:
        labels = load_labels(files)
    except ReviewsError as exc:
        return review_pages.calibration_page({}, 0, str(exc))
    index = RecordIndex.of((run.folder.name, run.records) for run in runs)
    reviews, unpaired = pair_with_records(labels.current.values(), index)
    return review_pages.calibration_page(calibrate(reviews), len(labels), unpaired=unpaired)
