"""Effective verdicts: a record's verdict once people's labels (:mod:`.reviews`) are applied.

A label given to an item (``assertion`` None) decides the item: its outcome becomes the label's.
A label given to an assertion sets that assertion's ``passed`` and its score (1.0 or 0.0), and
the item is decided again by the rule it ran under (:func:`...scoring.case_failure`: every
checked assertion passes, or the weighted score reaches the case's threshold; a conversation's
turn by turn, :func:`...scoring.failed_turn`). An item label wins over assertion labels.
``unsure`` decides nothing (it is counted). An error is never decided by a label: there is no
answer to judge. A skipped item that has an answer but that nothing checked (``error_kind``
``unchecked``: a select-best contest left undecided, a check without a judge) is decided by an
item label; its assertion labels are recorded on the assertions but decide nothing.

The same pure function serves the run (each item's record as it finishes, :mod:`.attach`) and
every reader after it (``llmbench report``, ``merge``, baselines, the viewer), so labels given
after a run show everywhere. It is idempotent: a record that a label changed keeps what the
machine said (``machine_outcome``, ``machine_score``, each assertion's ``machine_passed`` and
``machine_score``) and is first put back to it, so applying other labels (or none, under
``--ignore-reviews``) to it gives what applying them to the machine's record gives.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..results_folder import REVIEWS_FILE
from .reviews import Labels, Review, current_labels, load_labels, review_paths

#: ``verdict_source`` of a record (and an assertion) decided by a person's label.
HUMAN = "human"
#: ``verdict_source`` of a record decided by the machine alone.
MACHINE = "machine"
#: The outcomes a label may decide (an error or a run's skip is never decided).
_DECIDED = ("passed", "failed")
#: What a record keeps of a label on it.
_REVIEW_KEYS = ("label", "comment", "reviewer", "at")


@dataclass
class EffectiveRun:
    """Records with their effective verdicts, and what the labels did to them."""

    records: list[dict[str, Any]]
    files: list[str] = field(default_factory=list)  #: the labels files read
    labels: int = 0  #: labels in force (pass, fail or unsure)
    applied: int = 0  #: pass or fail labels given to an answer of these records
    to_pass: int = 0  #: items the machine failed (or left unchecked) that people passed
    to_fail: int = 0  #: items the machine passed (or left unchecked) that people failed
    unsure: int = 0  #: unsure labels given to an answer of these records
    stale: int = 0  #: labels on these records' cases whose answer changed (dropped)
    ignored: bool = False  #: ``--ignore-reviews``: no label applied

    def block(self) -> dict[str, Any]:
        """run.json's ``reviews`` block."""
        return {
            "files": list(self.files),
            "labels": self.labels,
            "applied": self.applied,
            "overrides": {"to_pass": self.to_pass, "to_fail": self.to_fail},
            "unsure": self.unsure,
            "stale": self.stale,
            "ignored": self.ignored,
        }


def machine_record(record: Mapping[str, Any]) -> dict[str, Any]:
    """``record`` as the machine decided it: every person's label taken back."""
    out = dict(record)
    if out.get("machine_outcome") is not None:
        out["outcome"] = out["machine_outcome"]
        out["passed"] = out["outcome"] == "passed"
        out["score"] = out.get("machine_score")
    for name in ("machine_outcome", "machine_score", "review"):
        if name in out:
            out[name] = None
    if "verdict_source" in out:
        out["verdict_source"] = MACHINE
    assertions = out.get("assertions")
    if isinstance(assertions, list):
        out["assertions"] = [_machine_assertion(entry) for entry in assertions]
    return out


def _machine_assertion(entry: Any) -> Any:
    if not isinstance(entry, Mapping) or entry.get("verdict_source") != HUMAN:
        return entry
    out = {k: v for k, v in entry.items() if k not in _ASSERTION_EXTRAS}
    out["passed"] = entry.get("machine_passed")
    out["score"] = entry.get("machine_score")
    if entry.get("machine_unchecked"):
        out["unchecked"] = True
    return out


#: Keys a person's label adds to an assertion entry.
_ASSERTION_EXTRAS = (
    "verdict_source",
    "machine_passed",
    "machine_score",
    "machine_unchecked",
    "review",
)


