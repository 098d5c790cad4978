"""People's labels in `llmbench view`: which items wait for a label, and writing one.

A label goes to the ``reviews.jsonl`` of ``--reviews-dir`` when the viewer was given one, else
to the run folder's; both are read (the shared one last, its line winning). An item is
*labelled* when a label is in force on it or on one of its judged assertions (for its very
answer: a changed answer's label no longer holds). The review queue walks the judged items
(items with an assertion that judges decided) that are not labelled yet.

*Disagreement* (a queue filter) is either of:

- the judges of one assertion fall on both sides of its pass line: one judge's mean score
  (a 1..5 scale mapped onto 0..1) is at or above 0.5 and another's below;
- a label in force on the same case and model (this item's, another repeat's, an earlier
  answer's) says otherwise than the machine's verdict on this item (an item label against the
  item's outcome, an assertion label against that assertion's verdict).

A labels file that cannot be read (a line edited by hand) is :class:`ReviewsError`, its message
naming ``path:line``; the pages show it and refuse to write until the file is fixed.
"""

from __future__ import annotations

import datetime as dt
import getpass
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..results import (
    Labels,
    Review,
    ReviewsError,
    answer_digest,
    append_review,
    judged_positions,
    judges_of,
    labels_for_run,
    machine_verdict,
    review_key,
    review_paths,
)
from .runs import Run

Record = Mapping[str, Any]
#: What a form may say: the labels of the store, and ``clear`` (take it back).
FORM_LABELS = ("pass", "fail", "unsure", "clear")
#: A judge's mean score at or above this (on 0..1) passes, for the disagreement filter.
PASS_LINE = 0.5


class LabelFormError(ValueError):
    """A label form that cannot be written (the message says why)."""


def labels_paths(run: Run, reviews_dir: Path | None) -> list[Path]:
    """The labels files that apply to ``run``: its folder's, then ``--reviews-dir``'s."""
    return review_paths(run.folder, reviews_dir)


def write_path(run: Run, reviews_dir: Path | None) -> Path:
    """Where a label given on ``run`` is written."""
    return review_paths(None if reviews_dir else run.folder, reviews_dir)[0]


def run_labels(run: Run, reviews_dir: Path | None) -> Labels:
    """The labels in force on ``run``, as it was loaded with them (ReviewsError for a broken
    file); read now for a run made without them."""
    if run.labels_error:
        raise ReviewsError(run.labels_error)
    if run.labels is not None:
        return run.labels
    return labels_for_run([run.folder], reviews_dir, False).labels


def judged(record: Record) -> list[int]:
    """The positions of ``record``'s assertions that judges decided: what a label on a judged
    assertion may target (the store's one mapping, :func:`judged_positions`)."""
    return judged_positions(record)


def reviewable(record: Record) -> bool:
    """A label can be given on ``record``: it names a case and a model (a plain test that
    called no model has none, and a label line needs both)."""
    key = review_key(record)
    return bool(key.case and key.model)


def labelled(record: Record, labels: Labels) -> bool:
    """A label is in force on ``record`` or on one of its judged assertions."""
    targets: list[int | None] = [None, *judged(record)]
    return any(labels.for_record(record, target) is not None for target in targets)


def judge_scores(record: Record, assertion: int) -> list[float]:
    """Each judge's mean score on the verdict at position ``assertion``, on 0..1 (a 1..5 scale
    mapped). A judge entry names its assertion by the case's index, which is not the position
    in a simulated user's conversation (its turn checks come first): the entries read are those
    of the verdict's judges and type, at that index when any is."""
    entries = [e for e in record.get("assertions") or []]
    if assertion >= len(entries) or not isinstance(entries[assertion], Mapping):
        return []
    kind, names = entries[assertion].get("type"), set(judges_of(record, assertion))
    mine = [
        entry
        for entry in record.get("judges") or []
        if isinstance(entry, Mapping)
        and entry.get("type", kind) == kind
        and str(entry.get("judge") or entry.get("model_id")) in names
    ]
    at = [entry for entry in mine if entry.get("assertion") == assertion]
    means = []
    for entry in at or mine:
        scores = [
            float(v)
            for v in (entry.get("scores") or {}).values()
            if isinstance(v, (int, float)) and not isinstance(v, bool)
        ]
        if scores and not entry.get("error"):
            mean = sum(scores) / len(scores)
            means.append((mean - 1) / 4 if max(scores) > 1 else mean)
    return means


