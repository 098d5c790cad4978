"""Labels in and out: ``llmbench reviews export`` and ``import`` (CSV or JSONL), and the pairing
of labels that carry no machine verdict with the records of the runs given.

An export row is one label in force, with its key (case hash, model, repeat, assertion), the
answer digest, the label, comment, reviewer and time, where it was given (node id, case id, eval
file, run) and the machine verdict it was compared with (``machine``: pass, fail, ``none`` when
the machine decided nothing, empty when the label keeps no verdict; the assertion's type, judges
and criterion). Importing an export gives the same labels in force (in CSV an empty cell is
no value: a criterion that is the empty text comes back as none; JSONL keeps it).

A row made elsewhere (a spreadsheet) may give only a node id (and an assertion index) and a label:
its key, answer digest and machine verdict are then filled from the records of the runs given.
A row that names no item of them, or is broken, is refused with its line; one bad row refuses the
whole file (nothing is half imported). Labels are read case-insensitively: see :data:`WORDS`.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from .effective import machine_record
from .reviews import (
    CLEAR,
    MachineVerdict,
    Review,
    ReviewKey,
    ReviewsError,
    answer_digest,
    machine_verdict,
    review_key,
)

#: What an imported row's label may say (case-insensitive), and the label it means.
WORDS: Mapping[str, str] = {
    "pass": "pass", "yes": "pass", "y": "pass", "1": "pass", "true": "pass",
    "fail": "fail", "no": "fail", "n": "fail", "0": "fail", "false": "fail",
    "unsure": "unsure", "?": "unsure",
    "clear": CLEAR,
}  # fmt: skip
#: The columns of an export, in order (CSV header; JSONL keys, ``machine`` there an object).
EXPORT_COLUMNS = (
    "nodeid", "case_id", "eval_file", "model", "repeat", "assertion", "assertion_type",
    "judges", "criterion", "machine", "label", "comment", "reviewer", "at", "case", "answer",
    "run",
)  # fmt: skip
#: ``--format`` of export and import.
REVIEW_FORMATS = ("csv", "jsonl")


@dataclass(frozen=True)
class RecordIndex:
    """The records of the runs given, found by label key or by node id (first run first)."""

    by_key: Mapping[tuple[str, str, int], Sequence[tuple[str, Mapping[str, Any]]]]
    by_nodeid: Mapping[str, Sequence[tuple[str, Mapping[str, Any]]]]

    @classmethod
    def of(cls, runs: Iterable[tuple[str, Sequence[Mapping[str, Any]]]]) -> RecordIndex:
        """``runs``: (run name, its records), in the order given."""
        by_key: dict[tuple[str, str, int], list[tuple[str, Mapping[str, Any]]]] = {}
        by_nodeid: dict[str, list[tuple[str, Mapping[str, Any]]]] = {}
        for name, records in runs:
            for record in records:
                key = review_key(record)
                by_key.setdefault((key.case, key.model, key.repeat), []).append((name, record))
                by_nodeid.setdefault(str(record.get("nodeid") or ""), []).append((name, record))
        return cls(by_key, by_nodeid)

    def find(self, review: Review) -> tuple[str, Mapping[str, Any]] | None:
        """The record ``review`` was given on: same key and answer digest, else same node id
        and digest (a label without a digest takes the first record of its node id)."""
        key = review.key
        candidates = [
            *self.by_key.get((key.case, key.model, key.repeat), ()),
            *self.by_nodeid.get(review.nodeid, ()),
        ]
        for name, record in candidates:
            if not review.answer or answer_digest(record) == review.answer:
                return name, record
        return None


def pair_with_records(reviews: Iterable[Review], index: RecordIndex) -> tuple[list[Review], int]:
    """``reviews`` with a machine verdict: a label that keeps none takes it from its record in
    ``index``; the second value counts those whose record was not found (left as they are)."""
    paired, unpaired = [], 0
    for review in reviews:
        if review.machine is not None:
            paired.append(review)
            continue
        found = index.find(review)
        if found is None:
            unpaired += 1
            paired.append(review)
            continue
        machine = machine_verdict(machine_record(found[1]), review.key.assertion)
        paired.append(replace(review, machine=machine))
    return paired, unpaired


# -- export -----------------------------------------------------------------------------------
def export_row(review: Review) -> dict[str, Any]:
    """One label as an export row (JSONL: ``machine`` an object or null)."""
    machine = review.machine
    return {
        "nodeid": review.nodeid,
        "case_id": review.case_id,
        "eval_file": review.eval_file,
        "model": review.key.model,
        "repeat": review.key.repeat,
        "assertion": review.key.assertion,
        "assertion_type": machine.type if machine else None,
        "judges": "+".join(machine.judges) if machine else "",
        "criterion": machine.criterion if machine else None,
        "machine": _verdict_word(machine),
        "label": review.label,
        "comment": review.comment,
        "reviewer": review.reviewer,
        "at": review.at,
        "case": review.key.case,
        "answer": review.answer,
        "run": review.run,
    }


def _verdict_word(machine: MachineVerdict | None) -> str:
    if machine is None:
        return ""
    return "none" if machine.passed is None else "pass" if machine.passed else "fail"


def export_text(reviews: Iterable[Review], fmt: str) -> str:
    """The labels as CSV (header first) or JSONL."""
    rows = [export_row(review) for review in reviews]
    if fmt == "jsonl":
        return "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=EXPORT_COLUMNS, lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: "" if v is None else v for k, v in row.items()})
    return out.getvalue()


# -- import -----------------------------------------------------------------------------------
def format_of(path: Path, given: str | None) -> str:
    """``--format``, else the file's extension (``.csv``; ``.jsonl``, ``.json``, ``.ndjson``)."""
    if given is not None:
        return given
    suffix = path.suffix.lower()
    if suffix == ".csv":
        return "csv"
    if suffix in (".jsonl", ".ndjson", ".json"):
        return "jsonl"
    raise ReviewsError(
        f"{path}: cannot tell the format from its extension: give --format csv|jsonl"
    )


