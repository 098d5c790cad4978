"""Human labels of items and judged assertions: ``reviews.jsonl``, one label a line.

A person (in ``llmbench view``, or a spreadsheet imported with ``llmbench reviews import``)
says whether an item's answer, or one judged assertion's verdict on it, should pass. A label is
keyed by what it is about, not by where it was made: the case's hash (its node id for a plain
test), the contestant, the repeat and the assertion (None: the whole item), and it holds a
digest of the answer it saw. A later run with the same case, model and repeat reuses the label
while its answer is the same; a changed answer drops it (the label is *stale*).

The file is append-only: the last line for a key wins, and ``label: clear`` takes a label back.
Appends hold an exclusive lock, so two browser tabs writing at once lose nothing. Each line also
keeps the machine's verdict it was compared with (``machine``: the assertion's type, its judges,
its criterion and whether it passed), so that calibration needs the labels alone, whichever run
they were made on.

Labels live beside a run's results (``reviews.jsonl`` in its folder), or in a shared folder of
the repository (``--reviews-dir``) to be committed; both are read, the later line winning.
"""

from __future__ import annotations

import datetime as dt
import fcntl
import hashlib
import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..results_folder import REVIEWS_FILE

#: What a person may say of an item or a judged assertion.
LABELS = ("pass", "fail", "unsure")
#: A line that takes the key's earlier label back.
CLEAR = "clear"
#: The version of a line's format.
REVIEW_VERSION = 1


class ReviewsError(Exception):
    """A labels file that cannot be read: the message names the file and line (``path:line:``)."""


@dataclass(frozen=True)
class ReviewKey:
    """What a label is about."""

    case: str  #: the case hash; a plain test's node id (it has no hash)
    model: str  #: the contestant (record ``model``)
    repeat: int
    assertion: int | None = None  #: index into the record's ``assertions``; None: the item


@dataclass(frozen=True)
class MachineVerdict:
    """The machine's verdict a label was given beside (the item's, or the assertion's)."""

    passed: bool | None  #: None: the machine decided nothing (unchecked, skipped)
    type: str | None = None  #: the assertion's type (None for an item label)
    judges: tuple[str, ...] = ()  #: model ids of the judges that decided it, sorted
    criterion: str | None = None  #: the judged assertion's rubric or criteria, as text

    def to_dict(self) -> dict[str, Any]:
        return {
            "passed": self.passed,
            "type": self.type,
            "judges": list(self.judges),
            "criterion": self.criterion,
        }


@dataclass(frozen=True)
class Review:
    """One line of ``reviews.jsonl``."""

    key: ReviewKey
    answer: str  #: :func:`answer_digest` of the answer the person saw
    label: str  #: one of :data:`LABELS`, or :data:`CLEAR`
    comment: str = ""
    reviewer: str = ""
    at: str = ""  #: ISO-8601 UTC time the label was given
    nodeid: str = ""  #: where it was given (informative: the key decides)
    eval_file: str = ""
    case_id: str = ""
    run: str = ""  #: the results folder's name
    machine: MachineVerdict | None = None
    #: where it was read from (``path:line``), for messages; not written
    source: str = field(default="", compare=False)

    def to_line(self) -> dict[str, Any]:
        """The JSON object of its line."""
        return {
            "v": REVIEW_VERSION,
            "case": self.key.case,
            "model": self.key.model,
            "repeat": self.key.repeat,
            "assertion": self.key.assertion,
            "answer": self.answer,
            "label": self.label,
            "comment": self.comment,
            "reviewer": self.reviewer,
            "at": self.at,
            "nodeid": self.nodeid,
            "eval_file": self.eval_file,
            "case_id": self.case_id,
            "run": self.run,
            "machine": self.machine.to_dict() if self.machine is not None else None,
        }


def utc_now() -> str:
    """Now, as a label's ``at``."""
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="milliseconds")