def judges_split(record: Record) -> bool:
    """The judges of one of ``record``'s assertions fall on both sides of the pass line."""
    for assertion in judged(record):
        sides = {score >= PASS_LINE for score in judge_scores(record, assertion)}
        if len(sides) == 2:
            return True
    return False


def label_disagrees(
    record: Record,
    labels: Labels,
    index: Mapping[tuple[str, str, int | None], list[str]] | None = None,
) -> bool:
    """A label in force on the same case and model (any repeat, any answer) says otherwise
    than the machine's verdict on ``record``. ``index``: :func:`labels_by_case` of ``labels``
    (made here when not given)."""
    index = labels_by_case(labels) if index is None else index
    key = review_key(record)
    for target in [None, *judged(record)]:
        machine = machine_verdict(record, target).passed
        if machine is None:
            continue
        said = index.get((key.case, key.model, target), [])
        if any((label == "pass") != machine for label in said):
            return True
    return False


def labels_by_case(labels: Labels) -> dict[tuple[str, str, int | None], list[str]]:
    """The pass and fail labels in force by (case, model, assertion), every repeat together."""
    index: dict[tuple[str, str, int | None], list[str]] = {}
    for key, review in labels.current.items():
        if review.label in ("pass", "fail"):
            index.setdefault((key.case, key.model, key.assertion), []).append(review.label)
    return index


def judge_verdict(record: Record) -> bool | None:
    """Whether ``record``'s judged assertions all passed (None: none decided)."""
    verdicts = [machine_verdict(record, i).passed for i in judged(record)]
    decided = [v for v in verdicts if v is not None]
    return all(decided) if decided else None


@dataclass(frozen=True)
class QueueFilter:
    """The review queue's filters, from the page's query."""

    run: str = ""  #: one run's key; "" for every run shown
    model: str = ""
    eval_file: str = ""
    verdict: str = ""  #: ``passed``, ``failed`` (the judges'), or "" for both
    disagreement: bool = False
    include_labelled: bool = False
    blind: bool = False

    @classmethod
    def of(cls, params: Mapping[str, str]) -> QueueFilter:
        verdict = params.get("verdict", "")
        return cls(
            run=params.get("run", ""),
            model=params.get("model", ""),
            eval_file=params.get("eval_file", ""),
            verdict=verdict if verdict in ("passed", "failed") else "",
            disagreement=params.get("disagreement") == "1",
            include_labelled=params.get("labelled") == "1",
            blind=params.get("blind") == "1",
        )

    def query(self) -> dict[str, str]:
        """The filter as query parameters (kept across the queue's pages)."""
        values = {
            "run": self.run,
            "model": self.model,
            "eval_file": self.eval_file,
            "verdict": self.verdict,
            "disagreement": "1" if self.disagreement else "",
            "labelled": "1" if self.include_labelled else "",
            "blind": "1" if self.blind else "",
        }
        return {name: value for name, value in values.items() if value}


@dataclass(frozen=True)
class QueueItem:
    """One judged item of the queue."""

    run: Run
    record: Record
    labelled: bool


def eval_file_of(record: Record) -> str:
    """The eval file an item came from (its node id's file part)."""
    return str(record.get("eval_file") or str(record.get("nodeid") or "").split("::")[0])


def queue_items(runs: Sequence[tuple[Run, Labels]], chosen: QueueFilter) -> list[QueueItem]:
    """The judged items of ``runs`` that ``chosen`` keeps, in run then file order."""
    items = []
    for run, labels in runs:
        index = labels_by_case(labels) if chosen.disagreement else {}
        for record in run.records:
            if not judged(record) or record.get("outcome") == "error":
                continue
            done = labelled(record, labels)
            if done and not chosen.include_labelled:
                continue
            if chosen.model and record.get("model") != chosen.model:
                continue
            if chosen.eval_file and eval_file_of(record) != chosen.eval_file:
                continue
            verdict = judge_verdict(record)
            if chosen.verdict and (verdict is None or verdict != (chosen.verdict == "passed")):
                continue
            if chosen.disagreement and not (
                judges_split(record) or label_disagrees(record, labels, index)
            ):
                continue
            items.append(QueueItem(run, record, done))
    return items