def read_rows(path: Path, fmt: str) -> list[tuple[str, dict[str, Any]]]:
    """(``path:line``, row) of every row of ``path``; broken JSON raises :class:`ReviewsError`.
    An empty CSV cell is None (as JSONL's null)."""
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise ReviewsError(f"{path}: cannot read: {exc}") from None
    rows: list[tuple[str, dict[str, Any]]] = []
    if fmt == "csv":
        return _csv_rows(path, text)
    # "\n" only: str.splitlines() also splits on U+2028, U+2029 and U+0085, which JSON keeps
    # raw inside a string (a comment may hold them).
    for number, line_text in enumerate(text.split("\n"), start=1):
        if not line_text.strip():
            continue
        where = f"{path}:{number}"
        try:
            data = json.loads(line_text)
        except json.JSONDecodeError as exc:
            raise ReviewsError(f"{where}: not JSON: {exc.msg} (column {exc.colno})") from None
        if not isinstance(data, dict):
            raise ReviewsError(f"{where}: not a JSON object")
        rows.append((where, data))
    return rows


def _csv_rows(path: Path, text: str) -> list[tuple[str, dict[str, Any]]]:
    """The rows of a CSV file by the header's names, each with the line it starts on (a
    quoted cell may span lines; blank lines are skipped)."""
    reader = csv.reader(io.StringIO(text))
    header: list[str] | None = None
    rows: list[tuple[str, dict[str, Any]]] = []
    while True:
        start = reader.line_num + 1
        try:
            cells = next(reader)
        except StopIteration:
            break
        except csv.Error as exc:
            raise ReviewsError(f"{path}:{start}: not CSV: {exc}") from None
        if not any(cell.strip() for cell in cells):
            continue
        if header is None:
            header = [cell.strip() for cell in cells]
            if "label" not in header:
                raise ReviewsError(f"{path}:{start}: the header has no 'label' column")
            continue
        if len(cells) > len(header):
            raise ReviewsError(f"{path}:{start}: more cells than the header has columns")
        values = [cell if cell else None for cell in cells]
        rows.append((f"{path}:{start}", dict(zip(header, values, strict=False))))
    if header is None:
        raise ReviewsError(f"{path}:1: the header has no 'label' column")
    return rows


def import_reviews(
    rows: Sequence[tuple[str, Mapping[str, Any]]], index: RecordIndex
) -> list[Review]:
    """Every row as a label, or :class:`ReviewsError` naming every bad row by its line."""
    reviews, problems = [], []
    for where, row in rows:
        try:
            reviews.append(_row_review(row, where, index))
        except (KeyError, TypeError, ValueError) as exc:
            why = f"field {exc.args[0]!r} is missing" if isinstance(exc, KeyError) else str(exc)
            problems.append(f"{where}: {why}")
    if problems:
        head = f"{len(problems)} of {len(rows)} row(s) refused, nothing imported:"
        raise ReviewsError("\n".join([head, *problems]))
    return reviews