def answer_digest(record: Mapping[str, Any]) -> str:
    """16 hex characters digesting the answer a person judges: the reply's text, the tool
    calls it asked for, and a conversation's generated replies (a scripted turn is the case's,
    already in its hash). Equal answers give equal digests in every process."""
    conversation = record.get("conversation") or []
    replies = [
        [entry.get("turn"), entry.get("content"), entry.get("tool_calls") or []]
        for entry in conversation
        if isinstance(entry, Mapping) and entry.get("generated")
    ]
    calls = [
        [call.get("name"), call.get("arguments")]
        for call in record.get("tool_calls") or []
        if isinstance(call, Mapping)
    ]
    answer = {"response": record.get("response"), "tool_calls": calls, "replies": replies}
    text = json.dumps(answer, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def review_key(record: Mapping[str, Any], assertion: int | None = None) -> ReviewKey:
    """The key of a label on ``record`` (on its assertion ``assertion``, or the whole item)."""
    case = record.get("case_hash") or record.get("nodeid") or ""
    return ReviewKey(
        case=str(case),
        model=str(record.get("model") or ""),
        repeat=int(record.get("repeat") or 0),
        assertion=assertion,
    )


def machine_verdict(record: Mapping[str, Any], assertion: int | None = None) -> MachineVerdict:
    """The machine's verdict a label on ``record`` (its assertion ``assertion``, or the whole
    item) is given beside. An item's names its judged assertion when that one decided the item
    alone (the only check not unchecked); otherwise it names no judge."""
    entries = [a for a in record.get("assertions") or [] if isinstance(a, Mapping)]
    if assertion is not None:
        if assertion >= len(entries):
            return MachineVerdict(None)
        entry = entries[assertion]
        # A verdict the judge gate demoted is unchecked but keeps its judge's pass or fail:
        # a label on it still calibrates that judge.
        # A human label applied to the record (``machine_passed``) is not the machine's.
        undecided = entry.get("unchecked") and not entry.get("demoted")
        said = entry["machine_passed"] if "machine_passed" in entry else entry.get("passed")
        passed = None if undecided else bool(said)
        return MachineVerdict(
            passed, entry.get("type"), judges_of(record, assertion), entry.get("criterion")
        )
    # A human label applied to the record (``machine_outcome``) is not the machine's.
    outcome = record.get("machine_outcome") or record.get("outcome")
    passed = True if outcome == "passed" else False if outcome == "failed" else None
    checked = [i for i, entry in enumerate(entries) if _machine_checked(entry)]
    if len(checked) == 1 and (judges := judges_of(record, checked[0])):
        entry = entries[checked[0]]
        if passed is None and entry.get("demoted"):
            # The item was left unchecked because the gate demoted its one judged verdict:
            # what the judge said of the answer is the verdict a label on it is set against.
            passed = bool(entry.get("machine_passed", entry.get("passed")))
        return MachineVerdict(passed, entry.get("type"), judges, entry.get("criterion"))
    return MachineVerdict(passed)


def _machine_checked(entry: Mapping[str, Any]) -> bool:
    """The machine checked this verdict (a person's label on it aside), or the judge gate
    demoted what its judge said."""
    if entry.get("demoted"):
        return True
    if entry.get("verdict_source") == "human":
        return not entry.get("machine_unchecked")
    return not entry.get("unchecked")


def judges_of(record: Mapping[str, Any], assertion: int) -> tuple[str, ...]:
    """The judge group's judges of assertion ``assertion`` of ``record``: every judge called on
    it (their names as configured, else model ids), sorted. A judge that failed on this item
    stays in: a group is the panel as configured, so that one judge's error does not move the
    item's verdict into another group (the gate and calibration read the same rule).

    The assertion's own ``judges`` (written since judged verdicts carry them) decide: a
    conversation's verdicts stand at other positions than the case's assertions the judge
    entries' ``assertion`` counts, and a select-best contestant's judge calls are recorded on
    another contestant. Older records fall back on the judge entries."""
    entries = [a if isinstance(a, Mapping) else {} for a in record.get("assertions") or []]
    if any("judges" in entry for entry in entries):
        own = entries[assertion].get("judges") if 0 <= assertion < len(entries) else None
        return tuple(sorted(str(name) for name in own)) if isinstance(own, list) else ()
    names = {
        str(entry.get("judge") or entry.get("model_id"))
        for entry in record.get("judges") or []
        if isinstance(entry, Mapping) and entry.get("assertion") == assertion
    }
    return tuple(sorted(names))


def judged_positions(record: Mapping[str, Any]) -> list[int]:
    """The positions in ``record["assertions"]`` of the verdicts judges decided (those with a
    judge group, :func:`judges_of`): what a label on a judged assertion may target."""
    return [i for i in range(len(record.get("assertions") or [])) if judges_of(record, i)]


def review_paths(folder: Path | None, reviews_dir: Path | None) -> list[Path]:
    """The labels files that apply to a run: its folder's, then the shared folder's."""
    paths = []
    if folder is not None:
        paths.append(folder / REVIEWS_FILE)
    if reviews_dir is not None:
        paths.append(reviews_dir / REVIEWS_FILE)
    return paths


# -- reading ----------------------------------------------------------------------------------
def read_reviews(path: Path) -> list[Review]:
    """Every line of ``path`` in order; none for a missing file.

    A line that is not a label (broken JSON, a field missing or of the wrong type, an unknown
    label) raises :class:`ReviewsError` naming ``path:line``: a hand edit gone wrong is told,
    not skipped. Blank lines are skipped.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except (FileNotFoundError, NotADirectoryError):
        return []  # no labels yet (a folder not made, or something else in its place)
    except (OSError, UnicodeDecodeError) as exc:
        raise ReviewsError(f"{path}: cannot read: {exc}") from None
    reviews = []
    # "\n" only: a comment may hold U+2028, U+2029 or U+0085 raw, which splitlines() splits on.
    for number, line in enumerate(text.split("\n"), start=1):
        if line.strip():
            reviews.append(parse_review(line, f"{path}:{number}"))
    return reviews


def parse_review(line: str, where: str) -> Review:
    """One line as a :class:`Review`; :class:`ReviewsError` prefixed with ``where``."""
    try:
        data = json.loads(line)
    except json.JSONDecodeError as exc:
        raise ReviewsError(f"{where}: not JSON: {exc.msg} (column {exc.colno})") from None
    if not isinstance(data, dict):
        raise ReviewsError(f"{where}: not a JSON object")
    try:
        return review_from(data, where)
    except (KeyError, TypeError, ValueError) as exc:
        raise ReviewsError(f"{where}: {_why(exc)}") from None


def review_from(data: Mapping[str, Any], where: str = "") -> Review:
    """A label from its JSON object (KeyError, TypeError or ValueError when it is none)."""
    label = _text(data, "label")
    if label not in (*LABELS, CLEAR):
        raise ValueError(f"label {label!r} is none of {', '.join((*LABELS, CLEAR))}")
    assertion = data.get("assertion")
    if assertion is not None and (type(assertion) is not int or assertion < 0):
        raise ValueError(f"assertion {assertion!r} is not an index (0, 1, ...) or null")
    repeat = data.get("repeat", 0)
    if type(repeat) is not int or repeat < 0:
        raise ValueError(f"repeat {repeat!r} is not a whole number >= 0")
    key = ReviewKey(_text(data, "case"), _text(data, "model"), repeat, assertion)
    if not key.case or not key.model:
        raise ValueError("case and model must not be empty")
    return Review(
        key=key,
        answer=_text(data, "answer"),
        label=label,
        comment=_text(data, "comment", ""),
        reviewer=_text(data, "reviewer", ""),
        at=_text(data, "at", ""),
        nodeid=_text(data, "nodeid", ""),
        eval_file=_text(data, "eval_file", ""),
        case_id=_text(data, "case_id", ""),
        run=_text(data, "run", ""),
        machine=_machine(data.get("machine")),
        source=where,
    )


def _text(data: Mapping[str, Any], name: str, default: str | None = None) -> str:
    if name not in data or data[name] is None:
        if default is None:
            raise KeyError(name)
        return default
    value = data[name]
    if not isinstance(value, str):
        raise TypeError(f"{name} must be text, not {type(value).__name__}")
    return value


def _machine(data: Any) -> MachineVerdict | None:
    if data is None:
        return None
    if not isinstance(data, Mapping):
        raise TypeError("machine must be an object or null")
    passed = data.get("passed")
    if passed is not None and not isinstance(passed, bool):
        raise TypeError("machine.passed must be true, false or null")
    judges = data.get("judges") or []
    if not isinstance(judges, list) or not all(isinstance(j, str) for j in judges):
        raise TypeError("machine.judges must be a list of model ids")
    kind, criterion = data.get("type"), data.get("criterion")
    if not all(v is None or isinstance(v, str) for v in (kind, criterion)):
        raise TypeError("machine.type and machine.criterion must be text or null")
    return MachineVerdict(passed, kind, tuple(sorted(judges)), criterion)


def _why(exc: Exception) -> str:
    if isinstance(exc, KeyError):
        return f"field {exc.args[0]!r} is missing"
    return str(exc)


# -- the labels that hold ---------------------------------------------------------------------
@dataclass(frozen=True)
class Labels:
    """The labels in force: the last line per key, ``clear`` lines and ``unsure`` kept apart."""

    current: Mapping[ReviewKey, Review]  #: pass, fail or unsure, per key

    def for_record(self, record: Mapping[str, Any], assertion: int | None = None) -> Review | None:
        """The label on ``record`` (or its assertion), when it was given to this very answer."""
        review = self.current.get(review_key(record, assertion))
        if review is None or review.answer != answer_digest(record):
            return None
        return review

    def stale(self, records: Iterable[Mapping[str, Any]]) -> int:
        """Labels whose key matches one of ``records`` but whose answer differs (dropped)."""
        by_key = {review_key(r, None): answer_digest(r) for r in records}
        return sum(
            1
            for key, review in self.current.items()
            if (digest := by_key.get(ReviewKey(key.case, key.model, key.repeat))) is not None
            and digest != review.answer
        )

    def __len__(self) -> int:
        return len(self.current)


def current_labels(reviews: Iterable[Review]) -> Labels:
    """The labels in force after ``reviews`` in order (later wins; ``clear`` removes)."""
    current: dict[ReviewKey, Review] = {}
    for review in reviews:
        if review.label == CLEAR:
            current.pop(review.key, None)
        else:
            current[review.key] = review
    return Labels(current)


def load_labels(paths: Sequence[Path]) -> Labels:
    """The labels in force over ``paths`` (read in order, each line after the one before)."""
    return current_labels(review for path in paths for review in read_reviews(path))


# -- writing ----------------------------------------------------------------------------------
def append_review(path: Path, review: Review) -> None:
    """Append ``review`` to ``path`` as one line: :func:`append_reviews` of one label."""
    append_reviews(path, [review])


def append_reviews(path: Path, reviews: Sequence[Review]) -> None:
    """Append ``reviews`` to the labels file ``path`` all at once: under one exclusive lock, in
    one write, synced to disk (an import is never half done, nor interleaved with a label
    given in the viewer meanwhile).

    Refused (:class:`ReviewsError`, nothing written) when ``path`` cannot be read already (a
    broken line: the person fixes it first), or when a label would make a line that reading
    refuses (its ``source`` named). A last line without its newline gets one first.
    """
    lines = []
    for review in reviews:
        line = review.to_line()
        try:
            review_from(json.loads(json.dumps(line)))
        except (KeyError, TypeError, ValueError) as exc:
            where = review.source or review.nodeid or review.key.case
            why = f"field {exc.args[0]!r} is missing" if isinstance(exc, KeyError) else str(exc)
            raise ReviewsError(f"{where}: cannot be written as a label: {why}") from None
        lines.append(json.dumps(line, ensure_ascii=False) + "\n")
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        read_reviews(path)  # a broken file is told before anything is added to it
        size = os.fstat(fd).st_size
        data = "".join(lines)
        if data and size and os.pread(fd, 1, size - 1) != b"\n":
            data = "\n" + data
        os.write(fd, data.encode("utf-8"))
        os.fsync(fd)
    finally:
        os.close(fd)  # closing releases the lock