def judged_records(runs: Sequence[tuple[Run, Labels]]) -> list[tuple[Run, Record]]:
    """Every judged item of ``runs`` (labelled or not): what the queue's filters choose from."""
    return [(run, r) for run, _ in runs for r in run.records if judged(r)]


# -- writing ------------------------------------------------------------------------------------
def reviewer_name() -> str:
    """Who labels: the login name (a label says who gave it)."""
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return ""


def form_review(record: Record, run: Run, form: Mapping[str, str]) -> Review:
    """The label a review form gives on ``record``; LabelFormError for a form that is none."""
    label = form.get("label", "")
    if label not in FORM_LABELS:
        raise LabelFormError(f"label {label!r} is none of {', '.join(FORM_LABELS)}")
    if not reviewable(record):
        raise LabelFormError(
            f"{record.get('nodeid')} called no model: a label needs a case and a model"
        )
    target = form.get("target", "item")
    assertion: int | None = None
    if target != "item":
        count = len(record.get("assertions") or [])
        # ASCII digits only ("²".isdigit() is true and int() refuses it), and few of them
        # (int() refuses over 4300)
        index = target.isascii() and target.isdigit() and len(target) <= 6
        if not index or int(target) >= count:
            raise LabelFormError(f"target {target!r} is not one of this item's assertions")
        assertion = int(target)
    return Review(
        key=review_key(record, assertion),
        answer=answer_digest(record),
        label=label,
        comment=form.get("comment", "").strip() if label != "clear" else "",
        reviewer=form.get("reviewer", "").strip() or reviewer_name(),
        at=dt.datetime.now(dt.timezone.utc).isoformat(timespec="milliseconds"),
        nodeid=str(record.get("nodeid") or ""),
        eval_file=eval_file_of(record),
        case_id=str(record.get("case_id") or ""),
        run=run.folder.name,
        # the record as it is: machine_verdict reads the machine's own verdict from a record
        # whose verdict a label overrode (machine_outcome, an assertion's machine_passed)
        machine=machine_verdict(record, assertion),
    )


def save_label(run: Run, reviews_dir: Path | None, record: Record, form: Mapping[str, str]) -> Path:
    """Write the label ``form`` gives on ``record``: the file it went to.

    Refused (ReviewsError) while a labels file of the run cannot be read: a line appended after
    a broken one would be read again once it is fixed, but the person should fix it first and
    know that labels are not being applied meanwhile.
    """
    run_labels(run, reviews_dir)  # raises for a broken file
    review = form_review(record, run, form)
    path = write_path(run, reviews_dir)
    append_review(path, review)
    return path


def find_record(run: Run, nodeid: str) -> Record | None:
    """The record of ``nodeid`` in ``run``."""
    return next((r for r in run.records if r.get("nodeid") == nodeid), None)


def navigation(
    items: Sequence[QueueItem], chosen: QueueFilter, run: Run, record: Record
) -> tuple[QueueItem | None, QueueItem | None, tuple[int, int]]:
    """Within the queue ``items`` (labelled ones included): the next item to review after
    ``record`` (the next unlabelled one, wrapping round; any next one when labelled ones are
    included), the one before it, and (left, total)."""
    here = next(
        (i for i, item in enumerate(items)
         if item.run.key == run.key and item.record.get("nodeid") == record.get("nodeid")),
        None,
    )  # fmt: skip
    start = -1 if here is None else here
    order = [*items[start + 1 :], *items[: max(start, 0)]]
    following = next((item for item in order if chosen.include_labelled or not item.labelled), None)
    before = items[here - 1] if here else None
    left = sum(1 for item in items if not item.labelled)
    return following, before, (left, len(items))