def _row_review(row: Mapping[str, Any], where: str, index: RecordIndex) -> Review:
    word = _cell(row, "label")
    if word is None:
        raise KeyError("label")
    label = WORDS.get(word.lower())
    if label is None:
        raise ValueError(f"label {word!r} is none of {', '.join(sorted(WORDS))}")
    assertion = _index(row.get("assertion"), "assertion")
    repeat = _index(row.get("repeat"), "repeat")
    nodeid = _cell(row, "nodeid") or ""
    case, model, answer = _cell(row, "case"), _cell(row, "model"), _cell(row, "answer") or ""
    probe = Review(
        ReviewKey(case or "", model or "", repeat or 0, assertion), answer, label, nodeid=nodeid
    )
    found = index.find(probe)
    record = found[1] if found else None
    if record is None and not (case and model and answer):
        if not nodeid and not case:
            raise ValueError("names no item: give nodeid (or case, model and answer)")
        raise ValueError(f"names no item of the runs given ({nodeid or case!r})")
    if record is not None:
        key = review_key(record, assertion)
        answer = answer or answer_digest(record)
        entries = record.get("assertions") or []
        if assertion is not None and assertion >= len(entries):
            raise ValueError(f"assertion {assertion} is not one of the item's {len(entries)}")
    else:
        key = ReviewKey(str(case), str(model), repeat or 0, assertion)
    machine = _row_machine(row)
    if machine is None and record is not None:
        machine = machine_verdict(machine_record(record), assertion)
    return Review(
        key=key,
        answer=answer,
        label=label,
        comment=_cell(row, "comment", strip=False) or "",
        reviewer=_cell(row, "reviewer") or "",
        at=_cell(row, "at") or "",
        nodeid=nodeid or str((record or {}).get("nodeid") or ""),
        eval_file=_cell(row, "eval_file") or str((record or {}).get("eval_file") or ""),
        case_id=_cell(row, "case_id") or str((record or {}).get("case_id") or ""),
        run=_cell(row, "run") or (found[0] if found else ""),
        machine=machine,
        source=where,
    )


def _cell(row: Mapping[str, Any], name: str, strip: bool = True) -> str | None:
    value = row.get(name)
    if value is None:
        return None
    if isinstance(value, (dict, list)):
        raise TypeError(f"{name} must be text")
    text = str(value)
    text = text.strip() if strip else text
    return text if text.strip() else None


def _index(value: Any, name: str) -> int | None:
    """A whole number >= 0 from a cell (``"2"``, ``2``, ``2.0``), or None when empty."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, bool):
        raise ValueError(f"{name} {value!r} is not a whole number >= 0")
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} {value!r} is not a whole number >= 0") from None
    if number < 0 or number != int(number):
        raise ValueError(f"{name} {value!r} is not a whole number >= 0")
    return int(number)


def _row_machine(row: Mapping[str, Any]) -> MachineVerdict | None:
    """The machine verdict a row keeps (an export's), or None."""
    machine = row.get("machine")
    if isinstance(machine, Mapping):  # JSONL as reviews.jsonl writes it
        passed = machine.get("passed")
        if passed is not None and not isinstance(passed, bool):
            raise TypeError("machine.passed must be true, false or null")
        judges = machine.get("judges") or []
        if not isinstance(judges, list):
            raise TypeError("machine.judges must be a list")
        return MachineVerdict(
            passed, machine.get("type"), tuple(sorted(map(str, judges))), machine.get("criterion")
        )
    word = _cell(row, "machine")
    if word is None:
        return None
    verdicts = {"pass": True, "fail": False, "none": None}
    if word.lower() not in verdicts:
        raise ValueError(f"machine {word!r} is none of pass, fail, none")
    judges = _cell(row, "judges") or ""
    criterion = row.get("criterion")
    if criterion is not None and not isinstance(criterion, str):
        raise TypeError("criterion must be text")
    return MachineVerdict(
        verdicts[word.lower()],
        _cell(row, "assertion_type"),
        tuple(sorted(j for j in judges.split("+") if j)),
        criterion,  # as written: an empty or blank rubric is a judge group of its own
    )