def effective_record(record: Mapping[str, Any], labels: Labels) -> dict[str, Any]:
    """``record`` with the labels of ``labels`` that hold for its answer applied (a new dict)."""
    return _apply(machine_record(record), labels)[0]


def _apply(base: dict[str, Any], labels: Labels) -> tuple[dict[str, Any], list[Review]]:
    """``base`` (a machine record) with its labels applied, and the labels that held for it."""
    outcome = base.get("outcome")
    unchecked_skip = outcome == "skipped" and base.get("error_kind") == "unchecked"
    if outcome not in _DECIDED and not unchecked_skip:
        return base, []
    held: list[Review] = []
    item_label = labels.for_record(base, None)
    if item_label is not None:
        held.append(item_label)
    entries = base.get("assertions") or []
    new_entries = list(entries)
    labelled: list[Review] = []
    for index, entry in enumerate(entries):
        review = labels.for_record(base, index)
        if review is None or not isinstance(entry, Mapping):
            continue
        held.append(review)
        if review.label in ("pass", "fail"):
            new_entries[index] = _labelled_assertion(entry, review)
            labelled.append(review)
    decided = [r for r in held if r.label != "unsure"]
    if not decided:
        return base, held
    out = dict(base)
    out["verdict_source"] = HUMAN
    out["machine_outcome"] = outcome
    out["machine_score"] = base.get("score")
    if labelled:
        out["assertions"] = new_entries
    if item_label is not None and item_label.label != "unsure":
        out["outcome"] = "passed" if item_label.label == "pass" else "failed"
        out["review"] = _review_entry(item_label, None)
    else:
        review = labelled[0]
        out["review"] = _review_entry(review, review.key.assertion)
        # A labelled assertion is checked (by a person), so an item nothing else checked (its
        # judge demoted by the gate, say) is decided too.
        score, failed = redecide(new_entries, base.get("threshold"))
        out["score"] = score
        out["outcome"] = "failed" if failed else "passed"
    out["passed"] = out["outcome"] == "passed"
    return out, held


def _labelled_assertion(entry: Mapping[str, Any], review: Review) -> dict[str, Any]:
    passed = review.label == "pass"
    out = dict(entry)
    out.pop("unchecked", None)
    out.update(
        passed=passed,
        score=1.0 if passed else 0.0,
        verdict_source=HUMAN,
        machine_passed=entry.get("passed"),
        machine_score=entry.get("score"),
        review=_review_entry(review, None),
    )
    if entry.get("unchecked"):
        out["machine_unchecked"] = True
    return out


def _review_entry(review: Review, assertion: int | None) -> dict[str, Any]:
    entry: dict[str, Any] = {name: getattr(review, name) for name in _REVIEW_KEYS}
    if assertion is not None:
        entry["assertion"] = assertion
    return entry


def redecide(entries: Sequence[Any], threshold: Any) -> tuple[float | None, bool]:
    """The score and whether the item fails, from its assertion entries (as the record keeps
    them), by the rule the item ran under: a conversation's turn by turn, another's at once."""
    from ..scoring import Verdict, case_failure, failed_turn, score_verdicts

    verdicts = [
        Verdict(
            str(entry.get("type")),
            bool(entry.get("passed")),
            float(entry.get("score") or 0.0),
            float(entry["weight"]) if entry.get("weight") is not None else 1.0,
            str(entry.get("reason") or ""),
            unchecked=bool(entry.get("unchecked")),
            turn=entry.get("turn"),
        )
        for entry in entries
        if isinstance(entry, Mapping)
    ]
    score = score_verdicts(verdicts)
    limit = float(threshold) if threshold is not None else 1.0
    if any(verdict.turn is not None for verdict in verdicts):
        return score, failed_turn(verdicts, limit) is not None
    checked = [verdict for verdict in verdicts if not verdict.unchecked]
    return score, case_failure(checked, score, limit) is not None


def effective_records(
    records: Iterable[Mapping[str, Any]], labels: Labels, files: Sequence[str] = ()
) -> EffectiveRun:
    """Every record of ``records`` with its effective verdict, and the counts of run.json's
    ``reviews`` block."""
    bases = [machine_record(record) for record in records]
    run = EffectiveRun([], files=list(files), labels=len(labels), stale=labels.stale(bases))
    for base in bases:
        out, held = _apply(base, labels)
        run.records.append(out)
        count_labels(run, out, held)
    return run


def count_labels(run: EffectiveRun, record: Mapping[str, Any], held: Sequence[Review]) -> None:
    """Add one record's labels (``held``: those that held for its answer) to ``run``'s counts."""
    run.unsure += sum(1 for review in held if review.label == "unsure")
    run.applied += sum(1 for review in held if review.label != "unsure")
    machine, now = record.get("machine_outcome"), record.get("outcome")
    if machine is not None and machine != now:
        if now == "passed":
            run.to_pass += 1
        elif now == "failed":
            run.to_fail += 1


def labels_held(record: Mapping[str, Any], labels: Labels) -> list[Review]:
    """The labels that hold for ``record``'s answer (the item's and its assertions')."""
    base = machine_record(record)
    return _apply(base, labels)[1]


@dataclass(frozen=True)
class RunLabels:
    """The labels of a run and where they were read from."""

    labels: Labels
    files: tuple[str, ...]
    ignored: bool

    def apply(self, records: Iterable[Mapping[str, Any]]) -> EffectiveRun:
        """``records`` with these labels applied (the machine's verdicts when ignored)."""
        run = effective_records(records, self.labels, self.files)
        run.ignored = self.ignored
        return run


def labels_for_run(
    folders: Sequence[Path | None], reviews_dir: Path | None, ignore: bool
) -> RunLabels:
    """The labels that apply to the run(s) in ``folders``: each folder's ``reviews.jsonl``,
    then ``reviews_dir``'s (a later line wins); none under ``ignore`` (``--ignore-reviews``).
    A broken file raises :class:`.reviews.ReviewsError` naming ``path:line``."""
    if ignore:
        return RunLabels(current_labels(()), (), True)
    paths: list[Path] = []
    for folder in folders:
        paths += review_paths(folder, None)
    paths += review_paths(None, reviews_dir)
    found = [path for path in dict.fromkeys(paths) if path.is_file()]
    return RunLabels(load_labels(found), tuple(str(path) for path in found), False)


def read_labels(folders: Sequence[Path], reviews_dir: Path | None, ignore: bool) -> RunLabels:
    """:func:`labels_for_run` for a reader of saved runs: a broken labels file is a
    :class:`...results_folder.ResultsError` naming ``path:line`` (the commands' error)."""
    from ..results_folder import ResultsError
    from .reviews import ReviewsError

    try:
        return labels_for_run(folders, reviews_dir, ignore)
    except ReviewsError as exc:
        raise ResultsError(f"people's labels: {exc}") from None


def load_labelled(
    folder: Path, reviews_dir: Path | None = None, ignore: bool = False
) -> list[dict[str, Any]]:
    """The records of the results folder ``folder`` with their effective verdicts: its own
    labels and ``reviews_dir``'s applied (none under ``ignore``). ResultsError as
    :meth:`...results_folder.ResultsFolder.read_records` raises it, or for a broken labels file."""
    from ..results_folder import ResultsFolder

    records = ResultsFolder(folder).read_records()
    return read_labels([folder], reviews_dir, ignore).apply(records).records


def keep_labels(labels: RunLabels, folder: Path) -> None:
    """Write the labels in force into ``folder``'s ``reviews.jsonl`` (a merged run's folder),
    so that its later readers apply them; nothing under ``--ignore-reviews``."""
    from .reviews import append_review

    if labels.ignored:
        return
    for review in labels.labels.current.values():
        append_review(folder / REVIEWS_FILE, review)


def reviews_line(block: Mapping[str, Any]) -> str | None:
    """The terminal's line on a run's labels (None when there were none): ``reviews: 3 verdicts
    by people (2 fail->pass, 1 pass->fail), 1 label stale (answer changed)``."""
    if block.get("ignored") or not block.get("labels"):
        return None
    applied = int(block.get("applied") or 0)
    overrides = block.get("overrides") or {}
    to_pass, to_fail = int(overrides.get("to_pass") or 0), int(overrides.get("to_fail") or 0)
    text = f"reviews: {applied} verdict{'s' if applied != 1 else ''} by people"
    text += f" ({to_pass} fail->pass, {to_fail} pass->fail)"
    if unsure := int(block.get("unsure") or 0):
        text += f", {unsure} unsure"
    if stale := int(block.get("stale") or 0):
        text += f", {stale} label{'s' if stale != 1 else ''} stale (answer changed)"
    return text
